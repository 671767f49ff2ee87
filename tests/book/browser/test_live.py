"""The live models in a real browser: what the page computes equals what the package computes.

Oracle: the package's own modules in PyTorch (``tl.load_minilm()`` and the chapter-8 checkpoint the
build exported, see ``book/_ext/live_models.py``). The page under test is ``live.html`` plus every
chapter page that holds a live box. Each test types into the page, waits for the result, reads the
numbers the page computed (the element's ``tlResult`` and the plotted ``z`` values) and compares them.
Every request must stay on the site (others are aborted and recorded) and no console error may appear.
Timings (one MiniLM forward on a 16-token sentence; characters per second of generation) are written
to ``artifacts/live_timings.json``; screenshots to ``artifacts/screenshots/live-*.png``.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

import transformer_lite as tl
from tests.book.browser.conftest import SHOTS, Visit, site_pages, wait_until

ROOT = Path(__file__).resolve().parents[3]
TOL = 1e-4
SENTENCE_16 = "The quick brown fox jumps over the lazy dog near the river bank."  # 16 tokens with [CLS], [SEP]


def _live_models():
    spec = importlib.util.spec_from_file_location(
        "tl_live_models", ROOT / "book" / "_ext" / "live_models.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages_with(site: Path, model: str) -> list[str]:
    marker = f'data-model="{model}"'
    return sorted(
        str(p.relative_to(site))
        for p in site.rglob("*.html")
        if "_static" not in p.parts and marker in p.read_text(encoding="utf-8")
    )


def _live_boxes(server, browser, site: Path, model: str):
    """For each page with a live box of ``model``: (page name, its Visit, the first such box on it)."""
    for name in _pages_with(site, model):
        with Visit.served(server, browser, name) as visit:
            yield name, visit, visit.page.locator(f'.tl-live[data-model="{model}"]').first


def _switch_on(box) -> None:
    """Switch live mode on and wait until the model has loaded (its run button is there)."""
    box.scroll_into_view_if_needed()
    box.locator(".tl-live-start").click()
    box.locator(".tl-live-run").wait_for(timeout=120_000)


def _wait_for_result(page, box) -> dict:
    page.wait_for_function(
        "b => b.dataset.state === 'done' || !!(b.tlResult && b.tlResult.error)",
        arg=box.element_handle(),
        timeout=180_000,
    )
    return box.evaluate("b => b.tlResult")


def _start(page, box) -> None:
    """Switch MiniLM's box on and wait for the computation it starts on its default sentence."""
    _switch_on(box)
    _wait_for_result(page, box)


def _run(page, box, button: str = ".tl-live-run") -> dict:
    box.evaluate("b => { b.dataset.state = ''; b.tlResult = null; }")
    box.locator(button).click()
    return _wait_for_result(page, box)


def _timings(update: dict) -> None:
    path = ROOT / "artifacts" / "live_timings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(update)
    path.write_text(json.dumps(data, indent=1) + "\n")


@pytest.fixture(scope="module")
def minilm():
    return tl.load_minilm()


@pytest.fixture(scope="module")
def char_model():
    ckpt = _live_models().checkpoint_path()
    if not ckpt.is_file():
        pytest.skip(f"no chapter-8 checkpoint at {ckpt}: the build has no generation model")
    spec = importlib.util.spec_from_file_location(
        "tl_export_onnx", ROOT / "scripts" / "export_onnx.py"
    )
    export = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export)
    model, meta = export.load_checkpoint(ckpt)
    return model.eval(), meta["vocab"]


def test_live_boxes_are_on_their_pages(site):
    assert "live.html" in _pages_with(site, "minilm") and "live.html" in _pages_with(site, "charlm")


def test_minilm_in_the_page_equals_the_package(server, browser, site, minilm):
    encoder, tokenizer = minilm
    for name, visit, box in _live_boxes(server, browser, site, "minilm"):
        page = visit.page
        _start(page, box)
        for sentence in (
            "Attention lets every position look at every other position.",
            SENTENCE_16,
        ):
            box.locator("textarea").fill(sentence)
            result = _run(page, box)
            assert "error" not in result, result
            ids = tokenizer.encode(sentence)
            assert result["ids"] == ids and result["tokens"] == tokenizer.tokens(sentence)
            with torch.no_grad():
                _, attentions = encoder(torch.tensor([ids]))
            A = torch.stack(attentions, dim=1)[0].numpy()  # (n_layers, H, L, L)
            got = np.asarray(result["attentions"], dtype=np.float32).reshape(A.shape)
            np.testing.assert_allclose(got, A, rtol=0, atol=TOL)
            # the drawn heatmap shows the chosen layer and head (0 and 2 when the page opens)
            plot_id = box.locator(".tl-live-plot").get_attribute("id")
            z = np.asarray(page.evaluate(f"() => document.getElementById('{plot_id}').data[0].z"))
            np.testing.assert_allclose(z, A[0, 2], rtol=0, atol=TOL)
        box.locator("select[aria-label=layer]").select_option("4")
        box.locator("select[aria-label=head]").select_option("7")
        wait_until(  # redrawn, within 300 ms
            page,
            f"() => (document.querySelector('#{plot_id} .gtitle')?.textContent || '')"
            ".includes('Layer 4, head 7')",
            timeout_ms=300,
        )
        z = np.asarray(page.evaluate(f"() => document.getElementById('{plot_id}').data[0].z"))
        np.testing.assert_allclose(z, A[4, 7], rtol=0, atol=TOL)
        assert "Layer 4, head 7" in box.locator(".tl-live-plot .gtitle").text_content()
        box.screenshot(
            path=str(SHOTS / f"live-minilm-{name.replace('/', '__').removesuffix('.html')}.png")
        )
        # one forward pass on 16 tokens: the median of 7 runs after the first
        assert len(tokenizer.encode(SENTENCE_16)) == 16
        times = [_run(page, box)["ms"] for _ in range(7)]
        _timings(
            {
                "minilm_forward_ms_16_tokens_median": statistics.median(times),
                "minilm_forward_ms_runs": times,
            }
        )
        assert visit.foreign == [], f"requests that left the site: {visit.foreign}"
        assert visit.errors == [], visit.errors


def test_greedy_generation_in_the_page_equals_generate(server, browser, site, char_model):
    model, vocab = char_model
    for name, visit, box in _live_boxes(server, browser, site, "charlm"):
        page = visit.page
        _switch_on(box)
        prompt = "ROMEO\nO, "
        n_new = min(100, model.config.max_len - len(prompt) + 1)
        box.locator("textarea").fill(prompt)
        box.locator("input[aria-label=temperature]").evaluate(
            "e => { e.value = '0'; e.dispatchEvent(new Event('input')); }"
        )
        box.locator("input[aria-label='characters to generate']").fill(str(n_new))
        result = _run(page, box)
        assert "error" not in result, result
        expected = (
            model.generate(torch.tensor([[vocab.index(c) for c in prompt]]), n_new, temperature=0.0)
            .tokens[0, len(prompt) :]
            .tolist()
        )
        assert result["generated_ids"] == expected
        assert box.locator(".tl-live-generated").text_content() == "".join(
            vocab[i] for i in expected
        )
        # the rate: 200 sampled characters (T = 0.8, top-k 10), past the model's 128 positions
        box.locator("input[aria-label=temperature]").evaluate(
            "e => { e.value = '0.8'; e.dispatchEvent(new Event('input')); }"
        )
        box.locator("input[aria-label='top-k (empty: all characters)']").fill("10")
        box.locator("input[aria-label='characters to generate']").fill("200")
        result = _run(page, box)
        assert len(result["generated_ids"]) == 200 and set(result["generated"]) <= set(vocab)
        _timings(
            {
                "charlm_chars_per_second": 200 / result["seconds"],
                "charlm_model_ms_per_step": result["model_ms"] / 200,
            }
        )
        box.screenshot(
            path=str(SHOTS / f"live-charlm-{name.replace('/', '__').removesuffix('.html')}.png")
        )
        assert visit.foreign == [], f"requests that left the site: {visit.foreign}"
        assert visit.errors == [], visit.errors


def _message(box) -> str:
    return box.locator(".tl-live-message").first.text_content()


def test_bad_input_gives_a_clear_message_and_no_figure(server, browser, site):
    with Visit.served(server, browser, "live.html") as visit:
        page = visit.page
        box = page.locator('.tl-live[data-model="minilm"]').first
        _start(page, box)
        figures = box.locator(".tl-live-figures")
        cases = {
            "": "empty",
            "word " * 600: "602 tokens",
            "\u200b\u200c\u200d\u2060": "Nothing to encode",
            "x" * 25000: "characters",
        }
        for text, expected in cases.items():
            box.locator("textarea").fill(text)
            result = _run(page, box)
            assert expected in result["error"] and expected in _message(box), (text[:20], result)
            assert figures.is_hidden(), "a figure stayed on screen for an input that has none"
        box.screenshot(path=str(SHOTS / "live-minilm-too-long.png"))
        # odd but valid
        box.locator("textarea").fill("Emoji 😀 and ẞ, Ωmega, 日本 \u0301 in one sentence.")
        result = _run(page, box)
        assert "error" not in result and "[UNK]" in result["tokens"]
        assert "[UNK]" in box.locator(".tl-live-info").text_content()
        assert figures.is_visible()

        manifest = json.loads((site / "_static" / "live" / "models" / "manifest.json").read_text())
        if manifest["charlm"] is None:  # built without a chapter-8 checkpoint: the box says so
            char = page.locator('.tl-live[data-model="charlm"]').first
            char.locator(".tl-live-start").click()
            page.wait_for_function(
                "b => b.querySelector('.tl-live-error')", arg=char.element_handle()
            )
            assert "no chapter-8 model" in _message(char)
            assert visit.foreign == [] and visit.errors == [], (visit.foreign, visit.errors)
            return
        char = page.locator('.tl-live[data-model="charlm"]').first
        _switch_on(char)
        char_cases = {"": "empty", "Caf\u00e9 \U0001f600\r": "U+00E9", "ROMEO\u200b": "U+200B"}
        for text, expected in char_cases.items():
            char.locator("textarea").fill(text)
            result = _run(page, char)
            assert expected in result["error"] and expected in _message(char), (text, result)
            assert char.locator(".tl-live-figures").is_hidden()
        char.locator("textarea").fill("ROMEO\n")
        char.locator("input[aria-label='top-k (empty: all characters)']").fill("1000")
        result = _run(page, char)
        assert "Top-k" in result["error"]
        char.screenshot(path=str(SHOTS / "live-charlm-unknown-characters.png"))
        assert visit.foreign == [] and visit.errors == [], (visit.foreign, visit.errors)


ACTIVE = """b => { const a = document.activeElement;
    return {inBox: b.contains(a), tag: a ? a.tagName.toLowerCase() : null,
            label: a ? (a.getAttribute('aria-label') || a.textContent || '').trim() : null}; }"""


def test_live_boxes_keep_the_focus_and_say_what_happened(server, browser):
    """A keyboard and screen-reader reader (issue 24): on live.html each box is switched on with Enter
    on its focused switch; when the switch disappears the focus goes to the box's first field, not to
    <body>; the status line (role=status, aria-live=polite) says "Loaded" and then "Done: ...".
    Chapter 8's model: Enter on Generate keeps the focus on Generate through the run; the text's
    region is aria-live="polite", aria-busy while characters stream in and not after, and the status
    line says "Generating ..." during the run and "Done: N characters ..." after it."""
    with Visit.served(server, browser, "live.html") as visit:
        page = visit.page
        for model, first_field in (
            ("minilm", "sentence for MiniLM"),
            ("charlm", "prompt for the character model"),
        ):
            box = page.locator(f'.tl-live[data-model="{model}"]')
            box.scroll_into_view_if_needed()
            box.locator(".tl-live-start").focus()
            page.keyboard.press("Enter")
            box.locator(".tl-live-run").wait_for(timeout=120_000)
            if model == "minilm":
                _wait_for_result(page, box)
            focus = box.evaluate(ACTIVE)
            assert focus["inBox"] and focus["label"] == first_field, focus
            status = box.locator(".tl-live-message").first
            assert status.get_attribute("role") == "status"
            assert status.get_attribute("aria-live") == "polite"
            text = status.text_content()
            assert text.startswith("Done: ") if model == "minilm" else text.startswith("Loaded"), (
                text
            )
        char = page.locator('.tl-live[data-model="charlm"]')
        out = char.locator(".tl-live-text")
        assert out.get_attribute("aria-live") == "polite"
        char.locator("input[aria-label='characters to generate']").fill("300")
        char.evaluate("b => { b.dataset.state = ''; b.tlResult = null; }")
        char.locator(".tl-live-run").focus()
        page.keyboard.press("Enter")
        page.wait_for_function(
            "o => o.getAttribute('aria-busy') === 'true'", arg=out.element_handle()
        )
        during = char.evaluate(ACTIVE)
        status = char.locator(".tl-live-message").first
        assert status.text_content().startswith("Generating 300 characters"), status.text_content()
        result = _wait_for_result(page, char)
        assert "error" not in result, result
        after = char.evaluate(ACTIVE)
        assert during["inBox"] and during["label"] == "Generate", during
        assert after["inBox"] and after["label"] == "Generate", after
        assert out.get_attribute("aria-busy") is None
        assert status.text_content().startswith("Done: 300 characters generated"), (
            status.text_content()
        )
        char.screenshot(path=str(SHOTS / "live-charlm-after-keyboard-run.png"))
        assert visit.errors == [], visit.errors


def test_live_boxes_from_a_file_url_say_why_in_one_line(browser, site):
    with Visit(browser, (site / "live.html").as_uri(), ("file", "")) as visit:
        boxes = visit.page.locator(".tl-live")
        assert boxes.count() == 2
        for i in range(2):
            box = boxes.nth(i)
            assert "tl-live-unavailable" in box.get_attribute("class")
            assert box.locator(".tl-live-start").count() == 0
            assert "served over http" in box.locator(".tl-live-note").text_content()
        assert visit.errors == [] and visit.foreign == []


def test_nothing_live_is_loaded_before_the_reader_asks(server, browser):
    with Visit.served(server, browser, "live.html") as visit:
        loaded = visit.page.evaluate(
            "() => performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert not [
            x for x in loaded if "/_static/live/vendor/" in x or "/_static/live/models/" in x
        ], loaded


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def test_site_is_at_most_48_mb_without_the_live_model_files(site):
    """Issue 14: the site without the on-demand live files (runtime and models) stays within 48 MB.

    The bound was 30 MB, then 32 MB after the controls and interventions of issue 20 (2026-12-02:
    30.1 MB, nearly all of it the chapters' stored outputs, in the pages and in the downloadable
    notebooks under _sources/). Issue 24 (2026-12-06) stores the figures at twice the pixels
    (retina PNGs: 4.1 MB of PNG in the chapters became 9.1 MB), counted twice, as images and
    base64 in the notebooks: 46.3 MB measured. A reader does not load the total: pictures load
    lazily, and issue 24's load targets are per page (benchmarks/site_load.py)."""
    live = site / "_static" / "live"
    on_demand = _bytes(live / "vendor") + _bytes(live / "models")
    total = _bytes(site)
    _timings(
        {
            "site_bytes": total,
            "site_bytes_without_live_files": total - on_demand,
            "live_files_bytes": on_demand,
        }
    )
    assert total - on_demand <= 48e6, f"{(total - on_demand) / 1e6:.1f} MB"
    # only the MathJax component the pages use
    assert not list((site / "_static" / "mathjax").glob("tex-svg*.js"))


def test_page_weights(server, browser, site):
    """What each page loads when opened (HTML, scripts, styles, fonts, images), before any live mode."""
    weights = {}
    for name in site_pages(site):
        with Visit.served(server, browser, name) as visit:
            weights[name] = visit.page.evaluate(
                "() => performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'))"
                ".reduce((s, e) => s + (e.decodedBodySize || 0), 0)"
            )
    _timings({"page_weights_bytes": weights})
    assert all(w > 0 for w in weights.values())
