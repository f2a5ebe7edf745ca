"""benchmarks/embedding.py in small: one baseline at two widths on a tiny kdd2012-sparse-noise, the search part
on a hand-made front.json (the search itself stubbed), the report's goals and the throughput widths."""

from __future__ import annotations

import json

import pytest

SETTINGS = "data.synthetic.settings={chunk_rows: 8192, calibration_rows: 8192, cardinality_cap: 2000}"


def _bench():
    from tests.helpers.bench_scripts import load_script

    return load_script("embedding")


def _model(label, test, nbytes, kind="candidate", on_front=True, dropped=()):
    return {"label": label, "kind": kind, "arch_key": label, "val_logloss": test - 0.01, "test_logloss": test,
            "embedding_bytes": nbytes, "dense_params": 1000, "dropped_fields": list(dropped), "on_front": on_front}


# best baseline: test 0.1600, sd 0.0010, 4,000,000 bytes
BEST = {"test": 0.1600, "sd": 0.0010, "embedding_bytes": 4_000_000}
FRONT = {"models": [
    _model("rank 0", 0.1605, 1_000_000, dropped=["N1", "N2"]),        # within 1 sd at exactly 0.25x: goal 1
    _model("rank 1", 0.1575, 3_000_000, dropped=["N1"]),              # 0.0025 below (> 2 sd) at 0.75x: goal 2
    _model("rank 2", 0.1590, 5_000_000, on_front=False),              # more bytes than the best: neither
    _model("rank 3", 0.1570, 4_500_000, dropped=["N1", "AdID"]),      # better but over 1x bytes: not goal 2
    _model("dlrm", 0.1500, 100, kind="baseline"),                     # a baseline never counts
    {**_model("rank 4", 0.15, 100, on_front=False), "test_logloss": None, "embedding_bytes": None},  # failed
]}


def test_goals_and_dropped_fields_on_a_hand_made_front(tmp_path):
    bench = _bench()
    path = tmp_path / "front.json"
    path.write_text(json.dumps(FRONT))
    models = bench.read_front(path)
    g = bench.goals(models, BEST)
    assert g["small"]["label"] == "rank 0" and g["better"]["label"] == "rank 1"
    # a tighter baseline: nothing within its sd at a quarter of its bytes, nothing 2 sd below it
    g = bench.goals(models, {**BEST, "test": 0.1580, "sd": 0.0005})
    assert g["small"] is None and g["better"] is None
    d = bench.dropped_vs_noise(models, ["N1", "N2", "N3"])
    assert d["always"] == ["N1"] and d["any"] == ["AdID", "N1", "N2"]
    assert (d["always_noise"], d["any_noise"], d["noise"]) == (1, 2, 3) and d["signal_dropped"] == ["AdID"]
    path.write_text(json.dumps({"models": [{"label": "x"}]}))
    with pytest.raises(SystemExit, match="models\\[0\\] has no kind"):
        bench.read_front(path)


def test_same_bytes_widths_match_the_uniform_bytes():
    bench = _bench()
    rows = [100, 10, 10, 5, 5]
    widths = bench.same_bytes_widths(rows, 16)
    assert widths == [16, 32, 8, 8, 8]  # by hand: 100 -> 16 (32 would overshoot), 10 -> 32, the rest 8
    assert sum(r * w for r, w in zip(rows, widths)) == 16 * sum(rows)
    assert bench.rss_widths(["a", "b", "c"], [100_000, 10_000, 9_999]) == {"a": 4, "b": 8, "c": 16}


def test_embedding_smoke_trains_caches_resumes_and_reports(tmp_path, monkeypatch):
    bench = _bench()
    out, section = tmp_path / "out", tmp_path / "s.md"
    argv = ["--rows", "20000", "--profiles", "kdd2012-sparse-noise", "--baselines", "dlrm", "--widths", "8,16",
            "--seeds", "1", "--out", str(out), "--suite-out", str(tmp_path / "no-suite"), "--section", str(section),
            "--recipe", "recipes/synthetic.yaml", "--set", SETTINGS]
    assert bench.main([*argv, "--parts", "baselines"]) == 0
    cache = json.loads((out / "kdd2012-sparse-noise-baselines.json").read_text())
    assert sorted((r["model"], r["width"]) for r in cache.values()) == [("dlrm", 8), ("dlrm", 16)]
    by_width = {r["width"]: r for r in cache.values()}
    # the tables' bytes: 4 bytes x width x the rows of every table (DLRM has one table per field)
    meta = json.loads((out / "data" / "kdd2012-sparse-noise" / "meta.json").read_text())
    rows = sum(f["cardinality"] for f in meta["schema"]["sparse"])
    assert by_width[8]["embedding_bytes"] == 4 * 8 * rows and by_width[16]["embedding_bytes"] == 4 * 16 * rows
    text = section.read_text()
    assert "| **dlrm** |" in text or "| dlrm |" in text
    assert "N20" in text  # the profile's noise fields are named
    assert "Search: not run" in text

    # the search part on a stubbed run that leaves a hand-made front.json where the recipe's run folder is
    from ctrnas import api

    seen = []

    def fake_run(recipe, **kw):
        seen.append(recipe)
        folder = recipe.output_dir
        folder.mkdir(parents=True, exist_ok=True)
        b = min(cache.values(), key=lambda r: r["test"])  # the best baseline (one seed: sd 0)
        front = {"models": [_model("rank 0", b["test"], b["embedding_bytes"] // 8, dropped=["N1", "N2"]),
                            _model("rank 1", b["test"] - 0.05, b["embedding_bytes"] // 2, dropped=["N1"])]}
        (folder / "front.json").write_text(json.dumps(front))

    monkeypatch.setattr(api, "run", fake_run)
    assert bench.main([*argv, "--parts", "search", "--search-set", "search.top_k=2"]) == 0
    assert [r.seed for r in seen] == [0] and seen[0].final.baselines == () and seen[0].search.top_k == 2
    assert seen[0].data_dir == out / "data" / "kdd2012-sparse-noise"
    # a search other than the default recipe's writes a run folder of its own (named by its settings)
    assert seen[0].output_dir.parent == out / "kdd2012-sparse-noise"
    assert seen[0].output_dir.name.startswith("kdd2012-sparse-noise-s0-") and len(seen[0].output_dir.name) == 30
    text = section.read_text()
    assert "goal 1" in text and "**met** by rank 0" in text and "**met** by rank 1" in text
    noise = meta["click_model"]["noise_fields"]
    assert "N1" in noise and "N2" in noise and f"2 of the {len(noise)} noise fields" in text
    assert (out / "front.png").stat().st_size > 1000

    import ctrnas.train.run

    def no_training(*a, **k):
        raise AssertionError("a cached training ran again")

    monkeypatch.setattr(ctrnas.train.run, "train_and_test", no_training)
    monkeypatch.setattr(api, "run", no_training)
    # resumed: everything from the cache
    assert bench.main([*argv, "--parts", "baselines,search", "--search-set", "search.top_k=2"]) == 0
    assert section.read_text() == text


def test_embedding_rejects_unknown_parts_and_profiles(tmp_path, capsys):
    bench = _bench()
    for flag, value in (("--parts", "speed"), ("--profiles", "criteo,cubic"), ("--baselines", "xgboost")):
        with pytest.raises(SystemExit):
            bench.main([flag, value, "--out", str(tmp_path), "--report-only"])
        err = capsys.readouterr().err
        assert "unknown" in err and value.split(",")[-1] in err


def test_throughput_variants_have_the_bytes_they_claim(tmp_path, monkeypatch):
    import ctrnas.supernet.io

    bench = _bench()
    # the variants export from supernets of two shapes (common width 16 or 32, seed 0), and the export
    # re-draws every weight (init "fresh") from a copy of the stem: each shape is built once here, not once
    # per variant (a ctrnas-small supernet takes seconds to build); every variant still gets its own model
    built, build = {}, ctrnas.supernet.io.build_supernet

    def build_once(*args, **kw):
        key = repr((args, sorted(kw.items())))
        if key not in built:
            built[key] = build(*args, **kw)
        return built[key]

    monkeypatch.setattr(ctrnas.supernet.io, "build_supernet", build_once)
    section = tmp_path / "s.md"
    assert bench.main(["--parts", "throughput", "--tp-rows", "3000", "--steps", "2", "--reps", "2",
                       "--out", str(tmp_path), "--section", str(section)]) == 0
    r = json.loads((tmp_path / "throughput.json").read_text())
    v = r["variants"]
    uniform = v["uniform 16"]["embedding_bytes"]
    meta = json.loads((tmp_path / "data" / "criteo-3000" / "meta.json").read_text())
    assert uniform == 4 * 16 * sum(f["cardinality"] for f in meta["schema"]["sparse"])
    same = next(x for k, x in v.items() if "same bytes" in k)
    assert 0.95 * uniform <= same["embedding_bytes"] <= uniform and {8, 32} <= set(same["widths"].values())
    assert v["tables of 16 padded to 32 (common 32)"]["embedding_bytes"] == uniform
    assert v["uniform 32"]["embedding_bytes"] == 2 * uniform
    assert all(len(x["seconds"]) == 2 and len(x["stem_seconds"]) == 2 for x in v.values())
    assert "mixed/uniform examples/s" in section.read_text() and r["arch"] == "dlrm-like"
    # a second arch's timings (here a copy) get their own table after the first
    (tmp_path / "throughput-dcnv2-like.json").write_text(json.dumps({**r, "arch": "dcnv2-like"}))
    assert bench.main(["--report-only", "--out", str(tmp_path), "--section", str(section)]) == 0
    text = section.read_text()
    assert text.index("**Throughput.** The dlrm-like arch") < text.index("**The same with the dcnv2-like arch**")
    assert text.count("| mixed 4/8/16 (common 16) |") == 2 and "--tp-arch dcnv2-like" in text


def test_report_from_hand_made_caches_names_the_best_and_the_cheapest_equal_baseline(tmp_path):
    bench = _bench()
    out = tmp_path / "out"
    runs = {}  # dcnv2 at 16 is best by 0.00005, dcnv2 at 8 is within its sd at half the bytes

    def put(model, width, tests, nbytes):
        for seed, t in enumerate(tests):
            runs[f"baseline:{model}@{seed}:w{width}"] = {"model": model, "seed": seed, "width": width, "test": t,
                                                        "val": t - 0.01, "embedding_bytes": nbytes}

    put("dcnv2", 8, [0.1590, 0.1597], 8_000_000)
    put("dcnv2", 16, [0.1590, 0.1596], 16_000_000)
    put("dlrm", 16, [0.1600, 0.1610], 16_000_000)
    bench._results.save(out, "kdd2012-sparse-noise-baselines", runs)
    key = f"search@0:{bench.suite._key([100000, [], [], bench.RECIPE, 'kdd2012-sparse-noise'])}"
    models = [_model("rank 0", 0.1596, 3_000_000), _model("rank 1", 0.1597, 1_900_000)]
    bench._results.save(out, "kdd2012-sparse-noise-search", {key: {"seed": 0, "models": models}})
    section = tmp_path / "s.md"
    assert bench.main(["--rows", "100000", "--profiles", "kdd2012-sparse-noise", "--baselines", "dcnv2,dlrm",
                       "--out", str(out), "--section", str(section), "--report-only"]) == 0
    text = section.read_text()
    assert "| **dcnv2** | 16 | 0.15900 / 0.15960 | **0.15930** | 0.00042 |" in text
    assert "Stricter byte reference: dcnv2 at width 8" in text
    # goal 1 against 16 MB: rank 0 (0.19x, 0.1596 <= 0.1593 + 0.00042); against 8 MB only rank 1 (0.24x) fits
    assert "goal 1 (within one sd, 0.15972, at <= 0.25x bytes): **met** by rank 0 (0.15960, 0.19x)" in text
    assert "goal 1, cheapest: **met** by rank 1 (0.24x)" in text
    assert "goal 2 (below 0.15845 at <= 1x bytes): not met" in text
    # hand-written notes after the marker survive a rewrite; the generated part is rebuilt
    section.write_text(text.replace("Stricter", "STALE") + "\n" + bench.NOTES + "\nWhy: the common width.\n")
    assert bench.main(["--rows", "100000", "--profiles", "kdd2012-sparse-noise", "--baselines", "dcnv2,dlrm",
                       "--out", str(out), "--section", str(section), "--report-only"]) == 0
    assert section.read_text() == text.rstrip("\n") + "\n\n" + bench.NOTES + "\nWhy: the common width.\n"


def test_throughput_verdict_pairs_the_repetitions():
    bench = _bench()
    control = [1.00, 1.02, 0.98, 1.01]
    # d = -0.01, -0.03, +0.01, -0.02: median -0.015, absolute deviations 0.005 0.015 0.025 0.005: MAD 0.01
    se = 1.2533 * 1.4826 * 0.01 / 2
    met, mid, got = bench.throughput_verdict([0.99, 0.99, 0.99, 0.99], control)
    assert (met, mid, got) == (True, pytest.approx(-0.015), pytest.approx(se))  # -0.015 >= -2 x 0.00929
    # a steady 5% slowdown fails however noisy the copy is
    noisy = [0.8, 1.2, 0.9, 1.1, 1.0]
    met, mid, _ = bench.throughput_verdict([c - 0.05 for c in noisy], noisy)
    assert not met and mid == pytest.approx(-0.05)
    assert bench.ratios([2.0, 1.0], [4.0, 1.0]) == [0.5, 1.0]
