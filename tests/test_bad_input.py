"""Bad input, table-driven: the CLI, scenario/suite/algo configs, the leaderboard and the env.

Every CLI case runs ``aryl_gym.cli.main`` in this process and checks exit code 2, a message
that names the flag, file or key and says how to fix it, and no traceback. Env cases check the
documented exception type (ValueError) and message; invalid *actions* never raise, they count in
``info["invalid"]``. Trace-file cases live in ``tests/test_bad_input_traces.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from aryl_gym.cli import main
from aryl_gym.config import ConfigError

# ----------------------------------------------------------------------------------------------
# fixtures: one folder of bad files per test
# ----------------------------------------------------------------------------------------------

GOOD_SCENARIO = "name: bad\ncluster: {train_servers: 1, inf_servers: 1}\nworkload: {num_jobs: 3}\n"


def _write(p: Path, text: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    t = tmp_path
    (t / "folder.yaml").mkdir()
    (t / "emptydir").mkdir()
    f = {
        "tmp": str(t),
        "folder": str(t / "folder.yaml"),
        "emptydir": str(t / "emptydir"),
        "long": str(t / ("x" * 300 + ".yaml")),
        "binary": str(_write(t / "bin.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))),
        "latin1": str(_write(t / "latin1.yaml", "name: caf\xe9\n".encode("latin-1"))),
        "dupkey": str(_write(t / "dup.yaml", "name: a\ncluster:\n  train_servers: 2\n  train_servers: 3\n")),
        "dupname": str(_write(t / "dupname.yaml", "name: a\nname: b\n")),
        "numjobs0": str(_write(t / "nj0.yaml", "name: a\nworkload: {num_jobs: 0}\n")),
        "numjobs_abc": str(_write(t / "nja.yaml", "name: a\nworkload: {num_jobs: abc}\n")),
        "numjobs_float": str(_write(t / "njf.yaml", "name: a\nworkload: {num_jobs: 2.5}\n")),
        "horizon_str": str(_write(t / "hz.yaml", "name: a\nsim: {horizon_hours: 2 days}\n")),
        "max_rounds_float": str(_write(t / "mr.yaml", "name: a\nsim: {max_rounds: 1.5}\n")),
        "relaunch_list": str(_write(t / "rl.yaml", "name: a\nsim: {relaunch_overhead_s: [1, 2]}\n")),
        "trace_opts_int": str(_write(t / "to.yaml", "name: a\nworkload: {trace_options: 5}\n")),
        "inf_csv_int": str(_write(t / "ic.yaml", "name: a\ninference: {csv: 5}\n")),
        "max_gpus_neg": str(_write(t / "mg.yaml", "name: a\nworkload: {max_job_gpus: -4}\n")),
        "good": str(_write(t / "good.yaml", GOOD_SCENARIO)),
        "unreadable": str(_write(t / "secret.yaml", GOOD_SCENARIO)),
        "suite_dup": str(_write(t / "sdup.yaml", "name: s\nscenarios: [tiny]\nseeds: [0]\nseeds: [1]\npolicies: [fifo]\n")),
        "suite_bigseeds": str(_write(t / "sbig.yaml", "name: s\nscenarios: [tiny]\nseeds: '0-99999999999'\npolicies: [fifo]\n")),
        "suite_dupseed": str(_write(t / "sds.yaml", "name: s\nscenarios: [tiny]\nseeds: [1, 1]\npolicies: [fifo]\n")),
        "a_file": str(_write(t / "a_file.txt", "not a folder\n")),
        "csv_binary": str(_write(t / "results.csv", b"\x00\x01\x02binary")),
        "csv_header": str(_write(t / "other.csv", "a,b,c\n1,2,3\n")),
        "algo_dup": str(_write(t / "algo.yaml", "algo: ppo\nalgo: dqn\ndefault: {}\n")),
        "algo_steps_str": str(_write(t / "algo_s.yaml", "algo: ppo\ndefault: {total_timesteps: lots}\n")),
        "algo_eval_seed": str(_write(t / "algo_e.yaml", "algo: ppo\ntiny:\n  eval: {seeds: [1, x]}\n")),
        "algo_vec": str(_write(t / "algo_v.yaml", "algo: ppo\ndefault: {vec_env: threads}\n")),
        "gpu_mem_str": str(_write(t / "gm.yaml", "name: a\ngpu_types: {X: {memory_gb: lots}}\n")),
        "gpu_unknown_key": str(_write(t / "gk.yaml", "name: a\ngpu_types: {X: {memroy_gb: 8}}\n")),
        "mode_bad": str(_write(t / "md.yaml", "name: a\ninference: {mode: sine}\n")),
        "two_errors": str(_write(t / "two.yaml", "name: a\nworkload: {num_jobs: abc, load: -1}\n")),
        "suite_seed_str": str(_write(t / "sss.yaml", "name: s\nscenarios: [tiny]\nseeds: [0, x]\npolicies: [fifo]\n")),
        "suite_optional": str(_write(t / "sopt.yaml", "name: s\nscenarios: [tiny]\nseeds: [0]\npolicies: [{name: fifo, optional: maybe}]\n")),
    }
    os.chmod(f["unreadable"], 0)
    return f


@pytest.fixture
def unreadable_as_root(monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> None:
    """As root chmod 000 does not stop reading: make the read fail as it would for a user."""
    if os.geteuid() != 0:
        return
    real = os.access
    target = os.path.abspath(files["unreadable"])

    def access(path: Any, mode: int, *a: Any, **k: Any) -> bool:
        if os.path.abspath(str(path)) == target:
            return False
        return real(path, mode, *a, **k)

    monkeypatch.setattr(os, "access", access)


@pytest.fixture
def locked_out(files: dict[str, str]):  # type: ignore[no-untyped-def]
    """``TMP/locked`` held by another lock holder (a separate open file, as another process)."""
    import fcntl

    d = Path(files["tmp"]) / "locked"
    d.mkdir()
    fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.pwrite(fd, b"4242\n", 0)
    yield str(d)
    os.close(fd)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return rc, out, err


# ----------------------------------------------------------------------------------------------
# CLI cases: (id, argv with {placeholders} from `files`, substrings the error must contain)
# ----------------------------------------------------------------------------------------------

TB = ["--scenario", "tiny", "--no-progress"]

CLI_CASES: list[tuple[str, list[str], list[str]]] = [
    # seeds and names
    ("seed-negative", ["simulate", *TB, "--seed", "-1"], ["--seed", "[0, 2**63)"]),
    ("seed-not-int", ["simulate", *TB, "--seed", "abc"], ["--seed", "integer"]),
    ("seeds-duplicate", ["compare", *TB, "--seeds", "1,1"], ["--seeds", "given twice"]),
    ("seeds-huge-range", ["compare", *TB, "--seeds", "0-99999999999"], ["--seeds", "at most 100,000"]),
    ("seeds-empty-range", ["compare", *TB, "--seeds", "5-2"], ["--seeds", "START-END"]),
    ("seeds-negative", ["compare", *TB, "--seeds", "-3"], ["--seeds", "[0, 2**63)"]),
    ("policies-duplicate", ["compare", *TB, "--policies", "fifo,fifo"], ["--policies", "given twice"]),
    ("policies-empty", ["compare", *TB, "--policies", ","], ["--policies", "at least one"]),
    ("policy-unknown", ["simulate", *TB, "--policy", "fifoo"], ["fifoo", "fifo"]),
    ("evaluate-agent-twice", ["evaluate", "--agent", "fifo", "--agent", "fifo", "--seeds", "0"],
     ["--agent", "given twice"]),
    ("evaluate-against-dup", ["evaluate", "--agent", "fifo", "--against", "sjf,sjf", "--seeds", "0"],
     ["--against", "given twice"]),
    ("train-seed-negative", ["train", "--seed", "-1"], ["--seed", "[0, 2**63)"]),
    ("train-eval-seeds-bad", ["train", "--eval-seeds", "x"], ["--eval-seeds", "integers"]),
    ("train-timesteps-0", ["train", "--timesteps", "0"], ["--timesteps", ">= 1"]),
    ("reclaim-study-seed", ["reclaim-study", "--seed", "-5"], ["--seed", "[0, 2**63)"]),
    ("demos-episodes-0", ["demos", "--episodes", "0", "--out", "{tmp}/d"], ["--episodes", ">= 1"]),
    ("demos-window-0", ["demos", "--window", "0", "--out", "{tmp}/d"], ["--window", ">= 1"]),
    ("bench-unknown", ["bench", "--only", "nope"], ["nope", "known:"]),
    ("bench-baseline-not-checkout", ["bench", "--only", "scale", "--baseline", "{tmp}"], ["--baseline", "not a checkout"]),
    # simulate overrides without --trace: applied and validated, or rejected
    ("train-servers-negative", ["simulate", *TB, "--train-servers", "-1"], ["--train-servers", ">= 1"]),
    ("inf-servers-negative", ["simulate", *TB, "--inf-servers", "-3"], ["--inf-servers", ">= 0"]),
    ("train-gpu-unknown", ["simulate", *TB, "--train-gpu", "H100X"], ["--train-gpu", "H100X", "gpu_types"]),
    ("inf-gpu-unknown", ["simulate", *TB, "--inf-gpu", "T5"], ["--inf-gpu", "known"]),
    ("max-jobs-without-trace", ["simulate", *TB, "--max-jobs", "5"], ["--max-jobs", "--trace", "num_jobs"]),
    ("vc-without-trace", ["compare", *TB, "--vc", "x"], ["--vc", "--trace"]),
    # scenario files
    ("scenario-unknown", ["simulate", "--scenario", "nosuch"], ["nosuch", "Known scenarios"]),
    ("scenario-missing", ["simulate", "--scenario", "{tmp}/none.yaml"], ["none.yaml", "not found"]),
    ("scenario-folder", ["simulate", "--scenario", "{folder}"], ["folder.yaml", "is a folder"]),
    ("scenario-too-long", ["simulate", "--scenario", "{long}"], ["too long", "shorter"]),
    ("scenario-binary", ["simulate", "--scenario", "{binary}"], ["bin.yaml", "binary"]),
    ("scenario-not-utf8", ["simulate", "--scenario", "{latin1}"], ["latin1.yaml", "UTF-8"]),
    ("scenario-unreadable", ["simulate", "--scenario", "{unreadable}"], ["secret.yaml", "permission"]),
    ("scenario-dup-key", ["simulate", "--scenario", "{dupkey}"], ["dup.yaml", "duplicate key 'train_servers'", "line 3"]),
    ("scenario-dup-top-key", ["simulate", "--scenario", "{dupname}"], ["dupname.yaml", "duplicate key 'name'"]),
    ("num-jobs-0", ["simulate", "--scenario", "{numjobs0}"], ["nj0.yaml", "workload.num_jobs", ">= 1"]),
    ("num-jobs-abc", ["simulate", "--scenario", "{numjobs_abc}"], ["nja.yaml", "workload.num_jobs", "integer"]),
    ("num-jobs-float", ["simulate", "--scenario", "{numjobs_float}"], ["workload.num_jobs", "integer"]),
    ("horizon-string", ["simulate", "--scenario", "{horizon_str}"], ["hz.yaml", "sim.horizon_hours", "number"]),
    ("max-rounds-float", ["simulate", "--scenario", "{max_rounds_float}"], ["sim.max_rounds", "integer"]),
    ("relaunch-not-mapping", ["simulate", "--scenario", "{relaunch_list}"], ["sim.relaunch_overhead_s", "mapping"]),
    ("trace-options-not-mapping", ["simulate", "--scenario", "{trace_opts_int}"], ["workload.trace_options", "mapping"]),
    ("inference-csv-not-string", ["simulate", "--scenario", "{inf_csv_int}"], ["inference.csv", "string"]),
    ("max-job-gpus-negative", ["simulate", "--scenario", "{max_gpus_neg}"], ["workload.max_job_gpus", ">= 0"]),
    ("gpu-memory-string", ["simulate", "--scenario", "{gpu_mem_str}"],
     ["gm.yaml", "gpu_types.X.memory_gb", "number", "'lots'"]),
    ("gpu-unknown-key", ["simulate", "--scenario", "{gpu_unknown_key}"],
     ["unknown key 'memroy_gb' in gpu_types.X", "Allowed keys: default_speed, memory_gb, speed"]),
    ("inference-mode-unknown", ["simulate", "--scenario", "{mode_bad}"],
     ["inference.mode", "'diurnal', 'csv' or 'constant'", "'sine'"]),
    ("two-errors-both-named", ["simulate", "--scenario", "{two_errors}"],
     ["2 errors", "workload.num_jobs must be an integer, got 'abc'", "workload.load must be > 0, got -1"]),
    ("algo-steps-string", ["train", "--config", "{algo_steps_str}", "--scenario", "tiny"],
     ["algo_s.yaml", "default.total_timesteps must be an integer", "'lots'"]),
    ("algo-vec-env", ["train", "--config", "{algo_vec}", "--scenario", "tiny"],
     ["default.vec_env", "'dummy', 'subproc' or 'aryl'", "'threads'"]),
    # suites and the leaderboard
    ("suite-unknown", ["leaderboard", "--suite", "nosuch"], ["nosuch", "Known suites"]),
    ("suite-folder", ["leaderboard", "--suite", "{folder}"], ["folder.yaml", "is a folder"]),
    ("suite-binary", ["leaderboard", "--suite", "{binary}"], ["bin.yaml", "binary"]),
    ("suite-dup-key", ["leaderboard", "--suite", "{suite_dup}"], ["sdup.yaml", "duplicate key 'seeds'"]),
    ("suite-huge-seeds", ["leaderboard", "--suite", "{suite_bigseeds}"], ["sbig.yaml", "at most 100,000"]),
    ("suite-dup-seeds", ["leaderboard", "--suite", "{suite_dupseed}"], ["sds.yaml", "duplicates"]),
    ("suite-too-long", ["leaderboard", "--suite", "{long}"], ["too long"]),
    ("suite-seed-string", ["leaderboard", "--suite", "{suite_seed_str}"], ["sss.yaml", "seeds[1] must be an integer", "'x'"]),
    ("suite-optional-not-bool", ["leaderboard", "--suite", "{suite_optional}"],
     ["policies[0].optional must be true or false", "'maybe'"]),
    ("out-is-file", ["leaderboard", "--suite", "{good_suite}", "--out", "{a_file}", "--no-progress"],
     ["--out", "a_file.txt", "existing file", "folder"]),
    ("out-locked", ["leaderboard", "--suite", "{good_suite}", "--out", "{locked}", "--no-progress"],
     ["locked", "pid 4242", "another --out"]),
    ("workers-0", ["leaderboard", "--suite", "quick", "--workers", "0"], ["--workers", ">= 1"]),
    ("validate-sample-negative", ["leaderboard", "--validate", "{csv_header}", "--validate-sample", "-5"],
     ["--validate-sample", ">= 0"]),
    ("validate-missing", ["leaderboard", "--validate", "{tmp}/nothing.csv"], ["nothing.csv", "not found"]),
    ("validate-folder", ["leaderboard", "--validate", "{emptydir}"], ["emptydir", "is a folder"]),
    ("validate-binary", ["leaderboard", "--validate", "{csv_binary}"], ["results.csv", "binary"]),
    ("validate-other-csv", ["leaderboard", "--validate", "{csv_header}"], ["other.csv", "schema", "--out"]),
    ("validate-too-long", ["leaderboard", "--validate", "{long}"], ["too long"]),
    ("agent-no-equals", ["leaderboard", "--suite", "quick", "--agent", "foo"], ["--agent", "NAME=SOURCE"]),
    ("no-suite", ["leaderboard"], ["--suite", "--validate"]),
]


@pytest.mark.parametrize("case_id,argv,expect", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(
    case_id: str,
    argv: list[str],
    expect: list[str],
    files: dict[str, str],
    unreadable_as_root: None,
    locked_out: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good_suite = _write(
        Path(files["tmp"]) / "goodsuite.yaml",
        "name: g\nscenarios: [tiny]\nseeds: [0]\npolicies: [baseline]\n",
    )
    subs = {**files, "locked": locked_out, "good_suite": str(good_suite)}
    rc, out, err = run_cli([a.format(**subs) for a in argv], capsys)
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    assert "error" in err, err
    low = err.lower()
    for s in expect:
        assert s.lower() in low, f"{s!r} not in {err!r}"


def test_case_count() -> None:
    """The brief: at least 50 bad-input cases in this file (CLI, env, config API)."""
    assert len(CLI_CASES) + len(ENV_CASES) + len(API_CASES) >= 50


# ----------------------------------------------------------------------------------------------
# Python API: configs (ConfigError, a ValueError)
# ----------------------------------------------------------------------------------------------


def _load_scenario(key: str) -> Callable[[dict[str, str]], Any]:
    def f(files: dict[str, str]) -> Any:
        from aryl_gym.config import load_scenario

        return load_scenario(files[key])

    return f


def _load_algo(files: dict[str, str]) -> Any:
    from aryl_gym.train.config import load_train_config

    return load_train_config(files["algo_dup"])


def _load_algo_file(files: dict[str, str], key: str) -> Any:
    from aryl_gym.train.config import load_train_config

    return load_train_config(files[key], "tiny")


def _reclaim(over: dict[str, Any]) -> Any:
    from aryl_gym.leaderboard.reclaim_suite import reclaim_suite_from_dict

    return reclaim_suite_from_dict({"name": "r", "kind": "reclaim", **over}, "r.yaml")


def _suite(over: dict[str, Any]) -> Any:
    from aryl_gym.leaderboard.suites import suite_from_dict

    return suite_from_dict({"name": "s", "scenarios": ["tiny"], "seeds": [0], "policies": ["fifo"], **over}, "s.yaml")


def _replace_tiny(changes: dict[str, Any]) -> Any:
    from aryl_gym.config import load_scenario

    return load_scenario("tiny").replace(**changes)


def _scenario_dict(d: dict[str, Any]) -> Callable[[dict[str, str]], Any]:
    def f(files: dict[str, str]) -> Any:
        from aryl_gym.config import scenario_from_dict

        return scenario_from_dict({"name": "x", **d}, source="dict")

    return f


def _generate_num_jobs_0(files: dict[str, str]) -> Any:
    """A config built around the validator (dataclasses.replace) still fails clearly."""
    import dataclasses

    from aryl_gym.config import load_scenario
    from aryl_gym.workload.generator import generate_jobs

    cfg = load_scenario("tiny")
    cfg = dataclasses.replace(cfg, workload=dataclasses.replace(cfg.workload, num_jobs=0))
    return generate_jobs(cfg, np.random.default_rng(0))


API_CASES: list[tuple[str, Callable[[dict[str, str]], Any], list[str]]] = [
    ("api-dup-key", _load_scenario("dupkey"), ["duplicate key 'train_servers'"]),
    ("api-folder", _load_scenario("folder"), ["is a folder"]),
    ("api-binary", _load_scenario("binary"), ["binary"]),
    ("api-algo-dup-key", _load_algo, ["algo.yaml", "duplicate key 'algo'"]),
    ("api-num-jobs-0", _scenario_dict({"workload": {"num_jobs": 0}}), ["workload.num_jobs"]),
    ("api-horizon-str", _scenario_dict({"sim": {"horizon_hours": "2 days"}}), ["sim.horizon_hours"]),
    ("api-horizon-bool", _scenario_dict({"sim": {"horizon_hours": True}}), ["sim.horizon_hours"]),
    ("api-generate-num-jobs-0", _generate_num_jobs_0, ["workload.num_jobs", ">= 1"]),
    ("api-algo-eval-seed", lambda f: _load_algo_file(f, "algo_eval_seed"),
     ["algo_e.yaml", "tiny.eval.seeds[1] must be an integer, got 'x'"]),
    ("api-num-jobs-bool", _scenario_dict({"workload": {"num_jobs": True}}), ["workload.num_jobs must be an integer"]),
    ("api-fast-forward-int", _scenario_dict({"sim": {"fast_forward": 1}}), ["sim.fast_forward must be true or false"]),
    ("api-relaunch-value-str", _scenario_dict({"sim": {"relaunch_overhead_s": {"bert": "slow"}}}),
     ["sim.relaunch_overhead_s.bert must be a number"]),
    ("api-trace-int", _scenario_dict({"workload": {"trace": 7}}), ["workload.trace must be a string"]),
    ("api-headroom-range", _scenario_dict({"inference": {"headroom": 1.5}}), ["inference.headroom must be in [0, 1]"]),
    ("api-replace-bad", lambda f: _replace_tiny({"workload": {"num_jobs": "abc"}}),
     ["<override>: workload.num_jobs must be an integer"]),
    ("api-reclaim-servers", lambda f: _reclaim({"instances": [{"synthetic": 2, "servers": [5, 500]}]}),
     ["r.yaml: instances[0].servers[1] must be <= 400, got 500"]),
    ("api-reclaim-kind-key", lambda f: _reclaim({"instances": [{"snapshots": "a.npz", "seeds": [1]}]}),
     ["unknown key 'seeds' in instances[0]. Allowed keys: optional, snapshots"]),
    ("api-reclaim-empty", lambda f: _reclaim({"instances": []}), ["instances must not be empty"]),
    ("api-suite-empty-name", lambda f: _suite({"scenarios": [""]}), ["scenarios[0].name must not be empty"]),
]


@pytest.mark.parametrize("case_id,fn,expect", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_bad_config(case_id: str, fn: Callable[[dict[str, str]], Any], expect: list[str],
                        files: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as ei:
        fn(files)
    for s in expect:
        assert s in str(ei.value)


# ----------------------------------------------------------------------------------------------
# the env: constructor arguments and reset options (ValueError, documented)
# ----------------------------------------------------------------------------------------------


def _env(**kw: Any) -> Any:
    from aryl_gym.envs.allocation import ArylEnv

    return ArylEnv(scenario="tiny", **kw)


def _reset(options: Any, mode: str = "sequential") -> Callable[[], Any]:
    def f() -> Any:
        return _env(action_mode=mode).reset(seed=0, options=options)

    return f


def _reclaim_reset(options: Any) -> Callable[[], Any]:
    def f() -> Any:
        from aryl_gym.envs.reclaim import ArylReclaimEnv

        return ArylReclaimEnv(scenario="tiny").reset(seed=0, options=options)

    return f


ENV_CASES: list[tuple[str, Callable[[], Any], list[str]]] = [
    ("invalid-penalty-nan", lambda: _env(invalid_penalty=float("nan")), ["invalid_penalty", "finite"]),
    ("invalid-penalty-negative", lambda: _env(invalid_penalty=-1.0), ["invalid_penalty", ">= 0"]),
    ("invalid-penalty-string", lambda: _env(invalid_penalty="1"), ["invalid_penalty"]),
    ("placement-bogus", lambda: _env(placement="bogus"), ["placement", "PlacementOptions"]),
    ("window-huge", lambda: _env(window=10**7), ["window", "at most 4096"]),
    ("window-zero", lambda: _env(window=0), ["window", ">= 1"]),
    ("window-bool", lambda: _env(window=True), ["window"]),
    ("max-workers-zero", lambda: _env(action_mode="targets", max_workers=0), ["max_workers", ">= 1"]),
    ("max-workers-float", lambda: _env(max_workers=2.5), ["max_workers"]),
    ("reward-scale-zero", lambda: _env(reward_scale=0), ["reward_scale", "> 0"]),
    ("reward-scale-nan", lambda: _env(reward_scale=float("nan")), ["reward_scale"]),
    ("episode-seed-float", _reset({"episode_seed": 1.5}), ["episode_seed", "integer", "1.5"]),
    ("episode-seed-negative", _reset({"episode_seed": -1}), ["episode_seed", "[0, 2**63)"]),
    ("episode-seed-string", _reset({"episode_seed": "3"}), ["episode_seed", "integer"]),
    ("reset-unknown-key", _reset({"episode_sed": 3}), ["episode_sed", "allowed keys", "episode_seed"]),
    ("reset-options-not-dict", _reset("seed=3"), ["options", "dict"]),
    ("reset-jobs-not-jobspec", _reset({"jobs": [1, 2]}), ["jobs", "JobSpec"]),
    ("reset-jobs-empty", _reset({"jobs": []}), ["jobs", "at least one"]),
    ("reclaim-reset-unknown-key", _reclaim_reset({"trace": "x"}), ["trace", "allowed keys"]),
    ("vector-num-envs-zero", lambda: gym.make_vec("aryl_gym/Aryl-v1", num_envs=0, scenario="tiny"), ["num_envs", "between 1 and 4096"]),
    ("vector-num-envs-string", lambda: gym.make_vec("aryl_gym/Aryl-v1", num_envs="8", scenario="tiny"), ["num_envs", "whole number"]),
    ("vector-workers-negative", lambda: gym.make_vec("aryl_gym/Aryl-v1", num_envs=2, workers=-1, scenario="tiny"), ["workers"]),
]


@pytest.mark.parametrize("case_id,fn,expect", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_env_bad_arguments(case_id: str, fn: Callable[[], Any], expect: list[str]) -> None:
    with pytest.raises(ValueError) as ei:
        fn()
    for s in expect:
        assert s in str(ei.value), str(ei.value)


# ----------------------------------------------------------------------------------------------
# invalid actions never raise: they count in info["invalid"] and change nothing
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode,action,n_invalid",
    [
        ("sequential", float("inf"), 1),
        ("sequential", float("-inf"), 1),
        ("sequential", float("nan"), 1),
        ("sequential", 1e308, 1),
        ("sequential", 2.5, 1),
        ("sequential", -1, 1),
        ("priority", "five", 4),  # replaced below by a K-vector of 5.0
        ("priority", "huge", 4),
        ("priority", "nan", 4),
        ("targets", "inf", 4),
    ],
)
def test_invalid_actions_are_counted(mode: str, action: Any, n_invalid: int) -> None:
    env = _env(action_mode=mode, window=4)
    env.reset(seed=0, options={"episode_seed": 0})
    if action == "five":
        action = np.full(4, 5.0)
    elif action == "huge":
        action = np.full(4, 1e308)
    elif action == "nan":
        action = np.full(4, np.nan)
    elif action == "inf":
        action = np.full(4, np.inf)
    _, reward, _, _, info = env.step(action)
    assert info["invalid"] == n_invalid
    assert np.isfinite(reward)


def test_priority_in_range_is_valid() -> None:
    env = _env(action_mode="priority", window=4)
    env.reset(seed=0, options={"episode_seed": 0})
    _, _, _, _, info = env.step(np.array([1.0, -1.0, 0.5, 0.0]))
    assert info["invalid"] == 0


def test_integer_numpy_episode_seed_is_accepted() -> None:
    env = _env(action_mode="sequential")
    a, _ = env.reset(options={"episode_seed": np.int64(3)})
    b, _ = env.reset(options={"episode_seed": 3})
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


# ----------------------------------------------------------------------------------------------
# behaviour the hostile pass found silently wrong
# ----------------------------------------------------------------------------------------------


def test_simulate_override_is_applied(capsys: pytest.CaptureFixture[str]) -> None:
    """--train-servers without --trace changes the cluster (it used to be ignored)."""
    import json

    rc, out, _ = run_cli(["simulate", "--scenario", "tiny", "--no-progress", "--json"], capsys)
    assert rc == 0
    base = json.loads(out)
    rc, out, _ = run_cli(
        ["simulate", "--scenario", "tiny", "--no-progress", "--json", "--train-servers", "1"], capsys
    )
    assert rc == 0
    small = json.loads(out)
    assert small["jobs_total"] == base["jobs_total"]
    assert small["avg_jct"] != base["avg_jct"]  # one server instead of the scenario's


def test_demos_prints_the_real_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run_cli(
        ["demos", "--scenario", "tiny", "--policy", "fifo", "--out", str(tmp_path / "d")], capsys
    )
    assert rc == 0, err
    assert f"wrote {tmp_path / 'd.npz'}:" in out
    assert (tmp_path / "d.npz").is_file()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym import __version__

    rc, out, _ = run_cli(["--version"], capsys)
    assert rc == 0 and out.strip() == f"aryl-gym {__version__}"


@pytest.mark.parametrize("cmd", ["simulate", "compare", "evaluate", "demos", "bench", "policies",
                                 "leaderboard", "main", "calibrate", "reclaim-study", "trace-info",
                                 "train"])
def test_every_result_command_takes_json(cmd: str) -> None:
    from aryl_gym.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert "--json" in sub.choices[cmd].format_help()  # type: ignore[union-attr]


def test_policies_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    rc, out, _ = run_cli(["policies", "--json"], capsys)
    assert rc == 0
    d = json.loads(out)
    assert "fifo" in d and "aryl" in d


def test_one_default_scenario() -> None:
    from aryl_gym.cli import build_parser
    from aryl_gym.commands._common import DEFAULT_SCENARIO

    assert DEFAULT_SCENARIO == "testbed"
    parser = build_parser()
    for cmd in ("simulate", "compare", "demos"):
        args = parser.parse_args([cmd] + (["--out", "x"] if cmd == "demos" else []))
        assert args.scenario == DEFAULT_SCENARIO, cmd


def test_out_of_memory_message(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A MemoryError anywhere in a command becomes exit 2 and says how much memory is needed."""
    import aryl_gym.sim.engine as engine

    def boom(*a: Any, **k: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(engine.Simulator, "run", boom)
    rc, _, err = run_cli(["simulate", "--scenario", "production", "--no-progress"], capsys)
    assert rc == 2 and "Traceback" not in err
    assert "out of memory" in err and "MB of address space" in err and "'production'" in err


def test_simulate_without_overrides_is_the_scenario_episode() -> None:
    """Applying (no) overrides does not change the episode: same jobs as make_episode(name, seed)."""
    import argparse

    from aryl_gym.commands.simulate import load_episode
    from aryl_gym.scenario import make_episode

    args = argparse.Namespace(scenario="testbed", data_root=None, trace=None)
    a = load_episode(args, 7)
    b = make_episode("testbed", 7)
    assert a.jobs == b.jobs
    np.testing.assert_array_equal(a.simulator().loan.util, b.simulator().loan.util)


def test_yaml_integers_load_into_float_fields(tmp_path: Path) -> None:
    """Strict mode with one allowance: an integer where a number is expected becomes a float."""
    from aryl_gym.config import load_scenario

    p = _write(tmp_path / "ints.yaml", "name: ints\nworkload: {load: 1, duration_hours: 2}\nsim: {interval: 30}\n")
    cfg = load_scenario(str(p))
    assert cfg.workload.load == 1.0 and isinstance(cfg.workload.load, float)
    assert isinstance(cfg.sim.interval, float) and cfg.sim.interval == 30.0
    assert isinstance(cfg.cluster.train_servers, int)


def test_every_shipped_config_validates() -> None:
    """Every scenario, suite and algorithm file in configs/ passes its schema."""
    from aryl_gym.config import configs_dir, list_scenarios, load_scenario
    from aryl_gym.leaderboard.suites import list_suites, load_suite
    from aryl_gym.train.config import load_train_config

    for name in list_scenarios():
        load_scenario(name)
    for name in list_suites():
        text = (configs_dir() / "suites" / f"{name}.yaml").read_text()
        if "kind: reclaim" in text:
            continue
        load_suite(name, allow_missing=True)
    for algo in ("ppo", "maskable_ppo"):
        for scen in ("tiny", "testbed"):
            load_train_config(algo, scen)
