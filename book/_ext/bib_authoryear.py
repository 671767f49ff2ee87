"""Sphinx extension: the bibliography page labels each work "Author et al., year", as the text cites it.

sphinxcontrib-bibtex takes the labels of the bibliography list from the pybtex formatting style;
its ``plain``/``alpha`` styles give ``[1]`` or ``[VSP+17]``, which a reader cannot match with an
in-text citation such as "Vaswani et al. (2017)". This extension registers a pybtex label style
that builds the same author-year text, and a formatting style (pybtex's ``unsrt`` entries, sorted
by author, year, title) that uses it; ``_config.yml`` selects it with
``bibtex_default_style: authoryear``.

It also writes each entry of the list as ``role="listitem"``. Docutils' HTML writer marks a
citation ``role="doc-biblioentry"`` inside a ``role="list"``; DPUB-ARIA 1.1 deprecates that role,
and a screen reader (and axe-core: ``aria-deprecated-role`` on all 49 entries, and
``aria-required-children``, critical, on the list, whose items then count as plain text and links)
no longer reads the entries as the items of a list.
"""

from __future__ import annotations

from docutils import nodes
from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle


def _last_names(entry) -> list[str]:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    return [" ".join(p.prelast_names + p.last_names) for p in people]


def author_year_label(entry) -> str:
    """``Vaswani et al., 2017``; ``Ba and Hinton, 2016`` (two authors); ``Hochreiter, 1991`` (one).

    LaTeX braces and escapes are removed from names (``{\\L}ukasz`` is not a last name here,
    but ``{Vaswani}`` would be). An entry without authors is labelled by its key.
    """
    names = [n.replace("{", "").replace("}", "") for n in _last_names(entry)]
    year = entry.fields.get("year", "n.d.")
    if not names:
        return entry.key
    if len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {year}"


class AuthorYearLabelStyle(BaseLabelStyle):
    """Author-year labels; two works with the same label get ``a``, ``b``, ... after the year."""

    def format_labels(self, sorted_entries):
        labels = [author_year_label(e) for e in sorted_entries]
        seen: dict[str, int] = {}
        for label in labels:
            seen[label] = seen.get(label, 0) + 1
        count: dict[str, int] = {}
        for label in labels:
            if seen[label] > 1:
                count[label] = count.get(label, 0) + 1
                yield label + "abcdefghijklmnopqrstuvwxyz"[count[label] - 1]
            else:
                yield label


class AuthorYearStyle(UnsrtStyle):
    """pybtex's ``unsrt`` entry format with author-year labels, sorted by author, year, title."""

    default_label_style = AuthorYearLabelStyle
    default_sorting_style = SortingStyle


register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)


def visit_citation(self, node):
    """Docutils' ``HTMLTranslator.visit_citation`` with ``role="listitem"`` for each entry."""
    if not isinstance(node.previous_sibling(), type(node)):
        self.body.append('<div role="list" class="citation-list">\n')
    self.body.append(self.starttag(node, "div", classes=[node.tagname], role="listitem"))


def depart_citation(self, node):
    self.body.append("</div>\n")
    if not isinstance(node.next_node(descend=False, siblings=True), type(node)):
        self.body.append("</div>\n")  # closes the list opened before the first entry


def setup(app):
    # for the html builder and, by format, every HTML builder (dirhtml, singlehtml)
    app.add_node(nodes.citation, override=True, html=(visit_citation, depart_citation))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
