"""The offline successive halving of benchmarks/rungs.py on a hand-made pool."""

from __future__ import annotations


def _rungs():
    from tests.helpers.bench_scripts import load_script

    return load_script("rungs")


def test_halving_follows_each_rung_and_picks_by_final_val():
    halve = _rungs().halve
    order = ["a", "b", "c", "d", "e", "f"]            # first rung: a best ... f worst
    s5 = {"a": 0.5, "b": 0.3, "c": 0.4, "d": 0.2, "e": 0.0, "f": 0.0}
    s20 = {"a": 0.0, "b": 0.3, "c": 0.1, "d": 0.2, "e": 0.0, "f": 0.0}
    val = {"a": 0.1, "b": 0.5, "c": 0.4, "d": 0.3, "e": 0.0, "f": 0.0}
    test = {k: 1.0 + i for i, k in enumerate(order)}
    # rung 1 keeps a-d (e, f never trained); 5%: d, b best half; 20%: both kept; final val: d (0.3) < b (0.5)
    assert halve(order, 4, s5, s20, val, test) == (test["d"], "d", (4, 2, 2))
    # top_k 1: the 20% rung alone decides (d 0.2 < b 0.3)
    assert halve(order, 4, s5, s20, val, test, top_k=1)[1] == "d"
    # keeping 3: a, b, c; 5%: b, c; 20%: c, b; final val: c (0.4) < b (0.5)
    assert halve(order, 3, s5, s20, val, test)[1:] == ("c", (3, 2, 2))
