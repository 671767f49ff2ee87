/* A display formula wider than the column scrolls in its own box (outputs.css). With formulas out
   of the Tab order (book/_config.yml: MathJax inTabOrder false) such a box could not be scrolled
   from the keyboard (axe-core: scrollable-region-focusable, chapter 4). Once MathJax has typeset
   the page, and after every resize, each display formula that overflows its box is made a Tab
   stop (tabindex 0; the arrow keys then scroll it) and every other one is left out.
   Jupyter Book loads every .js file in book/_static on every page. */
(function () {
  function markScrollers() {
    document.querySelectorAll('div.math mjx-container[display="true"]').forEach(function (box) {
      if (box.scrollWidth > box.clientWidth + 1) {
        box.setAttribute("tabindex", "0");
      } else if (box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
      }
    });
  }
  var timer = null;
  window.addEventListener("load", function () {
    if (!window.MathJax || !window.MathJax.startup || !window.MathJax.startup.promise) {
      return;  // a page without formulas
    }
    window.MathJax.startup.promise.then(markScrollers);
    window.addEventListener("resize", function () {
      clearTimeout(timer);
      timer = setTimeout(markScrollers, 200);
    });
  });
})();
