"""experiments/23's runner: each workload is the pollux-w6 cluster with only the trace swapped,
and its figures are the episodes eval_v1 plays on that scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "pollux-philly" / "workloads" / "workload-2.csv"

pytestmark = pytest.mark.skipif(not TRACE.exists(), reason=f"needs the public traces ({TRACE} is absent)")


def test_one_workload_matches_the_native_episode_and_a_bad_label_is_refused(tmp_path: Path) -> None:
    from aryl_gym.config import load_scenario
    from aryl_gym.train.evaluation import run_reference

    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(HERE / "run.py"), "--agent", "ppo-v1", "--against", "aryl,sjf",
                        "--folders", "workloads", "--workloads", "2", "--json", str(out)],
                       capture_output=True, text=True, cwd=ROOT, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(out.read_text())["folders"]["workloads"]
    assert got["workloads"] == [2] and got["failed"] == {}
    cfg = load_scenario("pollux-w6").replace(workload={"trace": "traces/pollux-philly/workloads/workload-2.csv"})
    assert got["avg_jct"]["sjf"] == [run_reference("sjf", cfg, 0).avg_jct]
    # the trace is really swapped: workload 6 (the scenario's own) gives another episode
    assert got["avg_jct"]["sjf"] != [run_reference("sjf", load_scenario("pollux-w6"), 0).avg_jct]
    assert got["ratios"]["ppo-v1/aryl"]["ratio_of_means"] == pytest.approx(
        got["avg_jct"]["ppo-v1"][0] / got["avg_jct"]["aryl"][0])

    bad = subprocess.run([sys.executable, str(HERE / "run.py"), "--agent", "ppo-v1", "--env-kwargs", "nope={}"],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert bad.returncode == 2 and "names no --agent entry" in bad.stderr
