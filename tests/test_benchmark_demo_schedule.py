"""benchmarks/demo_schedule.py: wall seconds of a run's trainings on N workers, by hand on small cases."""

from __future__ import annotations

import json

from tests.helpers.bench_scripts import load_script

sched = load_script("demo_schedule")


def test_a_long_job_last_runs_alone_costliest_first_it_runs_beside_the_others():
    times = [1.0, 1.0, 4.0]
    assert sched.makespan(times, range(3), 2) == 5.0  # 1 | 1, then 4 on the first free worker
    assert sched.costliest_first([1.0, 1.0, 4.0]) == [2, 0, 1]
    assert sched.makespan(times, [2, 0, 1], 2) == 4.0  # 4 | 1 + 1
    s = sched.stage([(times, times), ([2.0, 2.0], [0.0, 0.0])], 2)
    assert s == {"job order": 5.0 + 2.0, "costliest first": 4.0 + 2.0, "bound": 4.0 + 2.0}


def test_a_run_folder_gives_its_search_batches_and_final_stage(tmp_path, capsys):
    (tmp_path / "search").mkdir()
    rec = [{"generation": 0, "rung": 0, "time_s": 3.0, "flops": 10, "budget": 2, "cached": False},
           {"generation": 0, "rung": 0, "time_s": 9.0, "flops": 5, "budget": 2, "cached": True},
           {"generation": 0, "rung": 1, "time_s": 4.0, "flops": 10, "budget": 6, "cached": False}]
    (tmp_path / "search" / "history.json").write_text(json.dumps(rec))
    models = {"candidates": [{"train_seconds": 10.0, "params": 900.0}],
              "baselines": [{"train_seconds": 2.0, "params": 15.0}, {"train_seconds": 12.0, "params": 800.0}]}
    (tmp_path / "metrics.json").write_text(json.dumps(models))
    batches = sched.run_batches(tmp_path)
    assert batches["search"] == [([3.0, 0.0], [20.0, 10.0]), ([4.0], [60.0])]  # a cached score took no time
    assert batches["final stage"] == [([10.0, 2.0, 12.0], [900.0, 15.0, 800.0])]
    sched.main([str(tmp_path)])
    out = capsys.readouterr().out
    # final: job order 10 | 2 + 12 = 14; costliest first 10 | 12, then 2 -> 12
    assert "| final stage | 14.0 | 12.0 | 12.0 |" in out
