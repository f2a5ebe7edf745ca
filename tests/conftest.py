"""Suite-wide settings: one intra-op thread for every test (tiny tensors run ~10-100x slower with 2 threads
on a busy 2-core box, where OpenMP workers spin); reset before each test, since commands under test may
set their own thread count. And the order in which `make test` hands out the test files."""

from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent

# The files that take longest, longest first (CPU seconds of one file, measured with --durations; the rest
# keep their order after them). `make test` gives each worker whole files (--dist loadfile: a module's
# fixtures, such as a pipeline run, are built once), so the long ones must start first for the workers
# to end together. A file missing here only starts later; re-measure when a file grows past the last.
SLOW_FIRST = (
    "pipeline/test_execution_recipe.py",
    "test_benchmark_suite.py",
    "pipeline/test_pipeline.py",
    "serve/test_train_predict.py",
    "test_readme.py",
    "distributed/test_run_distributed.py",
    "execution/test_executors.py",
    "pipeline/test_final_widths.py",
    "pipeline/test_ctr_fitness.py",
    "test_layers.py",
    "distributed/test_commands.py",
    "distributed/test_dmp.py",
    "security/test_hostile_files.py",
    "pipeline/test_final_resume.py",
    "pipeline/test_multifidelity_run.py",
    "pipeline/test_emb_dims_run.py",
    "pipeline/test_front_run.py",
    "test_newcomer_cli.py",
    "test_benchmark_oracle.py",
    "test_docs.py",
    "serve/test_serving.py",
    "serve/test_predict.py",
    "supernet/test_export_io.py",
    "supernet/test_cross.py",
    "pipeline/test_train_arch_from_run.py",
    "security/test_writer_folders.py",
    "security/test_bad_inputs.py",
    "pipeline/test_compact_resume.py",
)


def pytest_collection_modifyitems(items):
    first = {name: i for i, name in enumerate(SLOW_FIRST)}

    def rank(item) -> int:
        try:
            return first.get(item.path.relative_to(TESTS).as_posix(), len(first))
        except ValueError:  # a test file outside tests/
            return len(first)

    items.sort(key=rank)  # stable: each file's tests keep their order


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)
    yield
