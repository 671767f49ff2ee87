/* Plotly figures laid out for a phone's width (issue 24, phone readers).
   At 390 px the figures kept their desktop layout: 9 of the 10 titles ran past the right edge (a
   17 px title in a 358 px figure), chapter 1's subplot titles ran together ("head 0head 1head 2"),
   chapter 3's two panel titles were written over each other, and the toolbar sat over the title in
   5 figures. Loaded after plotly_touch.js (book/_ext/plotly_offline.py), this wraps Plotly.newPlot:
   when the figure's box is narrower than NARROW px,
   - the title leaves the SVG and is written above the figure as text (a <p class="tl-plotly-title">),
     where it wraps like the page's text;
   - the top margin holds the toolbar alone, which loses the two tools these figures have no use for
     (box and lasso select);
   - once drawn, every annotation (a subplot title, a note) wider than its panel is set smaller
     (down to 11 px) and then wrapped at spaces to the panel's width, and the top margin grows until
     the highest annotation sits below the toolbar.
   A wider box (a laptop, a tablet, a printed page) keeps the figure as the chapter made it. */
(function () {
  if (!window.Plotly) {
    return;
  }
  var NARROW = 560; // px: the column of a phone or a small tablet in portrait
  var TOOLBAR = 30; // px: plotly's toolbar (modebar) height at the top of the figure
  var MIN_FONT = 11;

  function titleText(layout) {
    var t = layout && layout.title;
    return (typeof t === "string" ? t : t && t.text) || "";
  }

  // the title's text, its <br> a space (the paragraph wraps at the column), except before a line in
  // a smaller font (a subtitle such as chapter 7's sizes and date), which starts a line of its own
  function writeTitle(div, text) {
    var p = document.createElement("p");
    p.className = "tl-plotly-title";
    text.split(/<br\s*\/?>/i).forEach(function (line, i) {
      var tmp = document.createElement("span");
      tmp.innerHTML = line; // plotly's own title markup (<span style>, <b>, <sup>): keep its text only
      var words = tmp.textContent.trim();
      if (!words) return;
      if (i && /^\s*<span[^>]*font-size/i.test(line)) {
        var small = document.createElement("small");
        small.textContent = words;
        p.appendChild(document.createElement("br"));
        p.appendChild(small);
      } else {
        p.appendChild(document.createTextNode((i ? " " : "") + words));
      }
    });
    var anchor = div.parentElement && div.parentElement.style.height ? div.parentElement : div;
    anchor.insertAdjacentElement("beforebegin", p);
  }

  function wrap(line, perLine) {
    var words = line.split(" "), out = [], cur = "";
    words.forEach(function (w) {
      if (cur && (cur + " " + w).length > perLine) {
        out.push(cur);
        cur = w;
      } else {
        cur = cur ? cur + " " + w : w;
      }
    });
    if (cur) out.push(cur);
    return out.join("<br>");
  }

  // the width an annotation may take: its panel's (the x axis whose domain holds it) or the figure's
  function room(fl, a) {
    var avail = fl.width - 4;
    if (a.xref === "paper") {
      Object.keys(fl).forEach(function (k) {
        if (!/^xaxis\d*$/.test(k) || !fl[k].domain) return;
        var d = fl[k].domain;
        if (a.x >= d[0] - 1e-6 && a.x <= d[1] + 1e-6) {
          avail = Math.min(avail, Math.max((d[1] - d[0]) * fl._size.w - 2, 40));
        }
      });
    }
    return avail;
  }

  function fit(gd) {
    var fl = gd._fullLayout, anns = (gd.layout && gd.layout.annotations) || [];
    if (!fl || !anns.length) return Promise.resolve();
    // one font size for every annotation, the largest at which each fits its panel (not below
    // MIN_FONT), so that the subplot titles stay alike; what still does not fit is wrapped
    var found = [], size = Infinity;
    gd.querySelectorAll(".annotation").forEach(function (node) {
      var i = +node.getAttribute("data-index"), a = anns[i], full = fl.annotations[i];
      var text = node.querySelector(".annotation-text");
      if (!a || !full || !text || !a.text) return;
      var font = (full.font && full.font.size) || 12;
      var width = text.getBoundingClientRect().width, avail = room(fl, full);
      found.push({ i: i, a: a, font: font, width: width, avail: avail });
      if (width > avail) size = Math.min(size, Math.max(MIN_FONT, Math.floor((font * avail) / width)));
    });
    if (size === Infinity) return Promise.resolve();
    var update = {};
    found.forEach(function (f) {
      var s = Math.min(size, f.font), width = (f.width * s) / f.font;
      update["annotations[" + f.i + "].font.size"] = s;
      if (width > f.avail) {
        var lines = String(f.a.text).split(/<br\s*\/?>/i);
        var longest = Math.max.apply(null, lines.map(function (l) { return l.replace(/<[^>]+>/g, "").length; }));
        var perLine = Math.max(8, Math.floor((longest * f.avail) / width));
        update["annotations[" + f.i + "].text"] = lines.map(function (l) { return wrap(l, perLine); }).join("<br>");
      }
    });
    return Promise.resolve(window.Plotly.relayout(gd, update)).then(function () {
      // the highest annotation below the toolbar
      var top = gd.getBoundingClientRect().top, highest = Infinity;
      gd.querySelectorAll(".annotation").forEach(function (node) {
        highest = Math.min(highest, node.getBoundingClientRect().top - top);
      });
      var need = TOOLBAR + 2 - highest;
      if (highest < Infinity && need > 0) {
        return window.Plotly.relayout(gd, { "margin.t": gd._fullLayout.margin.t + Math.ceil(need) });
      }
    });
  }

  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function (gd, data, layout, config) {
    var div = typeof gd === "string" ? document.getElementById(gd) : gd;
    if (!div || !div.clientWidth || div.clientWidth >= NARROW) {
      return newPlot.apply(this, arguments);
    }
    layout = Object.assign({}, layout || {});
    var title = titleText(layout);
    if (title && !div.dataset.tlPhoneTitle) {
      writeTitle(div, title);
      div.dataset.tlPhoneTitle = "1";
    }
    if (title) layout.title = { text: "" };
    var above = (layout.annotations || []).some(function (a) { return a.yref === "paper" && a.y >= 0.99; });
    layout.margin = Object.assign({}, layout.margin || {}, { t: above ? TOOLBAR + 20 : TOOLBAR + 6 });
    config = Object.assign({}, config || {});
    config.modeBarButtonsToRemove = (config.modeBarButtonsToRemove || []).concat(["select2d", "lasso2d"]);
    var result = newPlot.call(this, gd, data, layout, config);
    return Promise.resolve(result).then(function (r) {
      return fit(div).then(function () { return r; }, function () { return r; });
    });
  };
})();
