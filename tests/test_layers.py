"""The layering of docs/architecture.md, enforced: import-linter's contracts in pyproject.toml must hold."""

import ast
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
    top = "ctrnas.pipeline | ctrnas.vision | ctrnas.serving"
    assert layers.index("ctrnas.cli") < layers.index("ctrnas.api") < layers.index(top)
    assert layers.index(top) < layers.index("ctrnas.distributed")
    search = next(c for c in contracts if c["type"] == "forbidden" and c["source_modules"] == ["ctrnas.search"])
    assert {"ctrnas.proxies", "ctrnas.supernet", "ctrnas.train", "torch", "torchrec"} <= set(search["forbidden_modules"])


def test_type_checker_finds_no_error():
    """mypy, pinned in the `test` extra, over the packages `[tool.mypy]` names (search, space, execution at least)."""
    pytest.importorskip("mypy", reason="mypy is in the `test` extra")
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["packages"]
    assert {"ctrnas.search", "ctrnas.space", "ctrnas.execution"} <= set(packages)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and "Success: no issues found" in proc.stdout, proc.stdout + proc.stderr


def test_pipeline_has_inner_layers():
    """pipeline/ is checked inside too: the verbs over the run over the stages over the fitness over the data,
    with the final stage and the fitness each a package of their own (docs/architecture.md)."""
    inner = {tuple(c["containers"]): c["layers"] for c in _contracts()
             if c["type"] == "layers" and "containers" in c}
    pipeline = inner[("ctrnas.pipeline",)]
    assert pipeline.index("run") < pipeline.index("budget | final | stages") < pipeline.index("fitness")
    assert pipeline.index("fitness") < pipeline.index("data | inputs | report | run_folder") < pipeline.index("results")
    assert inner[("ctrnas.pipeline.fitness",)][-1] == "ctr_fitness | scratch"
    assert inner[("ctrnas.pipeline.final",)][0] == "stage"
    assert (ROOT / "ctrnas/serving/predict.py").is_file() and not (ROOT / "ctrnas/pipeline/predict.py").exists()


def _import_cycles(package: str) -> list[list[str]]:
    """The import circles between the files of `package` (strongly connected components of the graph of
    module-level and function-local imports), each as its sorted module names."""
    import grimp

    graph = grimp.build_graph("ctrnas", cache_dir=None)
    mods = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in mods:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                cycles.append(sorted([v, *comp]))

    for m in mods:
        if m not in index:
            visit(m)
    return cycles


@pytest.mark.parametrize("package", ["ctrnas"])
def test_no_import_circles_between_files(package):
    pytest.importorskip("grimp", reason="grimp comes with import-linter (the `test` extra)")
    assert _import_cycles(package) == []


def _private_ctrnas_imports(source: str) -> list[str]:
    """`from ctrnas... import _x`, `import ctrnas._x`, and `alias._x` on a module imported from ctrnas."""
    found, aliases = [], set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "ctrnas":
            for a in node.names:
                if a.name.startswith("_") or any(p.startswith("_") for p in node.module.split(".")):
                    found.append(f"line {node.lineno}: from {node.module} import {a.name}")
                aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "ctrnas":
                    if any(p.startswith("_") for p in a.name.split(".")):
                        found.append(f"line {node.lineno}: import {a.name}")
                    aliases.add(a.asname or "ctrnas")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_private_import_check_catches_each_form():
    assert _private_ctrnas_imports("from ctrnas.pipeline.study import _train_all, sample_archs")
    assert _private_ctrnas_imports("import ctrnas.data._x")
    assert _private_ctrnas_imports("from ctrnas.pipeline import budget\nbudget._rows(1)")
    assert not _private_ctrnas_imports("from ctrnas.pipeline.study import sample_archs\nfrom _results import _x")


def test_benchmarks_import_only_public_names():
    """The benchmarks use what a user may use: the API and public names (private ones change without notice)."""
    files = sorted((ROOT / "benchmarks").rglob("*.py"))
    assert files
    bad = [f"{f.relative_to(ROOT)} {hit}" for f in files for hit in _private_ctrnas_imports(f.read_text())]
    assert bad == []
