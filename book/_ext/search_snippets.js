/* Search result snippets as prose (loaded on search.html only, by book/_ext/print_search.py).
 *
 * Sphinx's searchtools.js fetches each hit's page and shows 240 characters around the first
 * occurrence of a stemmed query word in the text of [role=main]. Here, instead:
 *   - the text is the article's prose: no page header (the download menu's ".ipynb"), no print-only
 *     table of contents, no code cells or their outputs, no display equations;
 *   - inline formulas are written as plain text (Unicode symbols; no backslash commands left);
 *   - the snippet is placed at the query as typed (the phrase, else its first word found, else a
 *     stem at the start of a word), and starts at the section's text when nothing is found.
 */
(() => {
  "use strict";
  if (typeof Search === "undefined") return;

  const DROP = [
    ".headerlink", "script", "style", "noscript", "#jb-print-docs-body", ".bd-header-article",
    "div.cell_input", "div.cell_output", "div.highlight", "pre", "div.math", "mjx-container",
    ".tl-live", ".toggle-button", ".prev-next-area", ".bd-footer-article", "nav",
  ];

  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ε", varepsilon: "ε", zeta: "ζ",
    eta: "η", theta: "θ", vartheta: "θ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
    xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", upsilon: "υ", phi: "φ", varphi: "φ",
    chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ",
    Pi: "Π", Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
    infty: "∞", le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈",
    sim: "~", equiv: "≡", times: "×", cdot: "·", cdots: "⋯", ldots: "…", dots: "…", pm: "±",
    mp: "∓", top: "ᵀ", to: "→", rightarrow: "→", leftarrow: "←", mapsto: "↦", in: "∈",
    notin: "∉", subset: "⊂", odot: "⊙", otimes: "⊗", oplus: "⊕", partial: "∂", nabla: "∇",
    ell: "ℓ", sum: "∑", prod: "∏", int: "∫", sqrt: "√", mid: "|", vert: "|", lvert: "|",
    rvert: "|", Vert: "‖", lVert: "‖", rVert: "‖", langle: "⟨", rangle: "⟩", lfloor: "⌊",
    rfloor: "⌋", lceil: "⌈", rceil: "⌉", circ: "∘", star: "⋆", ast: "∗", prime: "′",
    log: "log", ln: "ln", exp: "exp", max: "max", min: "min", arg: "arg", argmax: "argmax",
    argmin: "argmin", sin: "sin", cos: "cos", tanh: "tanh", det: "det", lim: "lim",
    mathbb: "", quad: " ", qquad: " ",
  };
  const SUB = { 0: "₀", 1: "₁", 2: "₂", 3: "₃", 4: "₄", 5: "₅", 6: "₆", 7: "₇", 8: "₈", 9: "₉",
    a: "ₐ", e: "ₑ", h: "ₕ", i: "ᵢ", j: "ⱼ", k: "ₖ", l: "ₗ", m: "ₘ", n: "ₙ", o: "ₒ", p: "ₚ",
    r: "ᵣ", s: "ₛ", t: "ₜ", u: "ᵤ", v: "ᵥ", x: "ₓ", "+": "₊", "-": "₋" };
  const SUP = { 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹",
    i: "ⁱ", n: "ⁿ", T: "ᵀ", "+": "⁺", "-": "⁻", "ᵀ": "ᵀ" };

  /** A TeX formula as plain text: "\operatorname{softmax}(QK^\top/\sqrt{d_k})" -> "softmax(QKᵀ/√dₖ)". */
  const texToText = (tex) => {
    let s = tex.trim().replace(/^\\\(|\\\)$/g, "").replace(/^\\\[|\\\]$/g, "").replace(/^\$+|\$+$/g, "");
    s = s.replace(/\\(left|right|big|Big|bigg|Bigg)\b\s*\\?/g, "");
    s = s.replace(/\\[,;:! ]/g, " ").replace(/~/g, " ");
    const group = (a) => (/[\s+\-*/·×=,]/.test(a) ? `(${a})` : a); // parentheses only if needed
    let before;
    do {
      before = s;
      s = s.replace(/_([0-9a-z+-])(?![A-Za-z])/g, (m, c) => SUB[c] || m);
      s = s.replace(/\\(?:operatorname\*?|text|textrm|textit|textbf|mathrm|mathit|mathbf|mathcal|mathsf|mathtt|boldsymbol|bm|hat|tilde|bar|overline|vec|widehat)\s*\{([^{}]*)\}/g, "$1");
      s = s.replace(/\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g, (m, a, b) => `${group(a)}/${group(b)}`);
      s = s.replace(/\\sqrt\s*\{([^{}]*)\}/g, (m, a) => `√${group(a)}`);
      s = s.replace(/([_^])\{([^{}]*)\}/g, (m, op, a) => {
        const table = op === "_" ? SUB : SUP;
        const chars = [...a.replace(/\\top\b/g, "ᵀ")];
        return chars.every((c) => table[c]) ? chars.map((c) => table[c]).join("") : `${op}(${a})`;
      });
    } while (s !== before);
    s = s.replace(/\^\s*\\top\b/g, "ᵀ");
    s = s.replace(/\\([A-Za-z]+)/g, (m, name) => (name in SYMBOLS ? SYMBOLS[name] : name));
    s = s.replace(/\\([{}%&#_$|])/g, "$1").replace(/\\/g, "");
    s = s.replace(/_([0-9a-z+-])(?![A-Za-z])/g, (m, c) => SUB[c] || m);
    s = s.replace(/\^([0-9inT+-])(?![A-Za-z])/g, (m, c) => SUP[c] || m);
    s = s.replace(/[{}]/g, "");
    return s.replace(/\s+/g, " ").trim();
  };

  Search.htmlToText = (htmlString, anchor) => {
    const doc = new DOMParser().parseFromString(htmlString, "text/html");
    const main = doc.querySelector('[role="main"]');
    if (!main) return "";
    const article = main.querySelector("article") || main;
    let root = article;
    if (anchor) {
      try {
        root = article.querySelector(anchor) || article;
      } catch (e) {
        root = article; // an anchor that is not a valid selector
      }
    }
    for (const selector of DROP) root.querySelectorAll(selector).forEach((el) => el.remove());
    root.querySelectorAll("span.math").forEach((el) => {
      el.replaceWith(doc.createTextNode(texToText(el.textContent)));
    });
    // block elements end a word: keep a space between a heading and the paragraph after it
    root.querySelectorAll("h1, h2, h3, h4, h5, h6, p, li, dt, dd, td, th, div").forEach((el) => {
      el.append(doc.createTextNode(" "));
    });
    return root.textContent.replace(/\s+/g, " ").trim();
  };

  const typedWords = () => {
    const q = new URLSearchParams(window.location.search).get("q") || "";
    return q.toLowerCase().split(/\s+/).filter((w) => w && !w.startsWith("-"));
  };

  /** Where the snippet is centred: the typed phrase, else a typed word, else a stem, else -1. */
  const findQuery = (textLower, keywords) => {
    const words = typedWords();
    const phrase = words.join(" ");
    if (phrase && textLower.includes(phrase)) return textLower.indexOf(phrase);
    const wordStart = (w) => {
      const m = new RegExp(`(^|[^\\p{L}\\p{N}])${w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`, "u").exec(textLower);
      return m ? m.index + m[1].length : -1;
    };
    for (const w of words) {
      const i = wordStart(w);
      if (i > -1) return i;
    }
    for (const k of keywords) {
      const i = wordStart(k.toLowerCase());
      if (i > -1) return i;
    }
    return -1;
  };

  Search.makeSearchSummary = (htmlText, keywords, anchor) => {
    const text = Search.htmlToText(htmlText, anchor);
    if (text === "") return null;
    const at = findQuery(text.toLowerCase(), [...keywords]);
    let start = at > -1 ? Math.max(at - 100, 0) : 0;
    if (start > 0) {
      const space = text.indexOf(" ", start); // begin at a word
      if (space > -1 && space < at) start = space + 1;
    }
    let end = Math.min(start + 240, text.length);
    if (end < text.length) {
      const space = text.lastIndexOf(" ", end);
      if (space > start + 120) end = space;
    }
    const summary = document.createElement("p");
    summary.classList.add("context");
    summary.textContent = (start > 0 ? "… " : "") + text.slice(start, end) + (end < text.length ? " …" : "");
    return summary;
  };
})();
