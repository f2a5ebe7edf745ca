"""Suite-wide settings: one intra-op thread for every test (tiny tensors run ~10-100x slower with 2 threads
on a busy 2-core box, where OpenMP workers spin); reset before each test, since commands under test may
set their own thread count. The order in which `make test` hands out the test files, and `built_once`, which
makes an expensive read-only fixture folder once for all the run's worker processes (`criteo_exported`: the
criteo sample's exported models several test files read)."""

import fcntl
import os
import shutil
from pathlib import Path
from typing import Callable

# one OpenMP thread in every process the tests start (CLI runs, workers, Ray): with a process per core,
# more threads spin-wait on each other and the suite takes about twice as long
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent

# The files that take longest, longest first (a file's wall-clock seconds in a whole `make test`, from pytest's
# --durations=0; the files that start Ray take several times their CPU). `make test` gives each worker whole
# files (--dist loadfile: a module's fixtures, such as a pipeline run, are built once), so the long ones must
# start first for the workers to end together. A file missing here only starts later; re-measure when a file
# grows past the last (docs/architecture.md, "The test suite's time").
SLOW_FIRST = (
    "serve/test_train_predict.py",
    "pipeline/test_pipeline.py",
    "test_readme.py",
    "pipeline/test_execution_recipe.py",
    "test_benchmark_suite.py",
    "execution/test_executors.py",
    "pipeline/test_final_resume.py",
    "pipeline/test_front_run.py",
    "serve/test_serving.py",
    "supernet/test_export_io.py",
    "pipeline/test_train_arch_from_run.py",
    "serve/test_predict.py",
    "train/test_commands.py",
    "pipeline/test_final_widths.py",
    "distributed/test_run_distributed.py",
    "pipeline/test_multifidelity_run.py",
    "security/test_writer_folders.py",
    "test_benchmark_embedding.py",
    "pipeline/test_interrupts.py",
    "serve/test_predict_program.py",
    "security/test_hostile_files.py",
    "supernet/test_export_equivalence.py",
    "test_newcomer_cli.py",
    "pipeline/test_emb_dims_run.py",
    "distributed/test_dmp.py",
    "pipeline/test_compact_resume.py",
    "supernet/test_cross.py",
    "pipeline/test_selection.py",
    "pipeline/test_search_quality_run.py",
    "security/test_payloads.py",
    "test_newcomer_snags.py",
    "pipeline/test_run_folder.py",
    "distributed/test_commands.py",
    "data/test_prepare_fastpaths.py",
)


def pytest_collection_modifyitems(items):
    first = {name: i for i, name in enumerate(SLOW_FIRST)}

    def rank(item) -> int:
        try:
            return first.get(item.path.relative_to(TESTS).as_posix(), len(first))
        except ValueError:  # a test file outside tests/
            return len(first)

    items.sort(key=rank)  # stable: each file's tests keep their order


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `build(folder)` writes, made once per test run: the first worker process (pytest-xdist) to
    ask builds it under a file lock, the others wait and read it. Tests must not change it (copy it first)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's folder, shared by its workers (each has its own basetemp below it)
    folder = root / "built-once" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    done = folder.parent / f"{name}.done"
    with open(folder.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when its process dies
        if not done.exists():
            if folder.exists():  # left by a build that failed in another worker: start again
                shutil.rmtree(folder)
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def once():
    """`once(tmp_path_factory, name, build)`: see `built_once` (conftest is not importable in importlib mode)."""
    return built_once


@pytest.fixture(scope="session")
def criteo_exported(once, tmp_path_factory):
    """`criteo_exported(source="generated", arch="dlrm-like", row_cap=None)` -> (dataset folder, model folder):
    `tests.helpers.serve.prepared_and_exported` of the criteo sample from `source` (tests.helpers.samples) at
    500 hash buckets, made once for the whole test run. Read only: a test that changes a folder copies it."""

    def get(source: str = "generated", arch: str = "dlrm-like", row_cap: int | None = None) -> tuple[Path, Path]:
        from tests.helpers.samples import sample
        from tests.helpers.serve import prepared_and_exported

        def build(folder: Path):
            folder.mkdir(parents=True)
            prepared_and_exported(folder, "criteo", [str(sample("criteo", source))], arch=arch, row_cap=row_cap,
                                  hash_buckets=500)

        folder = built_once(tmp_path_factory, f"criteo-{source}-{arch}-{row_cap}", build)
        return folder / "criteo-data", folder / "criteo-model"

    return get


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)
    yield


def _cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children and every live descendant (with what they reaped):
    a test's CPU, wherever its work ran (subprocesses, the fork server's workers)."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With CTRNAS_TEST_CPU=FILE, append each test's CPU seconds (setup, call, teardown) and node id to FILE:
    what a test costs on a loaded box, where wall-clock durations mostly measure the load."""
    out = os.environ.get("CTRNAS_TEST_CPU")
    start = _cpu_seconds() if out else 0.0
    yield
    if out:
        with open(out, "a") as f:
            f.write(f"{_cpu_seconds() - start:.2f}\t{item.nodeid}\n")
