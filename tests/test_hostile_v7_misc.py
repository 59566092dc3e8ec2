"""Hostile-user pass (v7), small gaps where input was accepted or a call did nothing without a
word: flap damping's ``engage_share: 1``, the two-agent view's ``close()``, unknown families in
``sim.relaunch_overhead_s``, behaviour cloning on demonstrations of another scenario, the
leaderboard's second load of ``--agent`` agents, and ``demos --author ''``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from aryl_gym.config import ConfigError, generated_families, load_scenario, scenario_from_dict
from aryl_gym.envs.damping import DampingParams, FlapDamping, parse_flap_damping
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


# -- 1. flap damping: engage_share 1 could never be exceeded -------------------------------------
@pytest.mark.parametrize("share", [1, 1.0, np.float64(1.0)])
def test_engage_share_one_is_refused(share: Any) -> None:
    msg = "flap_damping.engage_share must be in [0, 1)"
    with pytest.raises(ValueError, match=re.escape(msg)):  # was: accepted, the shield never engaged
        parse_flap_damping({"engage_share": share})
    with pytest.raises(ValueError, match=re.escape(msg)):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", flap_damping={"engage_share": share})


def test_engage_share_below_one_engages_when_exceeded() -> None:
    p = parse_flap_damping({"engage_share": 0.999, "engage_window_s": 60})
    assert p == DampingParams(engage_share=0.999, engage_window_s=60.0)
    d = FlapDamping(p, n_jobs=1)
    assert not d.engaged
    d.observe(0.0, 0.0, 0.0)
    d.observe(60.0, 100.0, 100.0)  # every allocated GPU-second went to overheads: share 1 > 0.999
    assert d.engaged and d.engaged_at == 60.0
    assert parse_flap_damping({"engage_share": 0}) == DampingParams(engage_share=0.0)  # from the start


# -- 2. the two-agent view's close() ---------------------------------------------------------------
def _first_valid(env: Any) -> dict[str, int]:
    agent = env.active
    return {agent: int(np.flatnonzero(env.action_masks(agent))[0])}


def test_two_agent_close_closes_its_env_and_plays_on_like_aryl_v2(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pettingzoo")
    from aryl_gym.envs.multiagent import ArylParallelEnv

    env = ArylParallelEnv(scenario="tiny")
    closed: list[int] = []
    real_close = env.alloc.close
    monkeypatch.setattr(env.alloc, "close", lambda: (closed.append(1), real_close())[1])
    env.reset(seed=0)
    env.close()
    env.close()  # idempotent
    assert closed == [1, 1]  # the owned allocation env is closed each time, without error
    # ArylEnv.close() releases nothing and its env stays usable: the view matches it
    single = gym.make("aryl_gym/Aryl-v2", scenario="tiny")
    single.reset(seed=0)
    single.close()
    a = int(np.flatnonzero(single.unwrapped.action_masks())[0])
    single.step(a)  # no error after close
    fresh = ArylParallelEnv(scenario="tiny")
    fresh.reset(seed=0)
    act = _first_valid(env)
    assert act == _first_valid(fresh)
    r_closed = env.step(act)[1]
    assert r_closed == fresh.step(act)[1]
    env.reset(seed=1)  # and reset too


# -- 3. sim.relaunch_overhead_s: families that no generated job has ---------------------------------
def test_relaunch_overhead_unknown_family_is_refused() -> None:
    with pytest.raises(ConfigError) as err:  # was: ignored, bert jobs paid the default 60 s
        scenario_from_dict({"name": "a", "sim": {"relaunch_overhead_s": {"bert": 250, "bret": 10}}})
    msg = str(err.value)
    assert "sim.relaunch_overhead_s: unknown job family 'bret'" in msg
    assert all(f in msg for f in generated_families()) and "gnmt16" in msg and "transformer" in msg
    with pytest.raises(ConfigError, match="unknown job family 'RESNET50'"):
        load_scenario("tiny").replace(sim={"relaunch_overhead_s": {"RESNET50": 1}})


def test_relaunch_overhead_known_families_and_trace_families_are_accepted() -> None:
    cfg = load_scenario("tiny").replace(sim={"relaunch_overhead_s": {"cnn": 5.0, "bert": 7.0}})
    assert cfg.sim.relaunch_for("cnn") == 5.0 and cfg.sim.relaunch_for("gan") == cfg.sim.default_relaunch_overhead_s
    # a trace's families are its model names: any key is kept (pollux-w6 replays a Pollux trace)
    tr = load_scenario("pollux-w6").replace(sim={"relaunch_overhead_s": {"cifar10": 30.0, "mymodel": 5.0}})
    assert tr.sim.relaunch_for("mymodel") == 5.0
    # the same key without the trace is refused
    with pytest.raises(ConfigError, match="unknown job family 'cifar10'"):
        tr.replace(workload={"trace": None, "trace_format": None})


def test_relaunch_overhead_typo_in_a_scenario_file_is_a_cli_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: a\nsim: {relaunch_overhead_s: {vgg61: 150}}\n")
    rc, _, err = _run(["simulate", "--scenario", str(f), "--policy", "fifo", "--seed", "0"], capsys)
    assert rc == 2 and "unknown job family 'vgg61'" in err and "vgg16" in err


# -- 4. behaviour cloning checks the demonstrations' scenario hash --------------------------------
def _demos(path: Path, scenario: str | None) -> Path:
    from aryl_gym.offline import scenario_hash

    arrays: dict[str, Any] = {"obs_x": np.zeros((3, 2), np.float32), "actions": np.zeros(3, np.int64)}
    if scenario is not None:  # as `aryl-gym demos` stores them
        arrays.update(scenario=np.asarray(scenario), config_hash=np.asarray(scenario_hash(scenario)))
    np.savez(path, **arrays)
    return path


def test_demos_of_another_scenario_are_refused(tmp_path: Path) -> None:
    from aryl_gym.offline import scenario_hash
    from aryl_gym.train.bc import check_demos_scenario, demos_scenario

    f = _demos(tmp_path / "d.npz", "tiny")
    assert demos_scenario(f) == ("tiny", scenario_hash("tiny"))
    check_demos_scenario(f, "tiny")  # the same scenario: fine
    check_demos_scenario(f, load_scenario("tiny"))
    with pytest.raises(ConfigError) as err:  # was: cloned without a word
        check_demos_scenario(f, "testbed")
    msg = str(err.value)
    assert "recorded in scenario tiny" in msg and scenario_hash("tiny") in msg
    assert "trains on scenario testbed" in msg and scenario_hash("testbed") in msg
    assert "--bc-any-scenario" in msg
    # the same name with a changed configuration is another scenario too
    with pytest.raises(ConfigError, match="trains on scenario tiny"):
        check_demos_scenario(f, load_scenario("tiny").replace(sim={"interval": 30.0}))
    # demonstrations without a stored hash (collect_demos, older files): nothing to compare
    g = _demos(tmp_path / "old.npz", None)
    assert demos_scenario(g) == (None, None)
    check_demos_scenario(g, "testbed")


def test_minari_demos_of_another_scenario_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("minari")
    from aryl_gym import offline
    from aryl_gym.train.bc import check_demos_scenario, demos_scenario

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    offline.write_dataset("t/tiny/fifo-v0", "tiny", "fifo", episodes=1, seed=0)
    assert demos_scenario("minari:t/tiny/fifo-v0") == ("tiny", offline.scenario_hash("tiny"))
    check_demos_scenario("minari:t/tiny/fifo-v0", "tiny")
    with pytest.raises(ConfigError, match="minari:t/tiny/fifo-v0: recorded in scenario tiny .* trains on "
                                          "scenario testbed"):
        check_demos_scenario("minari:t/tiny/fifo-v0", "testbed")


def test_training_preflight_checks_the_demos_scenario(tmp_path: Path) -> None:
    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import preflight

    f = _demos(tmp_path / "d.npz", "testbed")
    cfg = load_train_config("maskable_ppo_set", "tiny", {"bc": {"demos": str(f)}})
    with pytest.raises(ConfigError, match="recorded in scenario testbed .* trains on scenario tiny"):
        preflight(cfg)
    over = load_train_config("maskable_ppo_set", "tiny", {"bc": {"demos": str(f)}, "scenario_overrides":
                                                          {"sim": {"interval": 30.0}}})
    with pytest.raises(ConfigError, match=r"trains on scenario tiny with scenario_overrides"):
        preflight(over)
    # the explicit override clones them anyway; without demos it is refused (nothing to apply to)
    preflight(load_train_config("maskable_ppo_set", "tiny", {"bc": {"demos": str(f), "any_scenario": True}}))
    with pytest.raises(ConfigError, match=re.escape("bc.any_scenario (--bc-any-scenario) applies to bc.demos")):
        preflight(load_train_config("maskable_ppo_set", "tiny", {"bc": {"any_scenario": True}}))


def test_bc_any_scenario_flag_reaches_the_config(tmp_path: Path) -> None:
    import argparse

    from aryl_gym.commands import train as train_cmd

    p = argparse.ArgumentParser()
    train_cmd.add_arguments(p)
    f = _demos(tmp_path / "d.npz", "testbed")
    base = ["--config", "maskable_ppo_set", "--scenario", "tiny", "--bc-demos", str(f)]
    on = train_cmd.build_config(p.parse_args(base + ["--bc-any-scenario"]))
    off = train_cmd.build_config(p.parse_args(base))
    assert on.bc.any_scenario is True and off.bc.any_scenario is False
    # a run's saved config keeps the key only when set (configs saved before it existed, the
    # shipped agents' among them, stay the same), and reads back either way
    from aryl_gym.train.config import config_from_run_dict

    assert "any_scenario" not in off.to_dict()["bc"] and on.to_dict()["bc"]["any_scenario"] is True
    assert config_from_run_dict(on.to_dict(), "<run>").bc.any_scenario is True
    assert config_from_run_dict(off.to_dict(), "<run>").bc.any_scenario is False


# -- 5. the leaderboard loads an --agent agent once ------------------------------------------------
SUITE = {"name": "hz7", "scenarios": ["tiny"], "seeds": [0], "baseline": "fifo", "policies": ["fifo"]}


def test_leaderboard_loads_a_named_agent_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aryl_gym.leaderboard.runner as runner
    from aryl_gym.leaderboard import run_leaderboard, suite_from_dict

    loads: list[str] = []
    real = runner.preload_agent
    monkeypatch.setattr(runner, "preload_agent", lambda src: (loads.append(src), real(src))[1])
    mod = tmp_path / "v7_agent.py"
    mod.write_text("def make(env):\n    return object()  # no predict: the episode fails at once\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    res = run_leaderboard(suite_from_dict(SUITE).with_agents({"mine": "v7_agent:make"}), tmp_path / "out",
                          plots=False, tensorboard=False, progress=False, workers=1, log=lambda m: None)
    assert loads == ["v7_agent:make"]  # was: twice (run_leaderboard, then run_suite)
    assert [k[-1] for k, _ in res.summary.failed] == ["mine"]


def test_run_suite_alone_still_checks_named_agents(tmp_path: Path) -> None:
    from aryl_gym.leaderboard import run_suite, suite_from_dict
    from aryl_gym.leaderboard.runner import AgentLoadError

    out = tmp_path / "out"
    with pytest.raises(AgentLoadError, match="--agent mine=os:nope: cannot load this agent"):
        run_suite(suite_from_dict(SUITE).with_agents({"mine": "os:nope"}), out, progress=False,
                  log=lambda m: None)
    assert not out.exists()  # refused before the folder was made


# -- 6. demos --author '' --------------------------------------------------------------------------
@pytest.mark.parametrize("author", ["", "   ", "\t"])
def test_demos_empty_author_is_refused(author: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["demos", "--format", "minari", "--minari-path", str(tmp_path), "--author", author,
                         "--scenario", "tiny"], capsys)
    assert rc == 2 and "argument --author: is empty" in err  # was: a dataset with author ''
    assert not out and not any(tmp_path.iterdir())


def test_demos_author_names_are_kept() -> None:
    from aryl_gym.commands.demos import author_arg

    assert author_arg("Ada Lovelace") == "Ada Lovelace"
