/* A formula wider than the column scrolls in its own box (outputs.css): a display formula always
   can; an inline formula is marked "tl-wide-formula" here when it is wider than its paragraph (on a
   phone, chapter 3's sin(iω)sin(jω) = ½[...] was cut off at the screen's edge, with nothing to
   scroll). With formulas out of the Tab order (book/_config.yml: MathJax inTabOrder false) such a box
   could not be scrolled from the keyboard (axe-core: scrollable-region-focusable, chapter 4), so
   each formula that overflows its box is made a Tab stop (tabindex 0; the arrow keys then scroll
   it) and every other one is left out. This runs once MathJax has typeset the page, after every
   resize, and after a click (a solution opened: its formulas had no width while hidden).
   Jupyter Book loads every .js file in book/_static on every page. */
(function () {
  function scrollable(box) {
    if (box.scrollWidth > box.clientWidth + 1) {
      box.setAttribute("tabindex", "0");
    } else if (box.getAttribute("tabindex") === "0") {
      box.removeAttribute("tabindex");
    }
  }
  function markScrollers() {
    document.querySelectorAll('mjx-container:not([display="true"])').forEach(function (box) {
      var paragraph = box.parentElement;
      if (!paragraph || box.getBoundingClientRect().width === 0) {
        return;  // hidden (a closed solution): measured when it opens
      }
      box.classList.remove("tl-wide-formula");
      var wide = box.getBoundingClientRect().width > paragraph.clientWidth + 1;
      box.classList.toggle("tl-wide-formula", wide);
    });
    document
      .querySelectorAll('div.math mjx-container[display="true"], mjx-container.tl-wide-formula')
      .forEach(scrollable);
  }
  var timer = null;
  function later() {
    clearTimeout(timer);
    timer = setTimeout(markScrollers, 100);
  }
  window.addEventListener("load", function () {
    if (!window.MathJax || !window.MathJax.startup || !window.MathJax.startup.promise) {
      return;  // a page without formulas
    }
    window.MathJax.startup.promise.then(markScrollers);
    window.addEventListener("resize", later);
    document.addEventListener("click", later);
  });
})();
