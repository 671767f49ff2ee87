/* On a touch screen a swipe over a plotly figure should scroll the page, not zoom the figure
   (plotly's default dragmode is "zoom": three swipes shrank chapter 1's grid to one visible row).
   Loaded right after plotly.min.js and before the figures' inline scripts, this wraps
   Plotly.newPlot so that, where the main pointer is coarse (a finger), every figure is drawn with
   dragmode false; sliders, menus and hover keep working. A mouse keeps plotly's defaults. */
(function () {
  if (!window.Plotly || !window.matchMedia || !window.matchMedia("(pointer: coarse)").matches) {
    return;
  }
  var newPlot = window.Plotly.newPlot;
  window.Plotly.newPlot = function (gd, data, layout, config) {
    layout = Object.assign({}, layout || {}, { dragmode: false });
    config = Object.assign({}, config || {}, { scrollZoom: false });
    return newPlot.call(this, gd, data, layout, config);
  };
})();
