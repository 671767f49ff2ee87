"""Sphinx extension: the printed handout's title and the search box (issue 24).

* **Printed title with its chapter number.** sphinx-book-theme prints its own page title
  (``#jb-print-docs-body h1``, from the template variable ``pagetitle``) and hides the article's
  numbered ``h1`` on paper, so a printed chapter read "Causal masks" instead of "2. Causal masks".
  ``pagetitle`` is set here to the numbered title (the section number of the document's title,
  ``env.toc_secnumbers``). The rest of the handout is ``book/_static/print.css``.

* **Index entries for the terms readers type.** Sphinx's search lists a section first when the
  query is (at least half of) an index entry, but a section heading only when the query is at
  least half of the heading: "layer norm" did not reach "4.1. Layer normalization: each position
  on its own", and "KV cache", the usual name, is not a word of the chapters ("the key/value
  cache"). ``INDEX_TERMS`` below gives each such term the section that answers it; the entries
  also appear in the book's general index (genindex.html). A section id that no longer exists
  stops the build (``-W``), so the list cannot silently point nowhere. On a rebuild, Sphinx reloads
  the previous search index without its index entries (``IndexBuilder.load`` in Sphinx 7 restores
  terms and titles only), so the pages that carry entries are read again on every build
  (``env-get-outdated``); otherwise a rebuild after one chapter changed lost the other chapters' terms.

* **Search snippets as prose.** ``search_snippets.js`` (beside this file) is loaded on the search
  page only. Sphinx's ``searchtools.js`` builds each result's snippet from the text of the whole
  page (the download menu's ".ipynb" label, the print-only table of contents, code cells and the
  LaTeX source of every formula included) and places it at the first occurrence of the *stemmed*
  query word ("rotari" for "rotary"), which is often nowhere, so the snippet fell back to the
  page's first characters: "....ipynb". The script reads the article's prose only, writes
  formulas as plain text (Unicode symbols, no backslash commands) and places the snippet at the
  query as typed.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

SNIPPETS_JS = "search_snippets.js"  # beside this file; copied to _static/ after the build

# term (as a reader types it) -> (document, id of the section that answers it).
# Section ids are those of the built HTML (the headings' slugs).
INDEX_TERMS: dict[str, list[tuple[str, str]]] = {
    "KV cache": [
        ("notebooks/08_language_model", "the-key-value-cache"),
        ("notebooks/07_cost", "training-is-parallel-generation-is-not"),
    ],
    "key/value cache": [
        ("notebooks/08_language_model", "the-key-value-cache"),
        ("notebooks/07_cost", "training-is-parallel-generation-is-not"),
    ],
    "rotary": [("notebooks/03_positional_encodings", "rope-rotate-the-queries-and-keys")],
    "RoPE": [("notebooks/03_positional_encodings", "rope-rotate-the-queries-and-keys")],
    "rotary position embedding": [
        ("notebooks/03_positional_encodings", "rope-rotate-the-queries-and-keys")
    ],
    "causal mask": [("notebooks/02_causal_masks", "causal-masks")],
    "layer norm": [
        ("notebooks/04_transformer_block", "layer-normalization-each-position-on-its-own")
    ],
    "layer normalization": [
        ("notebooks/04_transformer_block", "layer-normalization-each-position-on-its-own")
    ],
    "vanishing gradient": [
        ("notebooks/06_rnn_gradients", "recurrent-networks-and-vanishing-gradients"),
        ("notebooks/06_rnn_gradients", "gradient-norm-against-lag-the-spectral-radius"),
    ],
}


def _terms_by_document() -> dict[str, list[tuple[str, str]]]:
    """document -> [(term, section id), ...] from ``INDEX_TERMS``."""
    out: dict[str, list[tuple[str, str]]] = {}
    for term, places in INDEX_TERMS.items():
        for docname, section_id in places:
            out.setdefault(docname, []).append((term, section_id))
    return out


class AddIndexTerms(SphinxTransform):
    """Insert an index node for each ``INDEX_TERMS`` entry at the start of its section.

    Runs before Sphinx's domains collect the document (priority 850), so the entries reach both
    the general index and the search index.
    """

    default_priority = 840

    def apply(self, **kwargs) -> None:
        wanted = _terms_by_document().get(self.env.docname)
        if not wanted:
            return
        sections = {
            section_id: section
            for section in self.document.findall(nodes.section)
            for section_id in section["ids"]
        }
        for term, section_id in wanted:
            section = sections.get(section_id)
            if section is None:
                logger.warning(
                    "print_search: no section with id %r in %s for the index term %r "
                    "(update INDEX_TERMS in book/_ext/print_search.py)",
                    section_id,
                    self.env.docname,
                    term,
                )
                continue
            index = addnodes.index(entries=[("single", term, section_id, "main", None)])
            # after the title, so the entry sits inside the section it names
            position = 1 if section.children and isinstance(section[0], nodes.title) else 0
            section.insert(position, index)


def _reread_indexed_pages(app, env, added, changed, removed) -> list[str]:
    """The pages with ``INDEX_TERMS`` entries, so that every build puts their entries in the search index."""
    pages = _terms_by_document()
    return sorted(d for d in pages if d in env.found_docs and d not in added | changed)


def _numbered_print_title(app, pagename, templatename, context, doctree) -> None:
    numbers = app.env.toc_secnumbers.get(pagename, {}).get("")
    if numbers and context.get("pagetitle"):
        context["pagetitle"] = ".".join(map(str, numbers)) + ". " + context["pagetitle"]


def _snippets_on_search_page(app, pagename, templatename, context, doctree) -> None:
    if pagename == "search":
        # deferred: runs after searchtools.js and searchindex.js, before the query is run
        app.add_js_file(SNIPPETS_JS, loading_method="defer")


def _copy_snippets_js(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / SNIPPETS_JS
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(__file__).with_name(SNIPPETS_JS).read_bytes())


def setup(app):
    app.add_transform(AddIndexTerms)
    app.connect("env-get-outdated", _reread_indexed_pages)
    # after sphinx-book-theme's add_metadata_to_page (500), which sets pagetitle
    app.connect("html-page-context", _numbered_print_title, priority=600)
    app.connect("html-page-context", _snippets_on_search_page)
    app.connect("build-finished", _copy_snippets_js)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
