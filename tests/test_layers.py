"""The layering of docs/architecture.md, enforced: import-linter's contracts in pyproject.toml must hold."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_import_contracts_hold():
    pytest.importorskip("importlinter", reason="import-linter is in the `test` extra")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(_contracts())} kept, 0 broken" in proc.stdout


def test_contracts_have_no_exceptions_and_keep_search_free_of_ctr_code():
    contracts = _contracts()
    assert all("ignore_imports" not in c and "unmatched_ignore_imports_alerting" not in c for c in contracts)
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    assert layers.index("ctrnas.cli") < layers.index("ctrnas.api") < layers.index("ctrnas.pipeline | ctrnas.vision")
    assert layers.index("ctrnas.pipeline | ctrnas.vision") < layers.index("ctrnas.distributed")
    search = next(c for c in contracts if c["type"] == "forbidden" and c["source_modules"] == ["ctrnas.search"])
    assert {"ctrnas.proxies", "ctrnas.supernet", "ctrnas.train", "torch", "torchrec"} <= set(search["forbidden_modules"])
