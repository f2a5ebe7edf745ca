"""`ctrnas score` end to end on a small synthetic dataset folder and a fresh (zero-shot) supernet."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from ctrnas.errors import RecipeError

pytest.importorskip("ctrnas.supernet.supernet", reason="the supernet is not available")
from ctrnas.config import load_yaml  # noqa: E402
from ctrnas.data.synthetic import generate  # noqa: E402
from ctrnas.cli import score as commands  # noqa: E402
from ctrnas.space import get_space  # noqa: E402


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("score")
    generate("criteo", rows=800, seed=0, out=d / "data")
    space = d / "space.yaml"
    space.write_text("base: nasrec-small\nnum_blocks: 2\ndense_dims: [8, 16]\nsparse_tokens: [4]\n")
    arch = get_space(load_yaml(space)).sample(np.random.default_rng(0))
    (d / "arch.json").write_text(json.dumps(arch.to_json()))
    return d


def run(argv):
    p = argparse.ArgumentParser()
    commands.register(p.add_subparsers())
    args = p.parse_args(argv)
    return args.func(args)


@pytest.mark.slow
def test_score_prints_every_proxy_and_writes_json(case, capsys):
    argv = ["score", "--data", str(case / "data"), "--arch", str(case / "arch.json"), "--space",
            str(case / "space.yaml"), "--proxies", "sigeo,zico,flops", "--batches", "2", "--batch-size", "32",
            "--set", "sigeo.k=2", "--set", "zico.k=2", "--set", "sigeo.preset=warmup_recsys"]
    assert run(argv + ["--json", str(case / "a.json")]) == 0
    *table, direction = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table] == ["proxy", "sigeo", "zico", "flops"]
    assert direction.startswith("higher is better for every proxy")
    a = json.loads((case / "a.json").read_text())
    assert a["sigeo"]["options"]["preset"] == "warmup_recsys"
    s = a["sigeo"]["terms"]
    assert a["sigeo"]["value"] == pytest.approx(s["zico"] + s["fr"] - s["loss"])
    assert all(math.isfinite(a[n]["value"]) for n in a)
    run(argv + ["--json", str(case / "b.json")])   # same seed, same batches: same numbers
    b = json.loads((case / "b.json").read_text())
    assert {n: b[n]["value"] for n in b} == {n: a[n]["value"] for n in a}


def test_score_rejects_bad_options_before_loading_anything(tmp_path):
    base = ["score", "--data", str(tmp_path / "absent"), "--arch", str(tmp_path / "absent.json")]
    with pytest.raises(RecipeError, match="unknown proxy"):
        run(base + ["--proxies", "nope"])
    with pytest.raises(RecipeError, match="PROXY.OPTION=VALUE"):
        run(base + ["--proxies", "sigeo", "--set", "sigeo"])
    with pytest.raises(RecipeError, match="lam9"):
        run(base + ["--proxies", "sigeo", "--set", "sigeo.lam9=1"])
    from ctrnas.errors import DeviceError

    with pytest.raises(DeviceError, match="device 'gpu'"):  # `--device` is checked before any loading too
        run(base + ["--proxies", "sigeo", "--device", "gpu"])


def test_score_list_needs_no_data(capsys):
    from ctrnas.proxies import list_proxies

    assert run(["score", "--list"]) == 0
    assert capsys.readouterr().out.split() == list_proxies()


def test_too_few_batches_points_at_the_batches_flag(case):
    """ZiCo/SiGeo take a variance over batches: `--batches 1` is refused naming the flag to raise, and a
    proxy asked for more batches than given names both counts."""
    from ctrnas.errors import CtrnasError

    base = ["score", "--data", str(case / "data"), "--arch", str(case / "arch.json"), "--space",
            str(case / "space.yaml"), "--batch-size", "32"]
    with pytest.raises(CtrnasError, match=r"needs at least 2 batches .*`ctrnas score --batches 2`"):
        run(base + ["--proxies", "zico", "--batches", "1"])
    from ctrnas.proxies.base import batch_count_message

    assert "k=4 batches asked but 3 given" in batch_count_message("zico", 4, 3)
