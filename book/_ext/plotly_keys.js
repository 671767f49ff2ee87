/* Every slider and menu of a plotly figure operable from the keyboard (issue 24).
   Plotly draws its sliders and menus (layout.sliders, layout.updatemenus) in SVG: they take no focus,
   so a keyboard user saw only each figure's first state. Loaded after plotly.js and before the
   figures are drawn, this wraps Plotly.newPlot so that, once a figure is drawn, a row of native
   controls is added under it, inside the figure's role="figure" box:
   - for each slider, a labelled range input (its label is the slider's own "currentvalue" prefix, its
     aria-valuetext and the text beside it the step's label); moving it (arrow keys, Home, End) runs
     the step's own method and arguments (restyle, relayout, update or animate), as a click on the SVG
     slider does, and moves the SVG slider to the same step;
   - for each menu, a group of buttons, one per item (aria-pressed on the active one), that run the
     item's method and arguments and mark the SVG menu's active item.
   Using the SVG controls with the mouse moves the native ones too (plotly_sliderchange,
   plotly_buttonclicked). The controls are hidden on paper (print.css). */
(function () {
  if (!window.Plotly) {
    return;
  }
  var uid = 0;

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function run(gd, method, args) {
    var fn = window.Plotly[method];
    if (typeof fn !== "function" || method === "skip") return Promise.resolve();
    return Promise.resolve(fn.apply(window.Plotly, [gd].concat(args || [])));
  }

  function sliderControl(gd, index, slider) {
    var steps = slider.steps || [];
    if (!steps.length) return null;
    var prefix = ((slider.currentvalue && slider.currentvalue.prefix) || slider.name || "step").trim();
    prefix = prefix.replace(/\s*[=:]$/, "");
    var id = "tl-plotly-key-" + ++uid;
    var active = Math.min(Math.max(slider.active || 0, 0), steps.length - 1);
    var input = el("input", { type: "range", id: id, min: "0", max: String(steps.length - 1), step: "1",
      value: String(active), class: "tl-plotly-range" });
    var shown = el("output", { for: id, class: "tl-plotly-value" });
    function show(i) {
      var label = String(steps[i].label !== undefined ? steps[i].label : i);
      input.value = String(i);
      input.setAttribute("aria-valuetext", prefix + " " + label);
      shown.textContent = label;
    }
    show(active);
    input.addEventListener("input", function () {
      var i = +input.value, step = steps[i];
      show(i);
      var update = {};
      update["sliders[" + index + "].active"] = i;
      run(gd, step.method, step.args).then(function () { return window.Plotly.relayout(gd, update); });
    });
    gd.on("plotly_sliderchange", function (e) {
      if (e && e.slider && e.slider._index === index) show(e.slider.active);
    });
    var label = el("label", { for: id, class: "tl-plotly-label" }, prefix);
    var box = el("div", { class: "tl-plotly-control" });
    box.appendChild(label);
    box.appendChild(input);
    box.appendChild(shown);
    return box;
  }

  function menuControl(gd, index, menu) {
    var buttons = (menu.buttons || []).filter(function (b) { return b.visible !== false; });
    if (!buttons.length) return null;
    var group = el("div", { role: "group", class: "tl-plotly-control tl-plotly-menu",
      "aria-label": menu.name || "figure menu" });
    var natives = buttons.map(function (b, i) {
      var button = el("button", { type: "button", class: "tl-plotly-button" }, String(b.label || "item " + i));
      button.addEventListener("click", function () {
        mark(i);
        var update = {};
        update["updatemenus[" + index + "].active"] = i;
        run(gd, b.method, b.args).then(function () { return window.Plotly.relayout(gd, update); });
      });
      group.appendChild(button);
      return button;
    });
    function mark(active) {
      natives.forEach(function (n, j) { n.setAttribute("aria-pressed", j === active ? "true" : "false"); });
    }
    mark(menu.active === undefined ? 0 : menu.active);
    gd.on("plotly_buttonclicked", function (e) {
      if (e && e.menu && e.menu._index === index) mark(e.active);
    });
    return group;
  }

  function addControls(gd) {
    if (!gd || !gd.layout || gd.dataset.tlKeys) return;
    var sliders = gd.layout.sliders || [], menus = gd.layout.updatemenus || [];
    if (!sliders.length && !menus.length) return;
    gd.dataset.tlKeys = "1";
    var row = el("div", { class: "tl-plotly-keys" });
    menus.forEach(function (m, i) { var c = menuControl(gd, i, m); if (c) row.appendChild(c); });
    sliders.forEach(function (s, i) { var c = sliderControl(gd, i, s); if (c) row.appendChild(c); });
    // after the box that gives the figure its height (the figure's own <div style="height:...">)
    var anchor = gd.parentElement && gd.parentElement.style.height ? gd.parentElement : gd;
    anchor.insertAdjacentElement("afterend", row);
  }

  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function () {
    var result = newPlot.apply(this, arguments);
    Promise.resolve(result).then(addControls, function () {});
    return result;
  };
})();
