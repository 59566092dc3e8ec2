"""The scale benchmark's vector rows (issue 37): the figures are printed, not asserted, but
the rows must be complete and the ceiling row must measure the envs' own work."""

from __future__ import annotations

import math

from aryl_gym.benchmarks.scale import bench_vector


def test_vector_rows_compare_sync_batched_and_the_envs_own_work():
    rows = bench_vector(num_envs=2, scenario="tiny", steps=40)
    assert [r["vector env"] for r in rows] == [
        "SyncVectorEnv of gym.make", "gym.make_vec (batched)", "envs' own work (ceiling)"]
    for r in rows:
        assert r["env steps"] == 40 and r["num_envs"] == 2
        assert math.isfinite(r["steps/cpu-s"]) and r["steps/cpu-s"] > 0
        # each figure is the mean of its two runs (order A B C C B A)
        runs = [float(x.replace(",", "")) for x in r["runs"].split(", ")]
        assert len(runs) == 2 and math.isclose(r["steps/cpu-s"], sum(runs) / 2, rel_tol=1e-3)
    assert rows[1]["target"] == 1.5 and rows[1]["met"] == (rows[1]["x SyncVectorEnv"] >= 1.5)
    for r in rows[1:]:
        assert math.isclose(r["x SyncVectorEnv"], r["steps/cpu-s"] / rows[0]["steps/cpu-s"])
