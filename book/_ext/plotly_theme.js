/* Plotly figures follow the page's light or dark mode.
   The figures are stored with plotly's "plotly_white" template: a white paper, text #2a3f5f, pale
   grid. In dark mode (pydata-sphinx-theme sets data-theme="dark" on <html>) that left a white block
   in a dark page. Loaded after plotly.min.js and before the figures' inline scripts, this
   - wraps Plotly.newPlot so that each figure, once drawn, is restyled for the current mode;
   - watches data-theme (MutationObserver) and restyles every figure when the reader switches;
   - draws figures light while the page prints (beforeprint / afterprint), whatever the mode.
   The dark colours are the theme's own CSS variables (background, text, border), read when applied.
   Layout colours change (Plotly.relayout); of the traces, only a line or marker colour (one colour
   per trace) that would stand out from the dark background by less than 3:1 (WCAG's contrast for
   graphics) is mixed with white until it reaches 3:1 (chapter 4's post-norm line, #00224e, was
   1.3:1 on #121212): the data and the colour scales stay as stored. The light values a figure had
   are kept and put back on the way to light. */
(function () {
  if (!window.Plotly) {
    return;
  }
  var root = document.documentElement;
  var printing = false;

  function cssVar(name, fallback) {
    var value = getComputedStyle(root).getPropertyValue(name).trim();
    return value || fallback;
  }

  function wantDark() {
    return !printing && root.getAttribute("data-theme") === "dark";
  }

  // Value at a plotly attribute path such as "sliders[0].bgcolor" in the figure's own layout
  // (undefined where the figure leaves it to the template).
  function valueAt(layout, path) {
    var parts = path.replace(/\[(\d+)\]/g, ".$1").split(".");
    var value = layout;
    for (var i = 0; i < parts.length && value !== undefined && value !== null; i++) {
      value = value[parts[i]];
    }
    return value;
  }

  // [r, g, b] (0-255) of "#rgb", "#rrggbb" or "rgb(...)"/"rgba(...)"; null for anything else.
  function parseColor(color) {
    var m = /^#([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(color);
    if (m) {
      var h = m[1].length === 3 ? m[1].replace(/./g, "$&$&") : m[1];
      return [0, 2, 4].map(function (i) { return parseInt(h.slice(i, i + 2), 16); });
    }
    m = /^rgba?\(\s*([\d.]+)\s*,\s*([\d.]+)\s*,\s*([\d.]+)/i.exec(color);
    return m ? [+m[1], +m[2], +m[3]] : null;
  }

  function luminance(rgb) {  // WCAG 2 relative luminance
    var c = rgb.map(function (v) {
      v /= 255;
      return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
  }

  function contrast(a, b) {
    var la = luminance(a), lb = luminance(b);
    return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
  }

  // The colour mixed with white in steps of 5 % until it reaches 3:1 on the background;
  // null if it already does (or cannot be read).
  function lifted(color, background) {
    var rgb = parseColor(color), bg = parseColor(background);
    if (!rgb || !bg || contrast(rgb, bg) >= 3) {
      return null;
    }
    for (var t = 0.05; t <= 1; t += 0.05) {
      var mix = rgb.map(function (v) { return Math.round(v + (255 - v) * t); });
      if (contrast(mix, bg) >= 3) {
        return "rgb(" + mix.join(",") + ")";
      }
    }
    return "#ffffff";
  }

  // Per trace, the line and marker colours to lift: {index: {"line.color": ..., ...}}.
  function darkTraceUpdate(gd, background) {
    var updates = {};
    (gd._fullData || []).forEach(function (trace, i) {
      ["line.color", "marker.color"].forEach(function (path) {
        var color = valueAt(trace, path);
        var lift = typeof color === "string" ? lifted(color, background) : null;
        if (lift) {
          (updates[trace.index] = updates[trace.index] || {})[path] = lift;
        }
      });
    });
    return updates;
  }

  function darkUpdate(gd) {
    var background = cssVar("--pst-color-background", "#121212");
    var surface = cssVar("--pst-color-surface", "#29313d");
    var text = cssVar("--pst-color-text-base", "#ced6dd");
    var muted = cssVar("--pst-color-text-muted", "#9ca4af");
    var border = cssVar("--pst-color-border", "#48566b");
    var grid = cssVar("--pst-color-border-muted", "#29313d");
    var update = {
      paper_bgcolor: background,
      plot_bgcolor: background,
      "font.color": text,
      "modebar.bgcolor": "rgba(0,0,0,0)",
      "modebar.color": muted,
      "modebar.activecolor": text,
    };
    // the colours of each part of the layout, {attribute: colour}, set on every instance of it
    function paint(prefix, colours) {
      Object.keys(colours).forEach(function (attribute) {
        update[prefix + attribute] = colours[attribute];
      });
    }
    Object.keys(gd._fullLayout).forEach(function (key) {
      if (/^[xy]axis\d*$/.test(key)) {
        paint(key + ".", {gridcolor: grid, zerolinecolor: border, linecolor: border});
      }
    });
    (gd.layout.sliders || []).forEach(function (_, i) {
      paint("sliders[" + i + "].",
            {bgcolor: surface, activebgcolor: border, bordercolor: border, tickcolor: muted});
    });
    (gd.layout.updatemenus || []).forEach(function (_, i) {
      paint("updatemenus[" + i + "].", {bgcolor: surface, bordercolor: border, "font.color": text});
    });
    (gd.layout.annotations || []).forEach(function (a, i) {
      if (a.bgcolor) {  // a text box drawn on the plot (chapter 8's entropy box)
        update["annotations[" + i + "].bgcolor"] = surface;
      }
      if (a.bordercolor) {
        update["annotations[" + i + "].bordercolor"] = border;
      }
    });
    return update;
  }

  function applyTheme(gd) {
    if (!gd._fullLayout || !gd.layout) {
      return;  // not drawn (yet)
    }
    var dark = wantDark();
    if (dark === !!gd._tlDark) {
      return;
    }
    var update, traces;
    if (dark) {
      update = darkUpdate(gd);
      traces = darkTraceUpdate(gd, update.paper_bgcolor);
      var light = {}, lightTraces = {};
      Object.keys(update).forEach(function (path) {
        var value = valueAt(gd.layout, path);
        light[path] = value === undefined ? null : value;  // null: back to the template's default
      });
      Object.keys(traces).forEach(function (i) {
        lightTraces[i] = {};
        Object.keys(traces[i]).forEach(function (path) {
          var value = valueAt(gd.data[i], path);
          lightTraces[i][path] = value === undefined ? null : value;
        });
      });
      gd._tlLight = { layout: light, traces: lightTraces };
    } else {
      update = gd._tlLight ? gd._tlLight.layout : {};
      traces = gd._tlLight ? gd._tlLight.traces : {};
    }
    gd._tlDark = dark;
    Object.keys(traces).forEach(function (i) {
      var restyle = {};
      Object.keys(traces[i]).forEach(function (path) {
        restyle[path] = [traces[i][path]];
      });
      window.Plotly.restyle(gd, restyle, [+i]);
    });
    window.Plotly.relayout(gd, update);
  }

  function applyAll() {
    document.querySelectorAll(".plotly-graph-div").forEach(applyTheme);
  }

  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function () {
    return newPlot.apply(this, arguments).then(function (gd) {
      applyTheme(gd);
      return gd;
    });
  };

  new MutationObserver(applyAll).observe(root, { attributes: true, attributeFilter: ["data-theme"] });
  window.addEventListener("beforeprint", function () {
    printing = true;
    applyAll();
  });
  window.addEventListener("afterprint", function () {
    printing = false;
    applyAll();
  });
})();
