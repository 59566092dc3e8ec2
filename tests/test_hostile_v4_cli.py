"""What a fourth hostile-user pass over the command line found (each case says what happened
before): seed advice from the normal quantile where the intervals are Student t, an identical
pair or an all-zero metric steering that advice, exit 0 when every episode failed, a negative
--time-window start, --first-seed running seeds past 2**63 - 1, fit-world errors naming no
file or line, a time ratio of 0.30 printed as "0x" and policy descriptions cut mid-sentence."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from aryl_gym.config import ConfigError, configs_dir
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _scenario(tmp_path: Path, name: str, sim: dict | None = None, workload: dict | None = None) -> Path:
    """tiny.yaml with ``sim`` / ``workload`` keys set (None: the key removed)."""
    data = yaml.safe_load((configs_dir() / "scenarios" / "tiny.yaml").read_text())
    data["name"] = name
    for section, over in (("sim", sim or {}), ("workload", workload or {})):
        for k, v in over.items():
            if v is None:
                data[section].pop(k, None)
            else:
                data[section][k] = v
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture()
def philly_csv(tmp_path: Path) -> Path:
    """Six one-GPU jobs of ten minutes, one an hour."""
    p = tmp_path / "philly.csv"
    p.write_text(PHILLY + "".join(f"2017-10-01 0{i}:00:00,600.0,1,600.0,vc1\n" for i in range(6)))
    return p


# -- 1. seed-study: Student-t advice, identical pairs, all-zero metrics -----------------------------
@pytest.mark.parametrize("sd", [0.01, 0.05, 0.0904, 0.17, 0.6])
def test_seeds_needed_is_the_smallest_n_whose_t_interval_fits(sd: float) -> None:
    from scipy.stats import t

    from aryl_gym import stats as st

    target = math.log(1.03)
    n = st.seeds_needed(sd)
    # was: (1.96 sd / log 1.03)^2, e.g. 11 seeds for sd 0.05 where the t interval needs 14
    assert t.ppf(0.975, n - 1) * sd / math.sqrt(n) <= target
    assert n == 2 or t.ppf(0.975, n - 2) * sd / math.sqrt(n - 1) > target
    assert n >= math.ceil((1.96 * sd / target) ** 2)
    p = st.seeds_needed(sd, power=0.8)
    assert (t.ppf(0.975, p - 1) + t.ppf(0.8, p - 1)) * sd / math.sqrt(p) <= target
    assert p == 2 or (t.ppf(0.975, p - 2) + t.ppf(0.8, p - 2)) * sd / math.sqrt(p - 1) > target
    # the advice keeps its promise: per-seed log ratios with exactly this sd give a 95% interval
    # (the suites' paired_ratio_ci) within +-3% at n seeds, and wider at n - 1
    for k, fits in ((n, True), (n - 1, False)):
        if k < 2:
            continue
        z = np.linspace(-1.0, 1.0, k)
        logs = sd * (z - z.mean()) / z.std(ddof=1)
        r = st.paired_ratio_ci(np.exp(logs))
        assert (r.hi / r.mean <= 1.03 + 1e-9) == fits, (k, r)


def test_seeds_needed_at_few_seeds_is_well_above_the_normal_rule() -> None:
    from aryl_gym import stats as st

    assert st.seeds_needed(0.05) == 14  # was 11 (normal rule): its t interval is +-3.1%
    assert st.seeds_needed(0.6616) == 1927  # many seeds: the two rules nearly agree (was 1925)
    with pytest.raises(ValueError, match="power must be a probability"):
        st.seeds_needed(0.05, power=1.5)


def _rows(per_policy: dict[str, list[float]], metric: str = "avg_jct") -> list[dict]:
    return [{"scenario": "t", "policy": p, "seed": s, metric: v}
            for p, vals in per_policy.items() for s, v in enumerate(vals)]


def test_identical_pair_does_not_drive_the_advice() -> None:
    from aryl_gym.leaderboard import seed_study as ss

    base = [5000.0, 6000.0, 5500.0, 7000.0, 6500.0]
    rows = _rows({"a": base, "a2": list(base),  # the same policy under two names
                  "b": [v * f for v, f in zip(base, (1.02, 0.97, 1.05, 0.99, 1.01))]})
    spreads = ss.study(rows, "t", ["a", "a2", "b"])
    same = next(p for p in spreads if (p.a, p.b) == ("a", "a2"))
    assert same.identical and same.sd_log == 0.0
    rec = ss.recommendation(spreads)
    # was: the identical pair was a close pair with sd 0: median sd 0.0, and with it alone 2 seeds
    assert rec["identical"] == ["a / a2"] and rec["pairs"] == 2 and rec["median_sd_log"] > 0
    assert rec["n_ci"] == max(p.n_ci for p in spreads if not p.identical) > 2
    text = ss.render(spreads, rec, 0.03, "avg_jct")
    assert "Left out of the advice: 1 pair(s) with identical results on every seed" in text
    assert "a / a2" in text.split("Left out")[1]
    # the formula printed is the t rule, not the normal one
    assert "t(0.975, n-1) * sd / sqrt(n) <= log(1 + 0.03)" in text and "1.96" not in text
    only = ss.recommendation([same])
    assert only["pairs"] == 0 and "Seeds to separate" not in ss.render([same], only, 0.03, "avg_jct")


def test_zero_metric_says_why_there_is_no_ratio() -> None:
    from aryl_gym.leaderboard import seed_study as ss

    rows = _rows({"a": [0.0, 0.0, 0.0], "b": [0, 0, 0]}, "preemptions")
    assert ss.study(rows, "t", ["a", "b"], "preemptions") == []
    why = ss.metric_problem(rows, "t", ["a", "b"], "preemptions")
    assert why is not None and "--metric preemptions is 0 in every one of the 6 episodes" in why
    assert ss.metric_problem(_rows({"a": [1.0, 0.0]}, "preemptions"), "t", ["a"], "preemptions") is None


def test_seed_study_cli_identical_pair_and_all_zero_metrics(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "ss")
    base = ["seed-study", "--scenario", "tiny", "--seeds", "0-1", "--workers", "1", "--out", out]
    # baseline and fifo-backfill are one rule under two names: identical on every seed
    rc, stdout, err = _run([*base, "--policies", "baseline,fifo-backfill,sjf"], capsys)
    assert rc == 0, err[-400:]
    assert "identical" in stdout and "Left out of the advice: 1 pair(s)" in stdout
    assert "Seeds to separate a 3% difference: 2 " not in stdout  # was: 2 seeds, from the sd 0 pair
    assert "t(0.975, n-1)" in stdout and "z = 1.96" not in stdout
    rc, stdout, err = _run([*base, "--policies", "baseline,fifo-backfill,sjf", "--json"], capsys)
    rec = json.loads(stdout)["recommendation"]
    assert rc == 0 and rec["identical"] == ["baseline / fifo-backfill"] and rec["n_ci"] > 2
    # the rows are saved: these runs only read them
    for metric in ("preemptions", "failed"):
        rc, stdout, err = _run([*base, "--policies", "baseline,fifo-backfill,sjf", "--metric", metric], capsys)
        # was: "no pair of entrants has preemptions on two common seeds (failed or unfinished episodes?)"
        assert rc == 1 and f"--metric {metric} is 0 in every one of the 6 episodes" in err, err[-400:]
        assert "failed or unfinished" not in err and "Traceback" not in err
    rc, stdout, err = _run([*base, "--policies", "baseline,fifo-backfill"], capsys)
    assert rc == 1 and "every pair of entrants gave identical avg_jct on every seed" in err


def test_seed_study_docs_state_the_t_rule() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "leaderboard.md").read_text()
    section = doc.split("### How many seeds separate a 3% difference")[1].split("\n## ")[0]
    assert "t(0.975, n-1) * sd / sqrt(n) <= log(1.03)" in section
    assert "z = 1.96" not in section  # was: n = (z * sd / log(1.03))^2, z = 1.96


# -- 2. simulate and compare: every episode failed --------------------------------------------------
def test_simulate_exits_1_when_its_episode_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = _scenario(tmp_path, "cut", sim={"max_rounds": 2})
    rc, out, err = _run(["simulate", "--scenario", str(cut), "--no-progress"], capsys)
    # was: exit 0 with 30 of 30 jobs unfinished
    assert rc == 1 and "jobs_completed             0" in out  # the summary is still printed
    lines = [ln for ln in err.splitlines() if "error" in ln]
    assert len(lines) == 1 and "the episode failed: 30 of 30 jobs unfinished" in lines[0]
    assert "sim.max_rounds" in lines[0]
    rc, out, err = _run(["simulate", "--scenario", str(cut), "--no-progress", "--json"], capsys)
    assert rc == 1 and json.loads(out)["failed"] == 1 and "the episode failed" in err
    rc, _, err = _run(["simulate", "--scenario", "tiny", "--no-progress"], capsys)
    assert rc == 0 and "failed" not in err


def test_compare_exits_1_when_every_episode_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = _scenario(tmp_path, "cut", sim={"max_rounds": 2})
    rc, out, err = _run(["compare", "--scenario", str(cut), "--seeds", "0-1", "--policies", "fifo,aryl"], capsys)
    assert rc == 1, err[-400:]  # was: 0
    assert "ratio to fifo" in out  # what was computed is still printed
    assert "2/2" in out  # the failed-episodes column counts them (was: a mean, 1)
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == 1 and "every episode failed (4 of 4" in errors[0]
    assert "FAILED: 30 of 30 jobs unfinished" in err  # each progress line says so
    rc, out, err = _run(["compare", "--scenario", str(cut), "--seeds", "0", "--quiet", "--json"], capsys)
    assert rc == 1 and json.loads(out)["failed_episodes"] == 2


def test_compare_partial_failure_is_reported_and_exits_0(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # at 500 rounds seed 0 (547 and 571 rounds) is cut, seed 1 (421 and 391) finishes
    cut = _scenario(tmp_path, "cut500", sim={"max_rounds": 500})
    rc, out, err = _run(["compare", "--scenario", str(cut), "--seeds", "0-1", "--policies", "fifo,aryl",
                         "--quiet"], capsys)
    assert rc == 0, err[-400:]
    assert "warning: 2 of 4 episodes failed" in err and "fifo seed 0" in err and "seed 1" not in err
    assert "1/2" in out


# -- 3. --time-window: a negative start --------------------------------------------------------------
@pytest.mark.parametrize(
    "window, match",
    [
        # was: accepted, the episode started 5 h before the first job (makespan 18,600 s, not 600)
        ("-5h,1h", "--time-window '-5h,1h': the start offset '-5h' is negative"),
        (",-1h", "--time-window ',-1h': the end offset '-1h' is negative"),
        ("2h,1h", "--time-window '2h,1h': the end '1h' is not after the start '2h'"),
        ("1h,60min", "--time-window '1h,60min': the end '60min' is not after the start '1h'"),
    ],
)
def test_time_window_offsets_must_select_jobs(window: str, match: str, philly_csv: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["simulate", "--scenario", "tiny", "--trace", str(philly_csv), "--trace-format", "philly",
                       f"--time-window={window}", "--no-progress"], capsys)
    assert rc == 2 and match in err and "Traceback" not in err, err[-400:]
    assert "give" in err  # how to fix it


def test_time_window_negative_start_through_trace_options(philly_csv: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.workload.traces import load_trace

    with pytest.raises(ConfigError, match="time_window '-5h,1h': the start offset '-5h' is negative"):
        load_trace(philly_csv, "philly", time_window="-5h,1h")
    with pytest.raises(ConfigError, match="start offset '-3600' is negative"):
        load_trace(philly_csv, "philly", time_window=[-3600, 3600])  # a YAML list
    rc, _, err = _run(["simulate", "--scenario", "tiny", "--trace", str(philly_csv), "--trace-format", "philly",
                       "--trace-option", "time_window=-5h,1h", "--no-progress"], capsys)
    assert rc == 2 and "--trace-option time_window '-5h,1h': the start offset" in err, err[-400:]
    scen = _scenario(tmp_path, "tw", workload={"num_jobs": None, "trace": str(philly_csv), "trace_format": "philly",
                                               "trace_options": {"time_window": "-5h,1h"}})
    rc, _, err = _run(["simulate", "--scenario", str(scen), "--no-progress"], capsys)
    assert rc == 2 and "workload.trace_options: time_window '-5h,1h': the start offset '-5h' is negative" in err
    # a window from the first job still works, and so does one given through --trace-option
    # (was: its comma split it into two options)
    for opt in (["--time-window=0h,2h"], ["--trace-option", "time_window=0h,2h"]):
        rc, out, err = _run(["simulate", "--scenario", "tiny", "--trace", str(philly_csv), "--trace-format",
                             "philly", *opt, "--no-progress", "--json"], capsys)
        assert rc == 0 and json.loads(out)["jobs_total"] == 2, err[-400:]


# -- 4. --first-seed beyond the largest seed ----------------------------------------------------------
def test_reproduce_first_seed_keeps_every_seed_in_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.commands._common import MAX_SEED

    out = tmp_path / "rp"
    for argv, last in ((["--seeds", "2", "--first-seed", str(MAX_SEED)], MAX_SEED + 1),
                       (["--first-seed", str(MAX_SEED - 1)], MAX_SEED + 1),  # the tiny scale's 3 seeds
                       (["--study", "hetero", "--first-seed", str(MAX_SEED)], MAX_SEED + 2)):
        rc, _, err = _run(["reproduce", "--scale", "tiny", *argv, "--out", str(out), "--no-progress"], capsys)
        # was: ran seeds 2**63 - 1 and 2**63
        assert rc == 2 and f"uses seeds up to {last}, above the largest seed 2**63 - 1" in err, err[-400:]
        assert "give --first-seed at most" in err and "Traceback" not in err
    assert not out.exists()
    from aryl_gym.commands._common import check_seed_range

    check_seed_range(MAX_SEED - 2, 3, "--first-seed")  # the last valid start
    with pytest.raises(SystemExit):
        from aryl_gym.train.bc import main as bc_main

        bc_main(["--seed", str(MAX_SEED), "--episodes", "2", "--out", str(tmp_path / "d.npz")])
    assert "give --seed at most" in capsys.readouterr().err


# -- 5. fit-world on a malformed philly.csv ------------------------------------------------------------
@pytest.mark.parametrize(
    "body, match",
    [
        # was: "could not convert string to float: 'abc'" (no file, no line)
        (PHILLY + "2017-10-01 00:00:00,60.0,1,60.0,a\n2017-10-01 00:01:00,abc,1,60.0,a\n",
         r"philly\.csv:3: column 'duration': expected a finite number >= 0, got 'abc'"),
        (PHILLY + "2017-10-01 00:00:00,60.0,two,60.0,a\n",
         r"philly\.csv:2: column 'num_gpus': expected a whole number >= 1, got 'two'"),
        (PHILLY + "2017-10-01,60.0,1,60.0,a\n",
         r"philly\.csv:2: column 'timestamp': expected a time 'YYYY-MM-DD HH:MM:SS', got '2017-10-01'"),
        # was: a KeyError traceback
        ("timestamp,num_gpus\n2017-10-01 00:00:00,1\n",
         r"philly\.csv:1: the header \(timestamp, num_gpus\) lacks the column\(s\) duration"),
        (PHILLY, r"philly\.csv:1: no data rows"),
    ],
)
def test_fit_world_names_the_file_line_and_column(body: str, match: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.workload.fit import PHILLY_CSV

    f = tmp_path / PHILLY_CSV
    f.parent.mkdir(parents=True)
    f.write_text(body)
    rc, out, err = _run(["fit-world", "--data-root", str(tmp_path)], capsys)
    assert rc == 2 and "Traceback" not in err and out == "", err[-400:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aryl-gym fit-world: error: ")
    assert re.search(match, lines[0]) and str(f) in lines[0] and "Fix:" in lines[0], lines[0]


# -- 6. cosmetics ----------------------------------------------------------------------------------------
def test_reclaim_study_time_ratio_keeps_its_digits() -> None:
    from aryl_gym.commands import reclaim_study as rs

    side = {"preemptions": 1, "extra": 0.0, "equal": 1.0, "overlap": 1.0, "ms": 1.0, "time_ratio": 0.30}
    summary = [{"origin": "synthetic", "bin": "<20", "instances": 1, "trivial": 0, "nontrivial": 1,
                "servers_max": 6, "optimal_preemptions": 1, "optimal_ms": 0.3, "optimal_ms_max": 0.3,
                "aryl": side, "default": dict(side)}]
    row = rs.render(summary).splitlines()[-1]
    assert " 0.3x " in row and " 0x " not in row  # was: 0.30 -> "0x"
    assert [rs.times(v) for v in (0.30, 0.0312, 4.56, 144.2, 420_000.0, None)] == \
        ["0.3x", "0.031x", "4.6x", "144x", "420,000x", "-"]


def test_every_builtin_policy_has_a_one_line_description(capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.agents import policy_names
    from aryl_gym.agents.base import _PLUGINS

    from aryl_gym.commands.policies import DESCRIPTIONS

    builtin = [n for n in policy_names() if n not in _PLUGINS]
    assert set(builtin) <= set(DESCRIPTIONS), sorted(set(builtin) - set(DESCRIPTIONS))
    rc, out, _ = _run(["policies", "--json"], capsys)
    texts = json.loads(out)
    # was: "Aryl (module docstring). Construct variants ..." and "... (see the module docstring)."
    for name in ("aryl-hetero", "pollux-250-elastic"):
        assert rc == 0 and "docstring" not in texts[name] and len(texts[name]) > 30
    # a plugin's class docstring: its first paragraph on one line (was: its first line only)
    from aryl_gym.commands.policies import summary_line

    assert summary_line("""Mine: schedules by
        the moon's phase.

        Details.""") == "Mine: schedules by the moon's phase."


# -- seeds past what the consumer accepts: demos, train --------------------------------------------
def test_demos_keeps_every_episode_seed_in_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.npz"
    rc, _, err = _run(["demos", "--scenario", "tiny", "--policy", "aryl", "--episodes", "2",
                       "--seed", str(2**63 - 1), "--out", str(out)], capsys)
    # was: seeds 2**63 - 1 and 2**63 ran
    assert rc == 2 and "give --seed at most 9223372036854775806" in err
    assert not out.exists()


@pytest.mark.parametrize("backend", ["sb3", "rllib"])
def test_train_refuses_a_seed_sb3_cannot_take_before_a_run_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    pytest.importorskip("sb3_contrib")
    rc, _, err = _run(["train", "--backend", backend, "--config", "maskable_ppo", "--seed", str(2**32),
                       "--timesteps", "64", "--out", str(tmp_path / "runs"), "--quiet"], capsys)
    # was: SB3's "Seed must be between 0 and 2**32 - 1", with the run folder already made; RLlib
    # seeds numpy's legacy generator the same way (was: not checked)
    assert rc == 2 and "seed must be in [0, 4294967295], got 4294967296" in err
    assert not (tmp_path / "runs").exists()
    from aryl_gym.train.config import load_train_config

    assert load_train_config("maskable_ppo", overrides={"seed": 2**32 - 1}).seed == 2**32 - 1  # the largest


def test_preflight_refuses_a_seed_set_in_code() -> None:
    import dataclasses

    from aryl_gym.config import ConfigError
    from aryl_gym.train.config import MAX_RUN_SEED, load_train_config
    from aryl_gym.train.runner import preflight

    cfg = dataclasses.replace(load_train_config("maskable_ppo", scenario="tiny"), seed=MAX_RUN_SEED + 1)
    with pytest.raises(ConfigError, match="give a seed from 0 to 4294967295"):
        preflight(cfg)
