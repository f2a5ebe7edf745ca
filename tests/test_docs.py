"""The documentation site builds strictly (`make docs`): a broken link, a page left out of the nav, a snippet
whose file is gone or a docstring the reference cannot read fails the test command, not a later reader."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_with_the_api_reference_from_the_docstrings(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr, done.stderr[-3000:]
    # the reference is generated from the code: a public function of ctrnas.api and its docstring's words
    tree = ast.parse((ROOT / "ctrnas" / "api.py").read_text())
    docs = {f.name: ast.get_docstring(f) for f in tree.body if isinstance(f, ast.FunctionDef)}
    html = (site / "reference" / "api" / "index.html").read_text()
    text = " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())
    for name in ("run", "predict", "load_recipe"):
        assert f"ctrnas.api.{name}" in html, name
        first = " ".join(docs[name].replace("`", "").split()[:5])
        assert first in text, (name, first)
    # the recipes page is recipes/README.md itself, not a copy that drifts
    recipes = (site / "recipes" / "index.html").read_text()
    assert "synthetic-inherit.yaml" in recipes and "extends:" in recipes
