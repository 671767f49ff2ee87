/* Plotly figures drawn when the reader comes near them (issue 24, slow connection).
   plotly.min.js (4.8 MB) was a synchronous script in <head>: a chapter stayed blank until it had
   arrived (first paint 8.9 to 10.6 s at 10 Mbit/s). Now book/_ext/plotly_offline.py moves each
   figure's Plotly.newPlot call out of the page into its own small script (_static/figures/*.js,
   which calls tlPlotly.define) and leaves the empty figure <div data-tl-figure="..."> in the text.
   This loader (a few kB, deferred) watches those divs; when one comes within a screen of the
   viewport it loads, once, plotly.js (the "cartesian" partial bundle, pinned in package-lock.json:
   the book's figures are heatmaps, scatter and bar charts), then plotly_touch.js, plotly_theme.js and
   plotly_keys.js in that order (each wraps Plotly.newPlot), and the figure's script, and draws it.
   Script tags, not fetch(), so that a page opened from a folder (file://) draws its figures too.

   window.tlPlotly.load() loads plotly (the live boxes use it); tlPlotly.drawAll() draws every figure
   of the page (tests, and printing: Ctrl+P / Cmd+P draws them all first, then opens the print dialog;
   a print started from the browser's menu draws them for the next print and prints a note in place
   of the figures not drawn yet). */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.tlPlotly) return;
  var BASE = new URL(".", script.src).href; // .../_static/
  var FILES = (script.dataset.files || "plotly.min.js").split(" ");
  var specs = {}, waiting = {}, plotly = null;

  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.async = false;
      s.onload = function () { resolve(); };
      s.onerror = function () { reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }
  function load() {
    if (!plotly) {
      plotly = FILES.reduce(function (p, f) {
        return p.then(function () { return loadScript(BASE + f); });
      }, Promise.resolve());
      plotly.catch(function () { plotly = null; });
    }
    return plotly;
  }
  function spec(id, url) {
    if (specs[id]) return Promise.resolve(specs[id]);
    return new Promise(function (resolve, reject) {
      waiting[id] = resolve;
      loadScript(new URL(url, document.baseURI).href).catch(reject);
    });
  }
  function draw(div) {
    if (!div._tlDrawn) {
      div._tlDrawn = Promise.all([load(), spec(div.id, div.dataset.tlFigure)]).then(function (r) {
        var s = r[1];
        return window.Plotly.newPlot(div, s.data, s.layout, s.config);
      });
      div._tlDrawn.catch(function (err) {
        div._tlDrawn = null;
        console.error("plotly figure " + div.id + ": " + err.message);
      });
    }
    return div._tlDrawn;
  }
  function figures() {
    return Array.prototype.slice.call(document.querySelectorAll("div.plotly-graph-div[data-tl-figure]"));
  }
  function drawAll() {
    return Promise.all(figures().map(draw));
  }
  window.tlPlotly = {
    load: load,
    draw: draw,
    drawAll: drawAll,
    define: function (id, data, layout, config) {
      specs[id] = { data: data, layout: layout, config: config };
      if (waiting[id]) { waiting[id](specs[id]); delete waiting[id]; }
    },
  };

  function start() {
    var divs = figures();
    if (!divs.length) return;
    if (!("IntersectionObserver" in window)) { drawAll(); return; }
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { observer.unobserve(e.target); draw(e.target); }
      });
    }, { rootMargin: "100% 0px 100% 0px" }); // a screen above and below
    divs.forEach(function (d) { observer.observe(d); });
    window.addEventListener("keydown", function (ev) {
      if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && !ev.shiftKey && (ev.key === "p" || ev.key === "P")) {
        if (figures().every(function (d) { return d.classList.contains("js-plotly-plot"); })) return;
        ev.preventDefault();
        drawAll().then(function () { setTimeout(function () { window.print(); }, 100); });
      }
    });
    window.addEventListener("beforeprint", drawAll);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
