"""book/_ext/print_search.py: the pages with index terms are read on every build.

Sphinx 7 reloads the previous search index without its index entries, so a rebuild that re-reads
only a changed chapter would drop the other chapters' terms ("KV cache", "rotary" ...) from the
search. The extension asks Sphinx (``env-get-outdated``) to read those pages again; oracle: the
pages named in ``INDEX_TERMS``, and Sphinx's own loader (which must still drop the entries, or the
extension's reason is gone).
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import print_search  # noqa: E402


def test_every_page_with_index_terms_is_read_again():
    pages = {doc for places in print_search.INDEX_TERMS.values() for doc, _ in places}
    env = SimpleNamespace(found_docs=pages | {"intro", "notebooks/01_attention"})
    changed = {"notebooks/02_causal_masks"}
    again = print_search._reread_indexed_pages(None, env, set(), changed, set())
    assert set(again) == pages - changed
    assert "notebooks/04_transformer_block" in again and "intro" not in again


def test_a_page_no_longer_in_the_book_is_not_asked_for():
    env = SimpleNamespace(found_docs={"notebooks/03_positional_encodings"})
    assert print_search._reread_indexed_pages(None, env, set(), set(), set()) == [
        "notebooks/03_positional_encodings"
    ]


def test_sphinx_still_reloads_the_search_index_without_its_entries():
    from sphinx.search import IndexBuilder

    assert "_index_entries" not in inspect.getsource(IndexBuilder.load)
