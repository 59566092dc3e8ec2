"""Scenario loading (strict), the utilization generator and the loan controller."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from aryl_gym.config import ConfigError, InferenceConfig, list_scenarios, load_scenario
from aryl_gym.sim.loaning import LoanController, diurnal_utilization, load_utilization_csv


@pytest.mark.parametrize("name", ["tiny", "testbed", "basic", "ideal", "production"])
def test_shipped_scenarios_load(name):
    cfg = load_scenario(name)
    assert cfg.name == name
    assert name in list_scenarios()


def test_unknown_key_names_key_and_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nsim:\n  intervl: 30\n")
    with pytest.raises(ConfigError) as e:
        load_scenario(str(p))
    msg = str(e.value)
    assert "intervl" in msg and str(p) in msg and "interval" in msg


def test_wrong_type_and_range_errors(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nsim:\n  interval: fast\n")
    with pytest.raises(ConfigError, match="sim.interval must be a number"):
        load_scenario(str(p))
    p.write_text("name: bad\ninference:\n  mean: 1.5\n")
    with pytest.raises(ConfigError, match="inference.mean"):
        load_scenario(str(p))
    p.write_text("name: bad\ncluster:\n  train_gpu: B200\n")
    with pytest.raises(ConfigError, match="B200"):
        load_scenario(str(p))


def test_unknown_scenario_lists_known():
    with pytest.raises(ConfigError, match="testbed"):
        load_scenario("no-such-scenario")


def test_frozen_and_replace():
    cfg = load_scenario("tiny")
    with pytest.raises(AttributeError):
        cfg.sim.interval = 5  # type: ignore[misc]
    cfg2 = cfg.replace(sim={"interval": 30.0})
    assert cfg2.sim.interval == 30.0 and cfg.sim.interval == 60.0
    with pytest.raises(ConfigError, match="unknown key"):
        cfg.replace(sim={"nope": 1})


def test_diurnal_shape_matches_paper_facts():
    cfg = InferenceConfig(day_noise=0.0, sample_noise=0.0)
    u = diurnal_utilization(cfg, 7 * 86400.0, np.random.default_rng(0))
    day = u[: 288]
    assert day.mean() == pytest.approx(0.65, abs=0.01)  # paper: average ~65%
    assert day.max() / day.min() == pytest.approx(2.2, rel=0.02)  # paper: peak-to-trough ~2.2
    hours = np.arange(288) * 300 / 3600.0
    assert 3.0 <= hours[np.argmin(day)] <= 7.0  # trough before dawn
    peak_hours = hours[day >= 0.9 * day.max()]
    assert peak_hours.min() >= 18.0  # the peak is at night
    assert 3.0 <= (len(peak_hours) * 5 / 60.0) <= 5.0  # lasting about four hours


def test_loan_controller_formula():
    util = np.array([0.0, 0.3, 0.65, 0.95, 1.0])
    lc = LoanController(util, n_inf=10, headroom=0.1, sample_seconds=300.0)
    # needed = ceil(10 * min(1, u + 0.1)): 1, 4, 8 (7.5 -> 8), 10, 10
    assert list(lc.loanable_series) == [9, 6, 2, 0, 0]
    assert lc.loanable(0) == 9 and lc.loanable(299) == 9 and lc.loanable(300) == 6


def test_utilization_csv(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("time,utilization\n0,0.5\n600,0.8\n")
    u = load_utilization_csv(p, 300.0)
    assert list(u) == [0.5, 0.5, 0.8]
    # a byte-order mark (spreadsheet exports) is read as the traces' readers read it
    p.write_bytes(b"\xef\xbb\xbftime,utilization\n0,0.5\n600,0.8\n")
    assert list(load_utilization_csv(p, 300.0)) == [0.5, 0.5, 0.8]
    p.write_text("time,utilization\n0,50\n")
    with pytest.raises(ConfigError, match=r"u.csv:2: column 'utilization'.*percentage"):
        load_utilization_csv(p)
    p.write_text("time,util\n0,0.5\n")
    with pytest.raises(ConfigError, match="missing column 'utilization'"):
        load_utilization_csv(p)


def test_cli_simulate_json_is_one_object():
    out = subprocess.run(
        [sys.executable, "-m", "aryl_gym.cli", "simulate", "--scenario", "tiny", "--policy",
         "fifo", "--seed", "1", "--json"],
        capture_output=True, text=True, check=True,
    )
    import json

    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    d = json.loads(lines[0])
    assert d["jobs_completed"] == d["jobs_total"] > 0 and math.isfinite(d["avg_jct"])


def test_cli_bad_policy_is_a_clear_error():
    out = subprocess.run(
        [sys.executable, "-m", "aryl_gym.cli", "simulate", "--scenario", "tiny", "--policy", "nope"],
        capture_output=True, text=True,
    )
    assert out.returncode == 2 and "unknown policy 'nope'" in out.stderr and "fifo" in out.stderr


@pytest.mark.parametrize(
    "text, match",
    [
        ("name: bad\nsim:\n  interval: .nan\n", "finite"),
        ("name: bad\nworkload:\n  load: -1\n", "workload.load must be > 0, got -1"),
        ("name: bad\ncluster:\n  train_servers: -2\n", "cluster.train_servers must be >= 1, got -2"),
        ("name: bad\nworkload:\n  num_jobs: -5\n", "workload.num_jobs must be >= 1, got -5"),
        ("name: bad\nsim:\n  interval: 0\n", "interval must be > 0"),
        ("[1, 2]\n", "mapping"),
        ("name: bad\nsim: [1]\n", "must be a mapping"),
        ("name: bad\nbogus: 1\n", "unknown key 'bogus' at the top level"),
    ],
)
def test_bad_numbers_and_shapes(tmp_path, text, match):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_scenario(str(p))


def test_empty_trace_and_oversized_job_are_clear_errors():
    from aryl_gym.sim.engine import Simulator
    from tests.helpers import job, small_config

    cfg = small_config()
    with pytest.raises(ConfigError, match="empty"):
        Simulator(cfg, [], np.zeros(10))
    with pytest.raises(ConfigError, match="training pool has 8"):
        Simulator(cfg, [job(0, g=4, w=4)], np.zeros(10))


def test_cli_bad_config_exit_2_no_traceback(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: bad\nsim:\n  intervl: 3\n")
    out = subprocess.run(
        [sys.executable, "-m", "aryl_gym.cli", "simulate", "--scenario", str(p)],
        capture_output=True, text=True,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr and "intervl" in out.stderr


def test_calibrate_json_rows():
    out = subprocess.run(
        [sys.executable, "-m", "aryl_gym.cli", "calibrate", "--scenario", "tiny", "--json"],
        capture_output=True, text=True, check=True,
    )
    import json

    d = json.loads(out.stdout)
    names = {r["key"] for r in d["rows"]}
    assert {"train_util", "avg_queue_time", "inference_mean", "elastic_gpu_time_share"} <= names
    assert all(("paper" in r or "trace" in r) and "measured" in r for r in d["rows"])


def _steady_rounds_loop(loan: LoanController, t0: float, dt: float, k_max: int, cur: int) -> int:
    k = 0
    while k < k_max and loan.loanable(t0 + k * dt) == cur:
        k += 1
    return k


def test_steady_rounds_equals_the_round_by_round_loop():
    """The jump over runs of equal loanable counts gives exactly the loop's answer: series with
    long runs, alternating values (a run of one sample), round lengths below, at and above the
    sample length (rounds that skip a sample), start times inside and past the series' end."""
    rng = np.random.default_rng(7)
    checked = 0
    for trial in range(400):
        n = int(rng.integers(1, 60))
        # few distinct levels so that runs form, some of length one
        util = rng.choice([0.1, 0.4, 0.7, 0.95], size=n, p=[0.5, 0.3, 0.1, 0.1])
        if trial % 5 == 0:
            util = np.where(np.arange(n) % 2 == 0, 0.1, 0.9)  # alternating: a run per sample
        ss = float(rng.choice([60.0, 300.0, 7.5]))
        loan = LoanController(util, n_inf=8, headroom=0.05, sample_seconds=ss)
        for _ in range(10):
            dt = ss * float(rng.choice([0.2, 0.5, 1.0, 1.0 / 3.0, 2.0, 2.5, 0.999, 1.001]))
            t0 = float(rng.uniform(0.0, ss * n * 1.3))
            if rng.random() < 0.3:
                t0 = math.floor(t0 / ss) * ss  # on a sample boundary
            k_max = int(rng.integers(0, 3 * n + 5))
            cur = loan.loanable(t0) if rng.random() < 0.8 else int(rng.integers(0, 9))
            assert loan.steady_rounds(t0, dt, k_max, cur) == _steady_rounds_loop(loan, t0, dt, k_max, cur), (
                n, ss, dt, t0, k_max, cur)
            checked += 1
    assert checked == 4000


def test_steady_rounds_hand_computed():
    # samples of 100 s: loanable 8 - ceil(8 * (u + 0)) -> [4, 4, 4, 0, 4]
    loan = LoanController(np.array([0.5, 0.5, 0.5, 1.0, 0.5]), n_inf=8, headroom=0.0, sample_seconds=100.0)
    assert loan.loanable_series.tolist() == [4, 4, 4, 0, 4]
    assert loan.steady_rounds(0.0, 60.0, 100, 4) == 5  # 300 s is the first round at index 3
    assert loan.steady_rounds(0.0, 60.0, 3, 4) == 3  # the limit comes first
    assert loan.steady_rounds(250.0, 60.0, 100, 4) == 1  # 310 s
    assert loan.steady_rounds(0.0, 150.0, 100, 4) == 2  # 0, 150, 300 (index 3)
    # rounds of 250 s never land on index 3 (0, 250, 500, ...), and past the end the series
    # repeats its last "day" (here all 5 samples): 4 at every round
    assert loan.steady_rounds(0.0, 250.0, 100, 4) == 100
    assert loan.steady_rounds(0.0, 60.0, 100, 0) == 0  # the count already differs
    assert loan.steady_rounds(0.0, 60.0, 0, 4) == 0
