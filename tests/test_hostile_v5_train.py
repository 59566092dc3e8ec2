"""Hostile-user pass over training runs (v5): worlds, pairing, evaluation during training,
run folders, interrupted and failing runs. Each test failed on the code before its fix."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest

import aryl_gym  # noqa: F401
from aryl_gym.config import ConfigError
from aryl_gym.train.config import load_train_config
from aryl_gym.train.worlds import WorldSampler, check_worlds_fit

ROOT = Path(__file__).resolve().parent.parent

SMALL = textwrap.dedent("""\
    algo: maskable_ppo
    default:
      env_kwargs: {action_mode: sequential}
      n_envs: 2
      total_timesteps: 128
      policy_kwargs: {net_arch: [16]}
      hyperparams: {n_steps: 32, batch_size: 32, n_epochs: 1}
      checkpoint_freq: 0
      eval: {freq: 64, seeds: [1000], references: [fifo]}
    """)


def _small(tmp_path: Path, scenario: str = "tiny", **over):
    p = tmp_path / "small.yaml"
    p.write_text(SMALL)
    return load_train_config(p, scenario, over or None)


def _runs(out: Path) -> list[Path]:
    return sorted(d for d in out.iterdir() if d.is_dir()) if out.exists() else []


# -- worlds -------------------------------------------------------------------------------------
def test_empty_worlds_in_a_scenario_section_turns_the_defaults_worlds_off():
    """The recipes' tiny sections write ``worlds: {}``; the deep merge kept the default's worlds,
    so a tiny run drew 3-5 training servers (tiny has 2) and loads tiny ignores."""
    for name in ("maskable_ppo_set", "maskable_ppo_scratch", "maskable_ppo_v2"):
        assert dict(load_train_config(name, "tiny").worlds) == {}
        assert load_train_config(name, "testbed").worlds  # the other sections keep them


def test_a_world_knob_the_scenario_does_not_follow_is_refused():
    """tiny fixes num_jobs: worlds.load changed nothing (every world the same jobs); a trace
    ignores duration_hours. Was: accepted and silently ignored."""
    with pytest.raises(ConfigError, match=r"worlds\.load: scenario 'tiny' fixes workload\.num_jobs"):
        WorldSampler("aryl_gym/Aryl-v2", "tiny", {"load": [0.8, 1.4]}, action_mode="sequential")
    with pytest.raises(ConfigError, match=r"scenarios\[1\]\.duration_hours: scenario 'tiny'"):
        check_worlds_fit({"scenarios": ["testbed", {"scenario": "tiny", "duration_hours": 1}]}, "testbed")
    with pytest.raises(ConfigError, match=r"scenarios\[1\]\.load: .*move load into the entries"):
        check_worlds_fit({"load": [0.8, 1.2], "scenarios": ["testbed", "tiny"]}, "testbed")
    # what tiny does follow still works; an entry's own load on a generated scenario too
    check_worlds_fit({"train_servers": [1, 2], "elastic_fraction": [0.0, 0.5]}, "tiny")
    check_worlds_fit({"scenarios": [{"scenario": "testbed", "load": [0.8, 1.2]}, "tiny"]}, "testbed")


def test_a_range_the_scenario_rejects_fails_before_the_run_folder(tmp_path):
    """elastic_fraction [0.5, 1.5]: was an error at the first episode that drew > 1, after the
    run folder was made (a narrow overshoot: hours into the run)."""
    from aryl_gym.train.runner import train

    out = tmp_path / "runs"
    cfg = _small(tmp_path, "testbed", worlds={"elastic_fraction": [0.5, 1.5]})
    with pytest.raises(ConfigError, match=r"worlds\.elastic_fraction: scenario 'testbed' rejects elastic_fraction 1\.5"):
        train(cfg, out=out, verbose=0)
    assert _runs(out) == []
    with pytest.raises(ConfigError, match=r"worlds\.train_servers: .*200000"):
        check_worlds_fit({"train_servers": [3, 200_000]}, "testbed")


def test_dagger_worlds_are_checked_before_the_rl_phase(tmp_path):
    from aryl_gym.train.runner import train

    out = tmp_path / "runs"
    cfg = load_train_config("maskable_ppo_set", "tiny", {
        "dagger": {"rounds": 1, "policy": "aryl", "worlds": {"load": [1.1, 1.4]}}})
    with pytest.raises(ConfigError, match=r"dagger\.worlds .*load: scenario 'tiny'"):
        train(cfg, out=out, verbose=0)
    assert _runs(out) == []


# -- pairing and evaluation settings ------------------------------------------------------------
def test_pair_repeats_without_pairing_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"pair_repeats \(4\) needs trace pairing, pair_group >= 2 \(found 1"):
        _small(tmp_path, pair_group=1, pair_repeats=4)
    assert _small(tmp_path, pair_group=2, pair_repeats=4).pair_repeats == 4


def test_eval_seeds_empty_or_listed_twice_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"eval\.seeds is empty but eval\.freq is 64"):
        _small(tmp_path, eval={"seeds": []})
    assert _small(tmp_path, eval={"seeds": [], "freq": 0}).eval.seeds == ()  # evaluation off
    with pytest.raises(ConfigError, match=r"eval\.seeds: seed 1000 is listed twice"):
        _small(tmp_path, eval={"seeds": [1000, 1001, 1000]})
    with pytest.raises(ConfigError, match=r"eval\.scenarios\.big\.seeds: seed 7 is listed twice"):
        _small(tmp_path, eval={"scenarios": {"big": {"scenario": "testbed", "seeds": [7, 7]}}})


# -- run folders ----------------------------------------------------------------------------------
def test_two_runs_racing_for_one_name_get_two_folders(tmp_path, monkeypatch):
    """Both processes passed the old exists() check in the same second; the second's mkdir then
    failed with "File exists"."""
    from aryl_gym.train import runner

    cfg = _small(tmp_path)
    monkeypatch.setattr(runner, "run_name", lambda c: "tiny__maskable_ppo__0__20260101-000000")
    first = runner.new_run_dir(cfg, tmp_path / "runs")
    monkeypatch.setattr(Path, "exists", lambda self: False)  # the other process has not made it yet
    second = runner.new_run_dir(cfg, tmp_path / "runs")
    assert second != first and second.name == first.name + "-1" and second.is_dir()


# -- interrupted and failing runs ---------------------------------------------------------------
def test_a_run_failing_mid_way_saves_a_checkpoint(tmp_path, monkeypatch):
    """Was: only Ctrl-C saved; any error lost the steps since the last checkpoint."""
    from aryl_gym.train import callbacks
    from aryl_gym.train.runner import saved_steps, train

    def boom(self):
        if self.num_timesteps >= 64:
            raise RuntimeError("env exploded")
        return True

    monkeypatch.setattr(callbacks.ClusterMetricsCallback, "_on_step", boom)
    out = tmp_path / "runs"
    with pytest.raises(RuntimeError, match="env exploded"):
        train(_small(tmp_path, eval={"freq": 0}), out=out, verbose=0)
    (run,) = _runs(out)
    cks = list((run / "checkpoints").glob("rl_model_*_steps.zip"))
    assert len(cks) == 1 and saved_steps(cks[0]) == 64


def test_a_dead_background_worker_is_reported_and_its_rows_kept(tmp_path, monkeypatch, capsys):
    """Was: BrokenProcessPool ended the training run (no model.zip, rows missing)."""
    from aryl_gym.train import async_eval
    from aryl_gym.train.runner import train

    class DeadPool:
        def submit(self, *a, **k):
            fut: Future = Future()
            fut.set_exception(BrokenProcessPool("A child process terminated abruptly"))
            return fut

        def shutdown(self, *a, **k):
            pass

    monkeypatch.setattr(async_eval.AsyncArylEvalCallback, "_executor", lambda self: DeadPool())
    out = tmp_path / "runs"
    res = train(_small(tmp_path, eval={"background": True}), out=out, verbose=0)
    assert res.model_path.is_file()
    with open(res.run_dir / "eval.csv", newline="") as fh:
        steps = [int(float(r["timesteps"])) for r in csv.DictReader(fh)]
    assert steps == [0, 64, 128]
    assert "background evaluation worker failed at the evaluation of step 0" in capsys.readouterr().err


SIGTERM_RUN = """
import os, signal, sys
from aryl_gym.train import callbacks
from aryl_gym.train.config import load_train_config
from aryl_gym.train.runner import train

def term(self):
    if self.num_timesteps == 64:
        os.kill(os.getpid(), signal.SIGTERM)
    return True

callbacks.ClusterMetricsCallback._on_step = term
train(load_train_config(sys.argv[1], "tiny"), out=sys.argv[2], verbose=0)
"""


@pytest.mark.slow  # a training subprocess, killed and resumed: 5 s, the fast tier's longest test
def test_sigterm_saves_a_checkpoint_that_resumes(tmp_path):
    """Was: SIGTERM (a scheduler's stop) killed the run at once, nothing saved since the last
    checkpoint."""
    from aryl_gym.train.runner import train

    (tmp_path / "small.yaml").write_text(SMALL)
    out = tmp_path / "runs"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", SIGTERM_RUN, str(tmp_path / "small.yaml"), str(out)],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert p.returncode != -signal.SIGTERM, p.stderr  # was: killed by the signal
    assert "interrupted at 64 steps" in p.stderr and "KeyboardInterrupt" in p.stderr
    (run,) = _runs(out)
    ck = run / "checkpoints" / "rl_model_64_steps.zip"
    assert ck.is_file()
    res = train(_small(tmp_path, total_timesteps=128), out=out, resume=ck, verbose=0)
    assert res.run_dir == run and res.num_timesteps == 128
