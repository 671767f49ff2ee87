"""First load of every page of the built book over a slow connection (issue 24, "slow connection").

Each page is opened in a fresh browser context (empty cache) in Debian's Chromium, driven by
Playwright, with Chromium's own network throttling (DevTools ``Network.emulateNetworkConditions``:
10 Mbit/s down and up, 40 ms latency; the CPU is not slowed unless ``--cpu 4`` asks for a cheap
phone's 4x slow-down). Recorded per page:

* ``fcp_s``: first contentful paint (``performance.getEntriesByName('first-contentful-paint')``);
* ``dcl_s``, ``load_s``: DOMContentLoaded and the load event, from the navigation entry;
* ``bytes``: the decoded (uncompressed) size of the page and of every file it loaded, shared files
  included, counted once the network has been idle for 1 s after the load event (so files a page
  loads after ``load``, such as a deferred plotly.js, count too); ``requests``: how many;
* ``plotly_end_s``: when plotly.js had arrived (``responseEnd``), where the page loads it, and
  ``figures_drawn``: plotly figures drawn when the measurement ended, out of ``figures``.

The server is Python's ``http.server`` (no compression, so transfer size = decoded size). Targets
(issue 24): ``fcp_s`` <= 2 s for every chapter, ``bytes`` <= 3 MB. Not a test: timings depend on
the machine; run it by hand and commit the results::

    python3 -m http.server -d book/_build/html 8899 &
    python3 benchmarks/site_load.py --url http://127.0.0.1:8899 --label after

It writes ``benchmarks/site_load.json`` (every run kept under its label) and ``site_load.md``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PAGES = [
    "intro.html",
    "notebooks/01_attention.html",
    "notebooks/02_causal_masks.html",
    "notebooks/03_positional_encodings.html",
    "notebooks/04_transformer_block.html",
    "notebooks/05_encoder_decoder.html",
    "notebooks/06_rnn_gradients.html",
    "notebooks/07_cost.html",
    "notebooks/08_language_model.html",
    "notebooks/09_build_a_gpt.html",
    "live.html",
]
MBIT = 10
LATENCY_MS = 40

MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  const plotly = res.find(e => /plotly[^/]*\\.min\\.js/.test(e.name) && !/theme|touch/.test(e.name));
  return {
    fcp_s: fcp ? fcp.startTime / 1000 : null,
    dcl_s: nav.domContentLoadedEventEnd / 1000,
    load_s: nav.loadEventEnd / 1000,
    bytes: [nav].concat(res).reduce((s, e) => s + (e.decodedBodySize || 0), 0),
    requests: 1 + res.length,
    plotly_end_s: plotly ? plotly.responseEnd / 1000 : null,
    plotly_file: plotly ? plotly.name.split('/').pop() : null,
    figures: document.querySelectorAll('.plotly-graph-div').length,
    figures_drawn: [...document.querySelectorAll('.plotly-graph-div')].filter(d => d.querySelector('.main-svg')).length,
  };
}"""


def measure(browser, url: str, cpu: float = 1) -> dict:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    if cpu > 1:  # a cheap phone: Chromium runs the page's work this many times slower
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": cpu})
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": LATENCY_MS,
            "downloadThroughput": MBIT * 1e6 / 8,
            "uploadThroughput": MBIT * 1e6 / 8,
        },
    )
    page.goto(url, wait_until="load", timeout=120_000)
    page.wait_for_load_state("networkidle", timeout=120_000)
    page.wait_for_timeout(1000)
    page.wait_for_load_state("networkidle", timeout=120_000)
    out = page.evaluate(MEASURE)
    context.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8899", help="where the built site is served")
    ap.add_argument(
        "--label", required=True, help="name of this run in site_load.json (e.g. before, after)"
    )
    ap.add_argument("--commit", default="", help="the commit the site was built from")
    ap.add_argument("--repeats", type=int, default=3, help="loads per page; the median is kept")
    ap.add_argument(
        "--cpu", type=float, default=1, help="CPU slow-down factor (4: a cheap phone; 1: none)"
    )
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        for name in PAGES:
            runs = [measure(browser, f"{args.url}/{name}", args.cpu) for _ in range(args.repeats)]
            row = dict(runs[0])
            for key in ("fcp_s", "dcl_s", "load_s", "plotly_end_s"):
                vals = [r[key] for r in runs if r[key] is not None]
                row[key] = round(statistics.median(vals), 3) if vals else None
            row["fcp_s_runs"] = [r["fcp_s"] and round(r["fcp_s"], 3) for r in runs]
            results[name] = row
            print(
                name,
                {k: row[k] for k in ("fcp_s", "load_s", "bytes", "requests", "plotly_end_s")},
                flush=True,
            )
        browser.close()

    path = HERE / "site_load.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[args.label] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": args.commit,
        "throttling": f"{MBIT} Mbit/s down and up, {LATENCY_MS} ms latency, cache disabled, "
        + (f"CPU slowed {args.cpu:g}x" if args.cpu > 1 else "CPU not slowed"),
        "machine": f"{platform.machine()}, {platform.system()} {platform.release()}, Chromium {CHROMIUM}",
        "repeats": args.repeats,
        "pages": results,
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    write_md(data)


def write_md(data: dict) -> None:
    lines = [
        "# First load of each page at 10 Mbit/s, 40 ms (benchmarks/site_load.py)",
        "",
        "Chromium's network throttling, empty cache, CPU not slowed; median of the repeats.",
        "Targets (issue 24): first contentful paint <= 2 s per chapter, first-load bytes <= 3 MB",
        "(decoded, shared files included, counted after the network has been idle for 1 s).",
        "",
    ]
    for label, run in data.items():
        lines += [
            f"## {label} ({run['when']}{', ' + run['commit'] if run['commit'] else ''})",
            "",
            f"{run['throttling']}; {run['repeats']} loads per page.",
            "",
            "| page | FCP s | DOMContentLoaded s | load s | MB | requests | plotly file | plotly arrived s | figures drawn |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, r in run["pages"].items():
            f = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
            lines.append(
                f"| {name} | {f(r['fcp_s'])} | {f(r['dcl_s'])} | {f(r['load_s'])} | {r['bytes'] / 1e6:.2f} "
                f"| {r['requests']} | {r['plotly_file'] or ''} | {f(r['plotly_end_s'])} "
                f"| {r['figures_drawn']}/{r['figures']} |"
            )
        lines.append("")
    (HERE / "site_load.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
