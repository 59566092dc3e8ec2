"""The experiment's measure: a bounded AFS never holds GPUs above a job's request, and the
command refuses what it cannot run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import afs_cost  # noqa: E402


def test_bounded_afs_has_nothing_above_the_request_and_classes_add_up() -> None:
    bounded = afs_cost.play("tiny", 1.0, 0, "afs-bounded")
    assert bounded["above_w_max_gpu_h"] == 0.0
    unbounded = afs_cost.play("tiny", 1.0, 0, "afs")
    assert unbounded["above_w_max_gpu_h"] >= 0.0
    for r in (bounded, unbounded):
        n_el, n = r["elastic_jobs"], r["jobs"]
        assert 0 < n_el < n
        mean = (n_el * r["jct_el"] + (n - n_el) * r["jct_inel"]) / n
        assert mean == pytest.approx(r["avg_jct"], rel=1e-9)


@pytest.mark.parametrize("argv", [["--loads", "0"], ["--loads", "x"], ["--seeds", "0"]])
def test_bad_arguments_are_refused(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        afs_cost.main([*argv, "--out", str(tmp_path / "r.jsonl")])
