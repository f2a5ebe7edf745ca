"""A raw format declared in one file (here, this test) plus its registration: `prepare`, the CLI, a recipe and
the saved preprocessing read it like the built-in formats (the reader how-to of docs/architecture.md)."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from ctrnas.cli import build_parser, main
from ctrnas.data.preprocess import Preprocess, has_labels
from ctrnas.data.readers import formats
from ctrnas.data.readers.records import first_line
from ctrnas.data.readers.rows import DelimitedReader
from ctrnas.errors import CtrnasError, RecipeError
from ctrnas.recipe import recipe_from_dict


class PipeReader(DelimitedReader):
    """`label|x|c`: a 0/1 label, one dense count and one integer category, `|`-separated, no header."""

    format = "pipe"

    def __init__(self, paths: list[str], cfg):
        super().__init__(paths, cfg, ["label", "x", "c"], ["x"], [("c", "dec")], delimiter="|")

    def describe(self) -> dict:
        return {"format": "pipe"}


def pipe_has_labels(cfg, path: str) -> bool:
    return first_line(path).count("|") == 2


@pytest.fixture
def pipe(monkeypatch):
    monkeypatch.setattr(formats, "_FORMATS", dict(formats._FORMATS))  # registered for this test only
    formats.register_format(formats.RawFormat(
        "pipe", "label|x|c lines", PipeReader, pipe_has_labels,
        options=(formats.Option(("--rows",), "limit", "stop after N rows", {"type": int}),)))
    return "pipe"


def test_a_registered_format_is_prepared_by_the_cli_with_its_own_option(pipe, tmp_path):
    rows = [(i % 2, i, 3 * i) for i in range(20)]
    (tmp_path / "log.txt").write_text("".join(f"{y}|{x}|{c}\n" for y, x, c in rows))
    assert "pipe" in build_parser().parse_args(["prepare", "pipe", "-i", "x", "-o", "y"]).kind
    rc = main(["prepare", "pipe", "-i", str(tmp_path / "log.txt"), "-o", str(tmp_path / "out"), "--rows", "15",
               "--split", "order", "--dense-transform", "none", "--hash-table-size", "buckets",
               "--hash-buckets", "11", "--no-progress"])
    assert rc == 0
    t = pq.read_table(tmp_path / "out" / "train")
    n = len(t)  # the first 80% of the 15 rows read (`--rows`), in file order
    assert n == 12
    assert np.array_equal(t.column("label").to_numpy(), [y for y, _, _ in rows[:n]])
    assert np.array_equal(t.column("x").to_numpy(), [x for _, x, _ in rows[:n]])
    assert np.array_equal(t.column("c").to_numpy(), [1 + c % 10 for _, _, c in rows[:n]])  # 1 + key mod (11 - 1)

    pre = Preprocess.load(tmp_path / "out")
    (tmp_path / "unlabelled.txt").write_text("5|7\n")
    assert has_labels(pre, tmp_path / "log.txt") and not has_labels(pre, tmp_path / "unlabelled.txt")


def test_a_recipe_names_a_registered_format_and_an_unknown_one_is_a_clear_error(pipe, tmp_path):
    data = {"name": "t", "data": {"raw": {"kind": "pipe", "inputs": ["log.txt"]}}}
    assert recipe_from_dict(data).data.raw.kind == "pipe"
    with pytest.raises(RecipeError, match="data.raw.kind.*'pipe'.*got 'pipes'"):
        recipe_from_dict({**data, "data": {"raw": {"kind": "pipes", "inputs": ["log.txt"]}}})
    from ctrnas.data.prepare import prepare
    from ctrnas.data.prepare_config import PrepareConfig

    (tmp_path / "log.txt").write_text("1|2|3\n")
    with pytest.raises(CtrnasError, match="unknown raw format 'pipes'; expected one of .*'pipe'"):
        prepare("pipes", [str(tmp_path / "log.txt")], tmp_path / "o", PrepareConfig(progress=False))


def test_the_preprocessing_of_an_unknown_format_is_an_error_not_another_formats_rule(tmp_path):
    pre = Preprocess("nope", None, None, [])
    (tmp_path / "f.csv").write_text("id,click\n")
    with pytest.raises(CtrnasError, match="unknown raw format 'nope'"):
        has_labels(pre, tmp_path / "f.csv")
