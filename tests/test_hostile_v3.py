"""What a third hostile-user pass found (each case says what happened before): a crash on a numeric
virtual-cluster id, scenario keys accepted and ignored or silently overridden, NaN in --json
output, flags that did nothing, an output file replaced without a word, and a benchmark that left
temporary folders behind."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

import numpy as np
import pytest
import yaml

from aryl_gym.config import configs_dir, load_scenario
from aryl_gym.errors import ConfigError
from aryl_gym.workload.traces import load_trace
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _tiny(tmp_path: Path, name: str = "s.yaml", **workload: object) -> Path:
    """tiny.yaml with ``workload`` keys set (None: the key removed)."""
    data = yaml.safe_load((configs_dir() / "scenarios" / "tiny.yaml").read_text())
    for k, v in workload.items():
        if v is None:
            data["workload"].pop(k, None)
        else:
            data["workload"][k] = v
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.fixture()
def philly_csv(tmp_path: Path) -> Path:
    """Two virtual clusters whose ids read as numbers: 6214e9 (a float) and 103959 (an int)."""
    rows = [f"2017-10-01 00:{i:02d}:00,{300 + 60 * i}.0,1,{300 + 60 * i}.0,{'6214e9' if i % 2 else '103959'}"
            for i in range(8)]
    p = tmp_path / "philly.csv"
    p.write_text(PHILLY + "\n".join(rows) + "\n")
    return p


# -- virtual cluster ids -------------------------------------------------------------------------
def test_numeric_vc_is_text_or_a_clear_error(philly_csv: Path) -> None:
    # was: TypeError: 'float' object is not iterable (YAML reads vc: 6214e9 as a number)
    with pytest.raises(ConfigError, match=r"vc 6214000000000.0 is not a virtual cluster id: .*quoted in YAML"):
        load_trace(philly_csv, "philly", vc=6214e9)
    with pytest.raises(ConfigError, match="is not a virtual cluster id"):
        load_trace(philly_csv, "philly", vc=True)
    # an integer id is its own text: the 4 jobs of cluster 103959
    jobs, _ = load_trace(philly_csv, "philly", vc=103959)
    assert len(jobs) == 4
    jobs, _ = load_trace(philly_csv, "philly", vc=[103959, "6214e9"])
    assert len(jobs) == 8


def test_cli_trace_option_vc_stays_text(philly_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: --trace-option vc=6214e9 became the float 6.214e12 and crashed
    rc, out, err = _run(["simulate", "--scenario", "tiny", "--trace", str(philly_csv), "--trace-format", "philly",
                         "--trace-option", "vc=6214e9", "--no-progress", "--json"], capsys)
    assert rc == 0, err[-400:]
    assert json.loads(out)["jobs_total"] == 4


# -- scenario keys that did nothing ---------------------------------------------------------------
@pytest.mark.parametrize(
    "workload, match",
    [
        # was: every job clipped to max_duration_s (np.clip with min > max)
        ({"min_duration_s": 99999.0}, "min_duration_s (99999) is above workload.max_duration_s (10800)"),
        # was: "job 0 (cnn): work and pred_work must be finite and positive", no key named
        ({"max_duration_s": 0.0, "min_duration_s": 0.0}, "workload.max_duration_s must be > 0"),
        # was: never read, any name accepted
        ({"generator": "nope"}, "generator"),
        # was: ignored without a trace
        ({"trace_format": "philly"}, "workload.trace_format applies to a trace, but workload.trace is not set"),
        ({"trace_options": {"bogus": 1}}, "workload.trace_options applies to a trace"),
        # was: ignored (the scenario does not set elastic_gpu_share)
        ({"elastic_share_sample": "trace"}, "elastic_share_sample only changes how elastic_gpu_share is kept"),
        # was: 0 read as no cap (8-GPU jobs on tiny, whose cap is 4)
        ({"max_job_gpus": 0}, "workload.max_job_gpus must be >= 1 (or left out: no cap), got 0"),
        # was: load silently unused when num_jobs fixes the count
        ({"load": 5.0}, "workload.num_jobs and workload.load are both set"),
    ],
)
def test_scenario_keys_that_did_nothing(tmp_path: Path, workload: dict, match: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_scenario(_tiny(tmp_path, **workload))
    assert match in str(err.value)


def test_trace_scenario_refuses_generator_size_keys(tmp_path: Path) -> None:
    data = yaml.safe_load((configs_dir() / "scenarios" / "philly-6214e9.yaml").read_text())
    for key, value, match in (("load", 0.1, "workload.load does not apply to a trace"),
                              ("num_jobs", 5, "workload.num_jobs does not apply to a trace")):
        d = json.loads(json.dumps(data))
        d["workload"][key] = value
        p = tmp_path / f"{key}.yaml"
        p.write_text(yaml.safe_dump(d))
        with pytest.raises(ConfigError, match=match):  # was: the whole trace, 1,478 jobs
            load_scenario(p)


def test_inference_csv_needs_csv_mode(tmp_path: Path) -> None:
    data = yaml.safe_load((configs_dir() / "scenarios" / "tiny.yaml").read_text())
    data["inference"]["csv"] = "u.csv"  # mode stays diurnal: was: the file never read
    p = tmp_path / "i.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="inference.csv is set but inference.mode is diurnal"):
        load_scenario(p)


def test_shipped_scenarios_still_load() -> None:
    for name in ("tiny", "testbed", "basic", "ideal", "production", "philly-6214e9", "pollux-w6"):
        load_scenario(name)


# -- command-line flags ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, match",
    [
        # a trace-only flag set to 0 without a trace (was: 0 slipped past the check)
        (["simulate", "--scenario", "tiny", "--max-jobs", "0"], "--max-jobs applies to a trace file only"),
        (["simulate", "--scenario", "tiny", "--time-compression", "0"], "--time-compression applies to a trace"),
        # flags that did nothing
        (["simulate", "--scenario", "tiny", "--series"], "--series adds the per-job and hourly series to --json"),
        (["calibrate", "--scenario", "tiny", "--workers", "2"], "--workers applies to --relevance and --load-grid"),
        (["calibrate", "--relevance", "--scenarios", "tiny", "--seed", "3"], "--relevance and --load-grid take --seeds"),
        (["calibrate", "--scenario", "tiny", "--seed", "1", "--seeds", "0-1"], "--seed and --seeds both set"),
        (["reproduce", "--fresh", "--cached-only"], "--fresh recomputes every episode and --cached-only runs none"),
        (["bench", "--only", "knapsack", "--baseline", "."], "--baseline applies to the scale benchmark only"),
    ],
)
def test_flags_that_did_nothing(argv: list[str], match: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    if argv[0] == "bench":  # a checkout for --baseline to accept
        argv = [*argv[:-1], str(Path(__file__).resolve().parents[1])]
    rc, _, err = _run(argv, capsys)
    assert rc == 2, err[-400:]
    assert match in err and "Traceback" not in err


def test_infinite_time_compression_is_refused(philly_csv: Path) -> None:
    # was: accepted, every arrival moved to time 0
    for bad in (float("inf"), 1e400):
        with pytest.raises(ConfigError, match="time_compression must be a finite number > 0"):
            load_trace(philly_csv, "philly", time_compression=bad)


def test_calibrate_json_is_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    # was: "paper": NaN (no paper figure), which strict parsers refuse
    rc, out, err = _run(["calibrate", "--scenario", "tiny", "--json"], capsys)
    assert rc == 0, err[-400:]

    def refuse(c: str) -> None:
        raise ValueError(f"non-standard JSON constant {c}")

    d = json.loads(out, parse_constant=refuse)
    assert any(r.get("paper") is None for r in d["rows"])


def test_cache_hint_names_what_each_command_has(tmp_path: Path) -> None:
    from aryl_gym.episodes import CacheError, read_cached

    p = tmp_path / "e.json"
    p.write_text("{broken")
    with pytest.raises(CacheError, match=r"reproduce: --fresh; calibrate and relevance: a new --out"):
        read_cached(p)


# -- output files -----------------------------------------------------------------------------------
def test_demos_does_not_replace_a_file_without_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "keep.npz"
    keep.write_text("precious")
    base = ["demos", "--scenario", "tiny", "--policy", "fifo", "--episodes", "1", "--out", str(keep)]
    rc, _, err = _run(base, capsys)
    assert rc == 2 and "exists; pass --overwrite" in err  # was: replaced
    assert keep.read_text() == "precious"
    rc, _, err = _run([*base, "--overwrite"], capsys)
    assert rc == 0, err[-400:]
    assert len(np.load(keep)["actions"]) > 0
    folder = tmp_path / "dir"
    folder.mkdir()
    rc, _, err = _run([*base[:-1], str(folder)], capsys)
    assert rc == 2 and "is a folder" in err  # was: written beside it as dir.npz
    assert not (tmp_path / "dir.npz").exists()


def test_atomic_write_gives_the_mode_open_would(tmp_path: Path) -> None:
    from aryl_gym.fileio import atomic_write_bytes

    old = os.umask(0o022)
    try:
        p = tmp_path / "new.bin"
        atomic_write_bytes(p, b"x")
        assert stat.S_IMODE(p.stat().st_mode) == 0o644  # was: 0o600 (mkstemp's)
        q = tmp_path / "kept.bin"
        q.write_bytes(b"a")
        q.chmod(0o640)
        atomic_write_bytes(q, b"b")  # replacing keeps the file's own mode
        assert stat.S_IMODE(q.stat().st_mode) == 0o640 and q.read_bytes() == b"b"
    finally:
        os.umask(old)


# -- bench --baseline ---------------------------------------------------------------------------------
def test_bench_baseline_bad_checkout_is_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from aryl_gym.benchmarks import scale

    fake = tmp_path / "fake"
    (fake / "aryl_gym").mkdir(parents=True)
    (fake / "aryl_gym" / "__init__.py").write_text("")
    with pytest.raises(ValueError, match=r"not a checkout of aryl-gym \(no aryl_gym/envs/ or agents/\)"):
        scale.bench_steps(quick=True, baseline=fake, scenarios=("tiny",))
    # a checkout whose code fails: a one-line error naming it, and its overlay removed
    broken = tmp_path / "broken"
    (broken / "aryl_gym" / "envs").mkdir(parents=True)
    (broken / "agents").mkdir()
    (broken / "aryl_gym" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    monkeypatch.setitem(scale.WARMUP, "tiny", 5)
    monkeypatch.setitem(scale.QUICK_STEPS, "tiny", 20)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the overlay goes here
    with pytest.raises(ValueError, match="failed with that checkout's code: ImportError: broken on purpose"):
        scale.bench_steps(quick=True, baseline=broken, scenarios=("tiny",))
    assert not list(tmp_path.glob("aryl-gym-baseline-*"))  # was: one left behind per run


def test_long_options_are_not_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    # was: reproduce --seed 3 was read as --seeds 3 (a count of seeds), compare --polic as --policies
    for argv in (["reproduce", "--seed", "3"], ["compare", "--scenario", "tiny", "--polic", "fifo"]):
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and "unrecognized arguments" in err, err[-300:]


# -- a second pass: the envs, training and the leaderboard -------------------------------------------
def _suite(**over: object) -> dict:
    d: dict = {"name": "hz", "scenarios": ["tiny"], "seeds": [0], "baseline": "fifo", "policies": ["fifo"]}
    d.update(over)
    return d


def test_env_spec_serialises_for_every_id() -> None:
    import gymnasium as gym

    from aryl_gym.envs import ENTRIES

    for env_id in ENTRIES:  # was: ValueError "Callable found ... vector_entry_point" for Aryl-v2
        spec = gym.spec(env_id)
        assert gym.envs.registration.EnvSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"action_mode": "targets", "release": False}, "release=False removes the sequential mode's release"),
        ({"action_mode": "priority", "allow_preempt": True}, "the priority mode only orders queued jobs"),
        ({"action_mode": "sequential", "preempt_guard": True}, "allow_preempt=False allows none"),
        ({"end_fallback": "aryl"}, "end_fallback='aryl' is the policy early_end='charge' bills"),
        ({"trace_options": {"max_jobs": 3}}, "trace_options applies to a trace file, and trace is not set"),
        ({"trace_format": "bogus"}, "trace_format applies to a trace file"),
        # reward strings that gave a reward of 0 at every step, or read a name twice as weight 1
        ({"reward": ""}, "give component names joined by '+'"),
        ({"reward": "jct+"}, "give component names joined by '+'"),
        ({"reward": "jct+jct"}, "'jct' is named twice"),
        ({"reward": {}}, "every weight is 0"),
        ({"reward": {"jct": 0}}, "every weight is 0"),
    ],
)
def test_env_options_that_did_nothing(kwargs: dict, match: str) -> None:
    import gymnasium as gym

    with pytest.raises(ValueError) as err:  # was: accepted and ignored
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", **kwargs).reset(seed=0)
    assert match in str(err.value)


def test_env_options_still_accepted() -> None:
    import gymnasium as gym

    for kw in ({"action_mode": "sequential", "allow_preempt": True, "preempt_guard": True},
               {"early_end": "charge", "end_fallback": "aryl"}, {"reward": {"jct": 1.0, "preemption": 0.0}},
               {"reward": "jct+preemption"}, {"action_mode": "targets", "allow_preempt": True}):
        env = gym.make("aryl_gym/Aryl-v2", scenario="tiny", **kw)
        env.reset(seed=0)
        env.close()


def test_train_config_refuses_what_the_runner_sets() -> None:
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO

    from aryl_gym.train.config import check_hyperparams, load_train_config

    algo = configs_dir() / "algos" / "maskable_ppo.yaml"
    with pytest.raises(ConfigError, match="env_kwargs.scenario is set by the run itself"):
        load_train_config(algo, "tiny", overrides={"env_kwargs": {"scenario": "testbed"}})  # was: played testbed
    for hp, match in (({"verbose": 1}, "'verbose' is set by the training runner"),
                      ({"rollout_buffer_class": "foo"}, "takes a Python class"),
                      ({"rollout_buffer_kwargs": 3}, "must be a mapping"),
                      ({"gamma": 2.0}, "gamma: 2.0 is outside (0, 1]"),
                      ({"gae_lambda": 5}, "gae_lambda: 5 is outside [0, 1]"),
                      ({"max_grad_norm": -1}, "max_grad_norm: -1 is outside (0, inf)"),
                      ({"vf_coef": -3}, "vf_coef: -3 is outside [0, inf)"),
                      ({"ent_coef": float("nan")}, "ent_coef: nan must be a finite number"),
                      ({"learning_rate": float("inf")}, "must be a finite number"),
                      ({"learning_rate": "nan"}, "learning_rate: 'nan' must be a finite number"),
                      ({"normalize_advantage": "maybe"}, "must be true or false")):
        with pytest.raises(ConfigError) as err:  # was: trained on, or a tensor of NaNs later
            check_hyperparams(PPO, hp)
        assert match in str(err.value), (hp, str(err.value))
    check_hyperparams(PPO, {"gamma": 1.0, "gae_lambda": 0.0, "ent_coef": 0.0, "target_kl": 0.02,
                            "learning_rate": "lin_3e-4", "normalize_advantage": False})


def test_train_set_value_that_is_not_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("stable_baselines3")
    rc, _, err = _run(["train", "--config", str(configs_dir() / "algos" / "maskable_ppo.yaml"), "--scenario", "tiny",
                       "--set", "learning_rate=[1"], capsys)
    assert rc == 2 and "'[1' is not a YAML value" in err and "Traceback" not in err  # was: a parser traceback


def test_resume_keeps_the_run_scenario_and_refuses_a_damaged_config(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("stable_baselines3")
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import load_run_config

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    cfg = load_train_config(configs_dir() / "algos" / "maskable_ppo.yaml", "tiny")
    text = yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    (run / "config.yaml").write_text(text)
    ckpt = run / "checkpoints" / "rl_model_256_steps.zip"
    ckpt.write_bytes(b"")
    algo = str(configs_dir() / "algos" / "maskable_ppo.yaml")
    for extra in (["--scenario", "testbed"], ["--config", algo, "--scenario", "testbed"]):
        rc, _, err = _run(["train", "--resume", str(ckpt), *extra], capsys)
        # was: the tiny run went on on testbed in the same folder (or --scenario was ignored)
        assert rc == 2 and "trains on 'tiny', not 'testbed'" in err, err[-300:]
    (run / "config.yaml").write_text("\n".join(text.splitlines()[:5]) + "\n")  # a cut file
    with pytest.raises(ConfigError, match="damaged run config: no "):  # was: defaults filled in
        load_run_config(run)


def test_init_from_a_damaged_zip_fails_before_a_run_folder(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3")
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import preflight

    bad = tmp_path / "cut.zip"
    bad.write_bytes(b"PK\x03\x04 cut short")
    cfg = load_train_config(configs_dir() / "algos" / "maskable_ppo.yaml", "tiny",
                            overrides={"init_from": str(bad)})
    with pytest.raises(ConfigError, match="not a readable model .zip"):  # was: "weights do not fit"
        preflight(cfg)


def test_suite_env_kwargs_are_checked_when_the_suite_loads() -> None:
    from aryl_gym.leaderboard import suite_from_dict

    for over, match in (({"env_kwargs": {"windw": 3}}, "env_kwargs: unknown env option 'windw'"),
                        ({"env": "aryl_gym/Bogus-v9"}, "env 'aryl_gym/Bogus-v9' is not an aryl_gym env"),
                        ({"agents": {"mine": {"source": "x:y", "env_kwargs": {"scenario": "testbed"}}}},
                         "agents.mine.env_kwargs must not set 'scenario'")):
        with pytest.raises(ConfigError) as err:  # was: at each episode, a skip with exit 0, or dropped
            suite_from_dict(_suite(**over))
        assert match in str(err.value)


def test_leaderboard_resume_refuses_another_suite_and_reads_cut_series(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict
    from aryl_gym.leaderboard.results import read_series
    from aryl_gym.leaderboard.runner import run_suite

    out = tmp_path / "out"
    run_leaderboard(suite_from_dict(_suite()), out, plots=False, tensorboard=False, progress=False,
                    log=lambda m: None)
    md = (out / "leaderboard.md").read_text()
    assert "over completed jobs" not in md and "censored at the episode's end" in md  # metrics v2's rule
    with pytest.raises(ConfigError, match="holds results of suite 'hz', not 'other'"):  # was: mixed in
        run_suite(suite_from_dict(_suite(name="other")), out, resume=True, progress=False, log=lambda m: None)
    gz = next(out.rglob("*.json.gz"))
    gz.write_bytes(gz.read_bytes()[:50])  # a cut series file: left out (was: EOFError traceback)
    assert read_series(gz) is None
    rc, _, err = _run(["leaderboard", "--suite", "quick", "--out", str(out), "--resume", "--overwrite"], capsys)
    assert rc == 2 and "give one of them" in err  # was: --overwrite won silently


def test_evaluate_stochastic_needs_a_learned_agent(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["evaluate", "--agent", "aryl", "--seeds", "0", "--scenario", "tiny", "--stochastic"], capsys)
    assert rc == 2 and "--stochastic samples a learned agent's actions" in err  # was: ignored


def test_reclaim_env_snapshot_options_need_snapshots() -> None:
    import gymnasium as gym

    for kw in ({"max_servers": 0}, {"optimum": True}):  # was: accepted and ignored
        with pytest.raises(ValueError, match="belong to the snapshot mode"):
            gym.make("aryl_gym/ArylReclaim-v2", scenario="tiny", **kw)


# -- a third pass: statistics, the simulator's API, the reclaim tools ---------------------------------
def test_ratio_statistics_edges() -> None:
    from aryl_gym import stats as st

    r = st.paired_ratio_ci([0.0, 1.0, 2.0])  # a ratio is never negative (was: lo -1.484)
    assert r.method == "arithmetic" and r.lo == 0.0 and r.hi == pytest.approx(1.0 + 4.302653 / math.sqrt(3))
    assert math.isinf(st.paired_ratio_ci([1e-320, 1.0]).hi)  # was: OverflowError
    for level in (1.5, 0.0, float("nan")):  # was: NaN or zero-width intervals
        with pytest.raises(ValueError, match="confidence level must be a number between 0 and 1"):
            st.paired_ratio_ci([1.0, 2.0], level=level)
    with pytest.raises(ValueError, match="reps must be an integer >= 1"):  # was: IndexError
        st.bootstrap_replicates(lambda a: a.mean(axis=1), [1.0, 2.0], reps=0)
    for delta in (1e-300, float("inf")):  # was: OverflowError, and "inf% difference: 2"
        with pytest.raises(ValueError):
            st.seeds_needed(0.1, delta)


def _open_tiny_round():  # type: ignore[no-untyped-def]
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    sim = make_episode("tiny", 0).simulator()
    pol = make_policy("fifo")
    sim.begin(pol)
    while not sim.open_round(pol):
        sim.close_round(pol, None)
    return sim, pol


def test_decision_batch_is_checked_before_anything_changes() -> None:
    from aryl_gym.sim.view import Decision

    sim, pol = _open_tiny_round()
    j = int(np.flatnonzero(sim.state == 0)[0])  # a queued job
    before = sim.state.copy()
    with pytest.raises(TypeError, match="Decision.batch must be a dict"):  # was: AttributeError after placing
        sim.close_round(pol, Decision(targets={j: 1}, batch=[1.0]))  # type: ignore[arg-type]
    assert (sim.state == before).all()


def test_rate_and_batch_keys_must_be_job_ids() -> None:
    from aryl_gym.sim.view import Decision

    sim, pol = _open_tiny_round()
    rep = sim.close_round(pol, Decision(speedup={0.5: [3.0]}, batch={"0": 2.0})).report  # type: ignore[dict-item]
    # was: 0.5 and "0" read as job 0
    assert any("a job id must be an integer" in str(v) for v in rep.invalid.values())
    assert sim.batch_lam == {} and not sim.rate_mult


def test_malformed_reclaim_answer_is_a_type_error() -> None:
    sim, _ = _open_tiny_round()
    for bad in (3, "abc", [float("nan")], ["abc"], [1.7]):  # was: raw int()/iteration errors, 1.7 -> 1
        with pytest.raises(TypeError, match="reclaim\\(\\)"):
            sim._validate_reclaim(bad, 1)  # type: ignore[arg-type]


def test_reclaim_training_guards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from aryl_gym.reclaim_snapshots import synthetic_snapshots
    from aryl_gym.train.reclaim_agent import ReclaimTrainConfig, Reference, gap_table

    basic = str(configs_dir() / "scenarios" / "basic.yaml")
    with pytest.raises(ValueError, match="reclaim suite's evaluation events"):  # was: a path passed
        ReclaimTrainConfig(scenarios=((basic, (1,)),)).check()
    g = gap_table(synthetic_snapshots(2, 4, 6, 0, 1.0), [Reference(0, 0)] * 2, [3, 2])
    assert math.isinf(g["all"]["agent_gap"]) and g["all"]["aryl_gap"] == 0.0  # was: 0.0 (perfect)
    assert math.isnan(g[">=60"]["agent_gap"])  # no events
    run = tmp_path / "fakerun"
    run.mkdir()
    (run / "config.json").write_text('{"precious": 1}')
    (run / ".aryl-gym-owner").write_text("train-reclaim\n")  # an earlier run's folder (a folder of the user's is refused outright)
    rc, _, err = _run(["train-reclaim", "--out", str(run), "--events", "none", "--val-events", "none",
                       "--synthetic", "4", "--val-synthetic", "2", "--synthetic-servers", "4-8", "--rounds", "1"],
                      capsys)
    assert rc == 2 and "holds config.json; pass --overwrite" in err  # was: replaced
    assert (run / "config.json").read_text() == '{"precious": 1}'


def test_reclaim_study_snapshots_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snaps = tmp_path / "snaps.npz"
    snaps.write_bytes(b"precious")
    rc, _, err = _run(["reclaim-study", "--scenario", "tiny", "--seeds", "0", "--save-snapshots", str(snaps)], capsys)
    assert rc == 2 and "exists; pass --overwrite" in err and snaps.read_bytes() == b"precious"  # was: emptied
    rc, out, err = _run(["reclaim-study", "--synthetic", "1", "--min-servers", "4", "--max-servers", "6",
                         "--seed", "0", "--elastic", "1.0", "--json"], capsys)
    assert rc == 0, err[-300:]

    def refuse(c: str) -> None:
        raise ValueError(c)

    json.loads(out, parse_constant=refuse)  # was: "extra": Infinity


def test_reproduce_refuses_an_inert_load_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["reproduce", "--scale", "tiny", "--seeds", "1", "--rows", "jct-aryl-baseline",
                       "--sweep", "workload.load=0.5,0.9", "--out", str(tmp_path / "rp")], capsys)
    assert rc == 2 and "so load changes nothing" in err  # was: two identical sweep points


def test_order_entries_must_be_job_ids() -> None:
    from aryl_gym.sim.view import Decision

    sim, pol = _open_tiny_round()
    for order in ([1.7], ["2"], [True]):  # was: 1.7 and "2" read as jobs 1 and 2
        with pytest.raises(TypeError, match="Decision.order must be a list of job ids"):
            sim.close_round(pol, Decision(order=order))  # type: ignore[arg-type]
    sim.close_round(pol, Decision(order=[np.int64(0), 1]))  # numpy integers are ids
