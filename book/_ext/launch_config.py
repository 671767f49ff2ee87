"""Sphinx extension: Binder and Colab launch buttons from the repository's address, read at build time.

The address is, in this order:

1. the environment variable ``TL_REPOSITORY_URL`` (``TL_REPOSITORY_URL=https://github.com/OWNER/REPO make book``;
   set it to ``none`` to build without buttons whatever the git remote says);
2. ``git remote get-url origin``, when it is a public https address (``https://HOST/OWNER/REPO[.git]``,
   without user name or token).

With an address, every chapter (a notebook page) gets a Binder button and, for a GitHub address, a Colab
button (Colab opens notebooks from GitHub only). Both open the real notebook file, ``notebooks/NN_*.ipynb``
at the repository's root (``path_to_docs`` is empty: the book reaches the chapters through the symlink
``book/notebooks``, which GitHub does not follow). The branch is ``TL_REPOSITORY_BRANCH`` or ``main``.
Binder builds the environment from ``binder/`` (repo2docker). Without an address the build has no
launch buttons, and no warning.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_HTTPS = re.compile(
    r"^https://(?P<host>[A-Za-z0-9.-]+\.[A-Za-z]{2,})/(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$"
)
BINDER = "https://mybinder.org"
COLAB = "https://colab.research.google.com"


def repository_url() -> str | None:
    """The public https address of the repository (without ``.git``), or ``None``; see the module docstring."""
    env = os.environ.get("TL_REPOSITORY_URL")
    if env is not None and env.strip():
        if env.strip().lower() == "none":
            return None
        candidate = env.strip()
        if not PUBLIC_HTTPS.match(candidate):
            raise ValueError(
                f"TL_REPOSITORY_URL: expected a public https address https://HOST/OWNER/REPO, "
                f"received {candidate!r}"
            )
    else:
        try:
            candidate = subprocess.run(
                ["git", "remote", "get-url", "origin"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
    m = PUBLIC_HTTPS.match(candidate)
    if not m:
        return None  # no remote, an ssh or file address, or one with credentials in it
    return f"https://{m['host']}/{m['owner']}/{m['repo']}"


def _configure(app, config) -> None:
    url = repository_url()
    opts = dict(config.html_theme_options or {})
    launch = dict(opts.get("launch_buttons") or {})
    if url is None:
        launch.update(binderhub_url="", colab_url="")
        opts["launch_buttons"] = launch
        config.html_theme_options = opts
        return
    opts["repository_url"] = url
    opts["repository_branch"] = os.environ.get("TL_REPOSITORY_BRANCH", "").strip() or "main"
    opts["path_to_docs"] = ""
    launch.update(
        binderhub_url=BINDER,
        notebook_interface="jupyterlab",
        colab_url=COLAB if url.startswith("https://github.com/") else "",
    )
    opts["launch_buttons"] = launch
    config.html_theme_options = opts


def setup(app):
    app.connect("config-inited", _configure)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
