/* Live models in the static book: the page runs the ONNX graphs exported from transformer_lite's own
 * modules (scripts/export_onnx.py) with onnxruntime-web, served from this site. Nothing is loaded
 * until the reader switches live mode on; nothing is requested from another host.
 *
 *   <div class="tl-live" data-model="minilm"></div>   your sentence through MiniLM: one head, and all 6 x 12
 *   <div class="tl-live" data-model="charlm"></div>   the chapter-8 character model generating
 *
 * The computed numbers stay on the element (element.tlResult) and in the plotly figure, where the
 * browser tests (tests/book/browser/test_live.py) read them and compare them with the package's.
 */
(function () {
  "use strict";
  var SCRIPT_SRC = document.currentScript && document.currentScript.src;
  if (!SCRIPT_SRC) return;
  var BASE = new URL(".", SCRIPT_SRC).href; // .../_static/live/
  var STATIC = new URL("..", BASE).href; // .../_static/
  var SIZES = window.tlLiveSizes || {};
  var VIRIDIS = ["#440154", "#48186a", "#472d7b", "#424086", "#3b528b", "#33638d", "#2c728e", "#26828e", "#21918c",
    "#1fa088", "#28ae80", "#3fbc73", "#5ec962", "#84d44b", "#addc30", "#d8e219", "#fde725"];
  var DEFAULT_SENTENCE = "The cat sat on the mat because it was tired.";
  var MAX_CHARS = 20000; // longer pastes are refused before tokenizing
  var uid = 0;

  // ------------------------------------------------------------------ small helpers
  function h(tag, attrs) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) e.appendChild(arguments[i]);
    return e;
  }
  function mb(bytes) { return (bytes / 1e6).toFixed(bytes < 1e7 ? 1 : 0) + " MB"; }
  function codePoint(ch) { return "U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0"); }
  function visible(ch) { // a character as the reader can read it in a message
    if (/^[\p{L}\p{N}\p{P}\p{S}]$/u.test(ch)) return "\u2018" + ch + "\u2019 (" + codePoint(ch) + ")";
    return codePoint(ch) + " (invisible or control character)";
  }
  function loadScript(src) {
    return new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = resolve;
      s.onerror = function () { reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  }
  function nextTask() { // yield to the page (input, Stop, drawing) without setTimeout's 4 ms clamp
    return new Promise(function (r) { var c = new MessageChannel(); c.port1.onmessage = function () { r(); }; c.port2.postMessage(0); });
  }
  async function fetchBytes(url, onProgress) {
    var r = await fetch(url);
    if (!r.ok) throw new Error("could not load " + url + " (HTTP " + r.status + ")");
    var total = +r.headers.get("Content-Length") || 0;
    if (!r.body || !r.body.getReader) return new Uint8Array(await r.arrayBuffer());
    var reader = r.body.getReader(), chunks = [], got = 0;
    for (;;) {
      var part = await reader.read();
      if (part.done) break;
      chunks.push(part.value);
      got += part.value.length;
      if (onProgress) onProgress(got, total);
    }
    var out = new Uint8Array(got), at = 0;
    chunks.forEach(function (c) { out.set(c, at); at += c.length; });
    return out;
  }
  async function fetchJSON(url) {
    var r = await fetch(url);
    if (!r.ok) throw new Error("could not load " + url + " (HTTP " + r.status + ")");
    return r.json();
  }

  // ------------------------------------------------------------------ the runtime, loaded once, on demand
  function unavailableReason() {
    if (location.protocol === "file:")
      return "Live mode needs the book served over http (for example with python -m http.server -d book/_build/html): " +
        "browsers refuse to run WebAssembly from a file:// page. The precomputed figures above work as they are.";
    if (typeof WebAssembly !== "object")
      return "Live mode needs WebAssembly, which this browser does not offer. The precomputed figures above work as they are.";
    return null;
  }
  var runtime = null;
  function loadRuntime() {
    if (!runtime) runtime = (async function () {
      await loadScript(BASE + "vendor/ort.wasm.min.js");
      var ort = window.ort;
      ort.env.wasm.wasmPaths = BASE + "vendor/";
      ort.env.wasm.numThreads = 1; // threads need cross-origin isolation, which a static server does not give
      ort.env.wasm.proxy = false;
      ort.env.logLevel = "error";
      // plotly.js through the book's loader (book/_ext/plotly_lazy.js, on every page with a live box)
      if (!window.Plotly) await (window.tlPlotly ? window.tlPlotly.load() : loadScript(STATIC + "plotly.min.js"));
      var manifest = await fetchJSON(BASE + "models/manifest.json");
      return { ort: ort, manifest: manifest };
    })();
    runtime.catch(function () { runtime = null; });
    return runtime;
  }
  async function loadSession(rt, entry, onProgress) {
    var bytes = await fetchBytes(BASE + "models/" + entry.file, onProgress);
    return rt.ort.InferenceSession.create(bytes, { executionProviders: ["wasm"], graphOptimizationLevel: "all" });
  }
  function idsTensor(ort, ids) {
    return new ort.Tensor("int64", BigInt64Array.from(ids, function (i) { return BigInt(i); }), [1, ids.length]);
  }

  // ------------------------------------------------------------------ the frame every widget shares
  function frame(div, title, blurb, sizeKey, what) {
    div.innerHTML = "";
    div.classList.add("tl-live-box");
    var head = h("div", { cls: "tl-live-title", text: title });
    var msg = h("p", { cls: "tl-live-message", role: "status", "aria-live": "polite" });
    var body = h("div", { cls: "tl-live-body", hidden: "" });
    div.appendChild(head);
    div.appendChild(h("p", { cls: "tl-live-blurb", text: blurb }));
    var reason = unavailableReason();
    if (reason) {
      div.classList.add("tl-live-unavailable");
      div.appendChild(h("p", { cls: "tl-live-message tl-live-note", text: reason }));
      return null;
    }
    var size = SIZES[sizeKey] ? " (downloads " + mb(SIZES[sizeKey]) + " of model and " +
      mb(SIZES.runtime || 0) + " of runtime, once)" : "";
    var button = h("button", { type: "button", cls: "tl-live-start", text: "Switch live mode on" + size });
    div.appendChild(button);
    div.appendChild(msg);
    div.appendChild(body);
    return { button: button, msg: msg, body: body, what: what };
  }
  // A busy button keeps its focus: `disabled` would drop a keyboard reader's focus to <body>
  // (issue 24), so it is marked aria-disabled and its handler ignores clicks while busy.
  function busy(button, on) {
    if (on) button.setAttribute("aria-disabled", "true");
    else button.removeAttribute("aria-disabled");
  }
  function isBusy(button) { return button.getAttribute("aria-disabled") === "true"; }
  function say(parts, text, kind) {
    parts.msg.textContent = text || "";
    parts.msg.className = "tl-live-message" + (kind ? " tl-live-" + kind : "");
    parts.msg.setAttribute("role", kind === "error" ? "alert" : "status");
  }

  // The switch every widget shares (the widgets are in WIDGETS, at the end). On click: load the runtime;
  // take the manifest's entry for `key` (or say `spec.missing`); `spec.prepare(entry)`, where given,
  // loads what else the widget needs; load the model; remove the switch and call
  // `spec.build(div, parts, rt, entry, session, prepared)`. A failure says why and leaves the switch.
  function initModel(div, key, spec) {
    var parts = frame(div, spec.title, spec.blurb, key);
    if (!parts) return;
    parts.button.addEventListener("click", async function () {
      if (isBusy(parts.button)) return;
      busy(parts.button, true);
      try {
        say(parts, "Loading the runtime\u2026");
        var rt = await loadRuntime();
        var entry = rt.manifest[key];
        if (!entry) throw new Error(spec.missing || "this build has no " + spec.label + " model");
        var prepared = spec.prepare ? await spec.prepare(entry) : null;
        var session = await loadSession(rt, entry, function (got, total) {
          say(parts, "Loading " + spec.label + ": " + mb(got) + (total ? " of " + mb(total) : ""));
        });
        // the switch goes; a reader whose focus was on it lands on the box's first field, not <body>
        var hadFocus = document.activeElement === parts.button;
        parts.button.remove();
        say(parts, "Loaded " + spec.label + ".");
        spec.build(div, parts, rt, entry, session, prepared);
        var first = parts.body.querySelector("textarea, input, select, button");
        if (hadFocus && first) first.focus();
      } catch (err) {
        busy(parts.button, false);
        say(parts, "Live mode could not start: " + err.message, "error");
      }
    });
  }

  // ------------------------------------------------------------------ MiniLM: attention of your sentence
  async function loadTokenizer() { // WordPiece, from the model's own tokenizer.json
    var tokJson = await fetchJSON(BASE + "models/tokenizer.json");
    var tokCfg = await fetchJSON(BASE + "models/tokenizer_config.json");
    var lib = await import(BASE + "vendor/tokenizers.min.mjs");
    return new lib.Tokenizer(tokJson, tokCfg);
  }

  function buildMiniLM(div, parts, rt, entry, session, tokenizer) {
    var n = ++uid;
    var input = h("textarea", { cls: "tl-live-input", rows: "2", "aria-label": "sentence for MiniLM" });
    input.value = div.dataset.text || DEFAULT_SENTENCE;
    var layer = h("select", { "aria-label": "layer" }), head = h("select", { "aria-label": "head" });
    for (var l = 0; l < entry.n_layers; l++) layer.appendChild(h("option", { value: String(l), text: "layer " + l }));
    for (var k = 0; k < entry.n_heads; k++) head.appendChild(h("option", { value: String(k), text: "head " + k }));
    layer.value = div.dataset.layer || "0";
    head.value = div.dataset.head || "2";
    var run = h("button", { type: "button", cls: "tl-live-run", text: "Compute" });
    var controls = h("div", { cls: "tl-live-controls" }, layer, head, run);
    var info = h("p", { cls: "tl-live-info" });
    var plot = h("div", { cls: "tl-live-plot", id: "tl-live-minilm-head-" + n });
    var gridTitle = h("p", { cls: "tl-live-grid-title",
      text: "All 72 heads on your sentence (rows: layers 0\u20135, columns: heads 0\u201311; click one to show it above)" });
    var canvas = h("canvas", { cls: "tl-live-grid", role: "img",
      "aria-label": "attention weights of all 6 layers and 12 heads of MiniLM for the sentence typed above" });
    var figs = h("div", { cls: "tl-live-figures", hidden: "" },
      h("div", { role: "figure", "aria-label": "attention weights of one MiniLM head for the sentence typed above" }, plot),
      gridTitle, canvas);
    parts.body.appendChild(input);
    parts.body.appendChild(controls);
    parts.body.appendChild(info);
    parts.body.appendChild(figs);
    parts.body.hidden = false;
    var state = null, computing = false;

    function fail(text) { // a clear message and no figure that could be mistaken for this input's
      figs.hidden = true;
      info.textContent = "";
      state = null;
      div.tlResult = { error: text };
      say(parts, text, "error");
    }
    async function compute() {
      if (computing) return;
      computing = true;
      busy(run, true);
      try {
        var text = input.value;
        if (!text.trim()) return fail("The box is empty: type a sentence.");
        if (text.length > MAX_CHARS)
          return fail("That text has " + text.length + " characters; MiniLM reads at most " + entry.max_len +
            " tokens. Paste a sentence or a paragraph.");
        var enc;
        try { enc = tokenizer.encode(text); } catch (err) { return fail("The tokenizer could not read this text: " + err.message); }
        var ids = Array.from(enc.ids), tokens = Array.from(enc.tokens);
        if (ids.length > entry.max_len)
          return fail("Your text is " + ids.length + " tokens long with [CLS] and [SEP]; MiniLM has " + entry.max_len +
            " positions. Remove at least " + (ids.length - entry.max_len) + " tokens.");
        if (ids.length <= 2)
          return fail("Nothing to encode: the tokenizer dropped every character of this text " +
            "(spaces, control or zero-width characters).");
        if (ids.some(function (i) { return i < 0 || i >= entry.vocab_size; }))
          return fail("The tokenizer produced ids outside MiniLM's vocabulary.");
        say(parts, "Computing\u2026");
        await nextTask();
        var t0 = performance.now();
        var out = await session.run({ input_ids: idsTensor(rt.ort, ids) });
        var ms = performance.now() - t0;
        var L = ids.length, att = out.attentions.data;
        if (att.length !== entry.n_layers * entry.n_heads * L * L || !att.every(Number.isFinite))
          return fail("The model returned weights of an unexpected shape or non-finite values; nothing is drawn.");
        state = { L: L, tokens: tokens, att: att };
        var unk = tokens.filter(function (t) { return t === "[UNK]"; }).length;
        info.textContent = L + " tokens (with [CLS] and [SEP]); one forward pass took " + ms.toFixed(0) +
          " ms in this browser." + (unk ? " " + unk + " token" + (unk > 1 ? "s are" : " is") +
          " [UNK]: characters MiniLM's vocabulary does not have (the model sees [UNK] in their place)." : "") +
          (L > 60 ? " With this many tokens the labels get dense: hover over a cell to read it." : "");
        div.tlResult = { ids: ids, tokens: tokens, L: L, n_layers: entry.n_layers, n_heads: entry.n_heads,
          attentions: Array.from(att), hidden_first: Array.from(out.hidden.data.slice(0, 8)), ms: ms };
        figs.hidden = false;
        say(parts, "Done: the attention of your " + L + " tokens, computed in " + ms.toFixed(0) + " ms; layer " +
          layer.value + ", head " + head.value + " is drawn below, all 72 heads under it.");
        draw();
        div.dataset.state = "done";
      } catch (err) {
        fail("The computation failed: " + err.message);
      } finally {
        computing = false;
        busy(run, false);
      }
    }
    function headMatrix(l, k) {
      var L = state.L, base = (l * entry.n_heads + k) * L * L, z = [];
      for (var q = 0; q < L; q++) z.push(Array.from(state.att.subarray(base + q * L, base + (q + 1) * L)));
      return z;
    }
    function draw() {
      if (!state) return;
      var l = +layer.value, k = +head.value, labels = state.tokens.map(function (t, i) { return i + ":" + t; });
      var side = Math.min(720, Math.max(380, 180 + 22 * state.L));
      Plotly.react(plot, [{
        type: "heatmap", z: headMatrix(l, k), x: labels, y: labels, zmin: 0, zmax: 1, colorscale: "Viridis",
        colorbar: { title: { text: "weight" }, thickness: 14, len: 0.8 },
        hovertemplate: "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>" }], {
        title: { text: "Layer " + l + ", head " + k + " on your sentence: each row (a query) sums to 1", font: { size: 15 } },
        template: "plotly_white", height: side, margin: { l: 110, r: 30, t: 60, b: 110 },
        xaxis: { title: { text: "key" }, tickangle: -60, tickfont: { size: 10 }, automargin: true },
        yaxis: { title: { text: "query" }, autorange: "reversed", tickfont: { size: 10 }, automargin: true } },
        { displaylogo: false, responsive: true });
      drawGrid(l, k);
    }
    function drawGrid(selL, selK) {
      var nL = entry.n_layers, nH = entry.n_heads, L = state.L;
      var width = Math.min(parts.body.clientWidth || 720, 760), left = 58, top = 22, right = 70;
      var tile = Math.floor((width - left - right) / nH), gap = 3, cell = tile - gap;
      var height = top + nL * tile + 8, dpr = window.devicePixelRatio || 1;
      canvas.width = width * dpr; canvas.height = height * dpr;
      canvas.style.width = width + "px"; canvas.style.height = height + "px";
      var ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, width, height);
      ctx.imageSmoothingEnabled = false;
      var img = new ImageData(L, L), off = document.createElement("canvas");
      off.width = L; off.height = L;
      var octx = off.getContext("2d");
      ctx.font = "11px sans-serif"; ctx.fillStyle = "#222"; ctx.textAlign = "center";
      for (var k = 0; k < nH; k++) ctx.fillText("head " + k, left + k * tile + cell / 2, 14);
      ctx.textAlign = "right";
      for (var l = 0; l < nL; l++) {
        ctx.fillStyle = "#222";
        ctx.fillText("layer " + l, left - 6, top + l * tile + cell / 2 + 4);
        for (k = 0; k < nH; k++) {
          var base = (l * nH + k) * L * L;
          for (var i = 0; i < L * L; i++) {
            var c = viridis(state.att[base + i]);
            img.data[4 * i] = c[0]; img.data[4 * i + 1] = c[1]; img.data[4 * i + 2] = c[2]; img.data[4 * i + 3] = 255;
          }
          octx.putImageData(img, 0, 0);
          ctx.drawImage(off, left + k * tile, top + l * tile, cell, cell);
        }
      }
      ctx.strokeStyle = "#d62728"; ctx.lineWidth = 2; // the head shown above
      ctx.strokeRect(left + selK * tile - 1, top + selL * tile - 1, cell + 2, cell + 2);
      var bx = left + nH * tile + 12, bh = nL * tile - gap; // colour bar, 0 at the bottom
      for (var y = 0; y < bh; y++) { var cc = viridis(1 - y / (bh - 1)); ctx.fillStyle = "rgb(" + cc + ")"; ctx.fillRect(bx, top + y, 12, 1); }
      ctx.fillStyle = "#222"; ctx.textAlign = "left";
      ctx.fillText("1", bx + 16, top + 8); ctx.fillText("0.5", bx + 16, top + bh / 2 + 4); ctx.fillText("0", bx + 16, top + bh);
      ctx.save(); ctx.translate(bx + 44, top + bh / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center";
      ctx.fillText("weight", 0, 0); ctx.restore();
      canvas.onclick = function (ev) {
        var r = canvas.getBoundingClientRect(), x = ev.clientX - r.left - left, yy = ev.clientY - r.top - top;
        var kk = Math.floor(x / tile), ll = Math.floor(yy / tile);
        if (kk >= 0 && kk < nH && ll >= 0 && ll < nL) { layer.value = String(ll); head.value = String(kk); draw(); }
      };
    }
    run.addEventListener("click", compute);
    input.addEventListener("keydown", function (ev) { if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); compute(); } });
    layer.addEventListener("change", draw);
    head.addEventListener("change", draw);
    compute();
  }

  function viridis(v) {
    v = Math.min(1, Math.max(0, v)) * (VIRIDIS.length - 1);
    var i = Math.min(VIRIDIS.length - 2, Math.floor(v)), f = v - i, a = hex(VIRIDIS[i]), b = hex(VIRIDIS[i + 1]);
    return [0, 1, 2].map(function (j) { return Math.round(a[j] + f * (b[j] - a[j])); });
  }
  function hex(s) { return [1, 3, 5].map(function (j) { return parseInt(s.slice(j, j + 2), 16); }); }

  // ------------------------------------------------------------------ chapter 8: the character model generating
  function showChar(c) { return c === "\n" ? "\u23ce" : c === " " ? "\u2423" : c; }

  function buildCharLM(div, parts, rt, entry, session) {
    say(parts, "Loaded the model: type a prompt and press Generate.");
    var n = ++uid, V = entry.vocab.length, index = new Map();
    entry.vocab.forEach(function (c, i) { index.set(c, i); });
    var prompt = h("textarea", { cls: "tl-live-input", rows: "3", "aria-label": "prompt for the character model" });
    prompt.value = (div.dataset.prompt || "ROMEO\\n").replace(/\\n/g, "\n");
    var temp = h("input", { type: "range", min: "0", max: "2", step: "0.05", value: div.dataset.temperature || "0.8",
      "aria-label": "temperature" });
    var tempOut = h("output", { text: "" });
    var topk = h("input", { type: "number", min: "1", max: String(V), step: "1", placeholder: "all", cls: "tl-live-num",
      "aria-label": "top-k (empty: all characters)" });
    var count = h("input", { type: "number", min: "1", max: "1000", step: "1", value: div.dataset.length || "200",
      cls: "tl-live-num", "aria-label": "characters to generate" });
    var seed = h("input", { type: "number", min: "0", step: "1", value: "0", cls: "tl-live-num", "aria-label": "seed" });
    var go = h("button", { type: "button", cls: "tl-live-run", text: "Generate" });
    var stop = h("button", { type: "button", text: "Stop", disabled: "" });
    function label(text, el) { return h("label", { cls: "tl-live-label" }, document.createTextNode(text + " "), el); }
    var controls = h("div", { cls: "tl-live-controls" }, label("temperature", temp), tempOut, label("top-k", topk),
      label("characters", count), label("seed", seed), go, stop);
    var info = h("p", { cls: "tl-live-info" });
    // announced once a run ends (aria-busy while characters stream in, so they are not read one by one)
    var out = h("pre", { cls: "tl-live-text", "aria-live": "polite", "aria-atomic": "true",
      "aria-label": "generated text" });
    var plot = h("div", { cls: "tl-live-plot", id: "tl-live-charlm-probs-" + n });
    var figs = h("div", { cls: "tl-live-figures", hidden: "" }, out,
      h("div", { role: "figure", "aria-label": "probabilities of the next character at the current step" }, plot));
    [prompt, controls, info, figs].forEach(function (e) { parts.body.appendChild(e); });
    parts.body.hidden = false;
    function showT() { tempOut.textContent = "T = " + (+temp.value).toFixed(2) + (+temp.value === 0 ? " (greedy)" : ""); }
    temp.addEventListener("input", showT);
    showT();
    var running = false, stopRequested = false;

    function fail(text) { // a clear message; no text, chart or timing left from an earlier run
      figs.hidden = true;
      info.textContent = "";
      out.textContent = "";
      div.tlResult = { error: text };
      say(parts, text, "error");
    }
    function rng(s) { // mulberry32: the page's own seeded random numbers
      var a = s >>> 0;
      return function () {
        a = (a + 0x6D2B79F5) >>> 0;
        var t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
      };
    }
    function distribution(logits, T, k) { // as transformer_lite.sample_next_token: temperature, then top-k
      var scaled = Array.from(logits, function (x) { return T > 0 ? x / T : x; });
      if (T > 0 && k) {
        var kth = scaled.slice().sort(function (a, b) { return b - a; })[k - 1];
        scaled = scaled.map(function (x) { return x < kth ? -Infinity : x; });
      }
      if (T === 0) { // greedy: all the probability on the arg-max (the lowest id on ties)
        var best = 0;
        for (var i = 1; i < scaled.length; i++) if (scaled[i] > scaled[best]) best = i;
        return scaled.map(function (_, j) { return j === best ? 1 : 0; });
      }
      var m = Math.max.apply(null, scaled), e = scaled.map(function (x) { return Math.exp(x - m); });
      var s = e.reduce(function (a, b) { return a + b; }, 0);
      return e.map(function (x) { return x / s; });
    }
    function pick(p, T, u) {
      if (T === 0) return p.indexOf(1);
      var acc = 0;
      for (var i = 0; i < p.length; i++) { acc += p[i]; if (u < acc) return i; }
      for (i = p.length - 1; i >= 0; i--) if (p[i] > 0) return i;
      return 0;
    }
    function drawProbs(p, chosen, step, greedy) {
      var order = p.map(function (_, i) { return i; }).sort(function (a, b) { return p[b] - p[a]; }).slice(0, 20);
      Plotly.react(plot, [{
        type: "bar", x: order.map(function (i) { return showChar(entry.vocab[i]); }), y: order.map(function (i) { return p[i]; }),
        marker: { color: order.map(function (i) { return i === chosen ? "#fde725" : "#3b528b"; }),
          line: { color: "#222", width: order.map(function (i) { return i === chosen ? 1.5 : 0; }) } },
        hovertemplate: "%{x}: %{y:.3f}<extra></extra>" }], {
        title: { text: "Step " + step + (greedy ? ": the model's 20 likeliest next characters (greedy takes the top one, yellow)"
          : ": the 20 likeliest next characters (yellow: the one drawn)"), font: { size: 15 } },
        template: "plotly_white", height: 330, margin: { l: 60, r: 20, t: 60, b: 50 },
        xaxis: { title: { text: "next character (\u23ce newline, \u2423 space)" }, type: "category" },
        yaxis: { title: { text: "probability" }, range: [0, 1] } }, { displaylogo: false, responsive: true });
    }
    async function generate() {
      if (running) return;
      var text = prompt.value;
      if (!text.length) return fail("The prompt is empty: type at least one character (a newline is fine).");
      if (text.length > MAX_CHARS) return fail("That prompt has " + text.length + " characters; paste at most " + MAX_CHARS + ".");
      var chars = Array.from(text);
      var unknown = Array.from(new Set(chars.filter(function (c) { return !index.has(c); })));
      if (unknown.length)
        return fail("The model knows only the " + V + " characters of its training text; not " +
          unknown.slice(0, 8).map(visible).join(", ") + (unknown.length > 8 ? " and " + (unknown.length - 8) + " more" : "") +
          ". Replace or remove them (letters without accents, straight quotes).");
      var T = +temp.value, N = +count.value, K = topk.value.trim() === "" ? null : +topk.value;
      if (!Number.isInteger(N) || N < 1 || N > 1000) return fail("Characters to generate: a whole number from 1 to 1000.");
      if (K !== null && (!Number.isInteger(K) || K < 1 || K > V)) return fail("Top-k: a whole number from 1 to " + V + ", or empty for all.");
      if (!Number.isInteger(+seed.value) || +seed.value < 0) return fail("Seed: a whole number from 0 up.");
      running = true; stopRequested = false;
      busy(go, true); stop.disabled = false;
      out.setAttribute("aria-busy", "true");
      say(parts, "Generating " + N + " characters at T = " + T + "\u2026");
      figs.hidden = false;
      var ids = chars.map(function (c) { return index.get(c); }), promptLen = ids.length, random = rng(+seed.value);
      out.textContent = "";
      var shownPrompt = h("span", { cls: "tl-live-prompt", text: text }), gen = h("span", { cls: "tl-live-generated" });
      out.appendChild(shownPrompt); out.appendChild(gen);
      info.textContent = (promptLen > entry.max_len ? "The prompt is longer than the model's " + entry.max_len +
        " positions: it sees the last " + entry.max_len + " characters at each step. " : "");
      var t0 = performance.now(), modelMs = 0, lastDraw = 0, p = null, chosen = -1, generated = "";
      try {
        for (var step = 1; step <= N && !stopRequested; step++) {
          var window_ = ids.slice(-entry.max_len), feed = window_;
          if (entry.fixed_len) // the graph has a fixed length: pad on the right (causal, so rows < L never see it)
            feed = window_.concat(new Array(entry.fixed_len - window_.length).fill(entry.pad_id || 0));
          var s0 = performance.now();
          var res = await session.run({ input_ids: idsTensor(rt.ort, feed) });
          modelMs += performance.now() - s0;
          var L = window_.length, logits = res.logits.data.subarray((L - 1) * V, L * V);
          if (!logits.every(Number.isFinite)) throw new Error("the model returned non-finite logits");
          p = distribution(logits, T, K);
          chosen = pick(p, T, random());
          if (T === 0) p = distribution(logits, 1, null); // show the model's own distribution, not the one-hot
          ids.push(chosen);
          generated += entry.vocab[chosen];
          gen.textContent = generated;
          var now = performance.now();
          if (now - lastDraw > 400 || step === N) { drawProbs(p, chosen, step, T === 0); lastDraw = now; }
          await nextTask();
        }
        var steps = generated.length, total = (performance.now() - t0) / 1000;
        if (p) drawProbs(p, chosen, steps, T === 0);
        info.textContent += steps + " characters in " + total.toFixed(2) + " s: " + (steps / total).toFixed(0) +
          " characters per second in this browser (the model itself: " + (modelMs / steps).toFixed(1) + " ms a step)." +
          (T > 0 ? " Sampling uses this page's own seeded random numbers, so the text differs from PyTorch's for the same seed; at T = 0 both are greedy and agree." : "");
        say(parts, (stopRequested && steps < N ? "Stopped after " + steps + " of " + N : "Done: " + steps) +
          " characters generated in " + total.toFixed(1) + " s; the text is below.");
        div.tlResult = { prompt: text, prompt_ids: ids.slice(0, promptLen), generated_ids: ids.slice(promptLen),
          generated: generated, temperature: T, top_k: K, seconds: total, model_ms: modelMs };
        div.dataset.state = "done";
      } catch (err) {
        fail("Generation failed: " + err.message);
      } finally {
        running = false;
        out.removeAttribute("aria-busy");
        busy(go, false);
        if (document.activeElement === stop) go.focus(); // Stop is about to be disabled: keep the focus
        stop.disabled = true;
      }
    }
    go.addEventListener("click", generate);
    stop.addEventListener("click", function () { stopRequested = true; });
  }

  // ------------------------------------------------------------------ the widgets, by data-model
  // title and blurb: above the switch; label: the model's name while it downloads; prepare and build: see initModel.
  var WIDGETS = {
    minilm: {
      label: "MiniLM", title: "Live: your sentence through MiniLM",
      blurb: "Type a sentence: this page tokenizes it (WordPiece, the model's own tokenizer.json), runs the encoder " +
        "exported from this package's BertEncoder (float32, equal to it within 1e-4, checked by the tests), " +
        "and draws the attention of the chosen layer and head, and all 72 heads.",
      prepare: loadTokenizer, build: buildMiniLM,
    },
    charlm: {
      label: "the model", title: "Live: the chapter's character model generating",
      blurb: "Type a prompt: this page runs the transformer trained for this chapter (exported to ONNX from the package's " +
        "DecoderOnlyTransformer, float32, equal to it within 1e-4, checked by the tests) one character at a time, " +
        "and shows the distribution it samples each next character from.",
      missing: "this build has no chapter-8 model (its checkpoint was missing when the book was built)",
      build: buildCharLM,
    },
  };

  function init() {
    document.querySelectorAll(".tl-live").forEach(function (div) {
      if (div.dataset.ready) return;
      div.dataset.ready = "1";
      var key = div.dataset.model;
      if (Object.prototype.hasOwnProperty.call(WIDGETS, key)) initModel(div, key, WIDGETS[key]);
      else div.textContent = "Unknown live model: " + key;
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
