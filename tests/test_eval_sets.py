"""Evaluation during training on more than one set (``eval.scenarios``): the sets' columns, the
score that selects the best model, and the clear errors of a bad section."""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import pytest

pytest.importorskip("stable_baselines3")

from aryl_gym.config import ConfigError
from aryl_gym.metrics import EpisodeResult
from aryl_gym.train.config import build_config, check_eval_sets

_BASE: dict = {}


def _result(seed: int, avg_jct: float, unfinished: int = 0) -> tuple[EpisodeResult, float, int]:
    if "r" not in _BASE:
        from aryl_gym.agents import make_policy

        from aryl_gym.scenario import make_episode

        _BASE["r"] = make_episode("tiny", 0).simulator().run(make_policy("fifo")).to_dict()
    d = dict(_BASE["r"])
    d.update(seed=seed, avg_jct=avg_jct, jobs_unfinished=unfinished)
    return EpisodeResult.from_dict(d), 0.0, 10


def _callback(tmp_path):
    from stable_baselines3.common.logger import configure

    from aryl_gym.train.callbacks import ArylEvalCallback

    cb = ArylEvalCallback(lambda: None, "tiny", [1, 2], references=["aryl"], run_dir=tmp_path, verbose=1,
                          extra=[("big", lambda: None, "tiny", [7])])
    cb.references = {"aryl": {"avg_jct": 100.0}}
    cb.extra_references = {"big": {"aryl": {"avg_jct": 1000.0}}}
    cb.model = SimpleNamespace(logger=configure(None, [""]))  # the logger is the model's
    return cb


def test_score_is_the_geometric_mean_of_each_sets_ratio_and_selects_the_best(tmp_path, capsys):
    cb = _callback(tmp_path)
    saved: list[int] = []

    def save(path, k=None):
        saved.append(len(cb.history))

    # main set 0.9x Aryl, big set 1.6x: score sqrt(0.9 * 1.6) = 1.2
    row = cb._record([_result(1, 80.0), _result(2, 100.0), _result(7, 1600.0)], 100, 1.0, save)
    assert row["avg_jct"] == pytest.approx(90.0)  # the main set's columns are as before
    assert row["jct_ratio_to_aryl"] == pytest.approx(0.9)
    assert row["big_avg_jct"] == pytest.approx(1600.0) and row["big_aryl_avg_jct"] == 1000.0
    assert row["big_jct_ratio_to_aryl"] == pytest.approx(1.6)
    assert row["score"] == pytest.approx(math.sqrt(0.9 * 1.6))
    assert saved == [1]
    # the console line shows the main set's JCT (not the score) and each set's ratio
    line = capsys.readouterr().out
    assert "avg JCT 90 s" in line and "big 1.600x aryl" in line and "score 1.200" in line
    # a lower main-set JCT but a much worse big set is not a new best (avg_jct alone would say so)
    cb._record([_result(1, 50.0), _result(2, 50.0), _result(7, 3000.0)], 200, 1.0, save)
    assert saved == [1]
    # better on both: best
    cb._record([_result(1, 85.0), _result(2, 85.0), _result(7, 1100.0)], 300, 1.0, save)
    assert saved == [1, 3]
    # an unfinished job in the big set: never best, however low the score
    cb._record([_result(1, 10.0), _result(2, 10.0), _result(7, 10.0, unfinished=2)], 400, 1.0, save)
    assert saved == [1, 3]
    with open(tmp_path / "eval.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["timesteps"]) for r in rows] == [100, 200, 300, 400]
    assert float(rows[2]["score"]) == pytest.approx(math.sqrt(0.85 * 1.1))
    # a resumed run reads the best score back, not the main set's avg_jct
    cb2 = _callback(tmp_path)
    cb2.reference_names = []  # nothing to run natively
    cb2.extra_references = {"big": {}}
    cb2._init_callback()
    assert cb2.best_avg_jct == pytest.approx(math.sqrt(0.85 * 1.1))


def test_extra_sets_need_a_reference():
    from aryl_gym.train.callbacks import ArylEvalCallback

    with pytest.raises(ValueError, match="reference"):
        ArylEvalCallback(lambda: None, "tiny", [1], references=[], extra=[("big", lambda: None, "tiny", [7])])


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"big": {"scenario": "basic"}}, "seeds"),
        ({"big": {"scenario": "basic", "seeds": []}}, "seeds"),
        ({"big": {"scenario": "basic", "seeds": [-1]}}, "seeds"),
        ({"big": {"scenario": "nosuch", "seeds": [1]}}, "nosuch"),
        ({"big": {"scenario": "basic", "seeds": [1], "overrides": {"workload": {"lod": 1}}}}, "big"),
        ({"big": {"scenario": "basic", "seeds": [1], "seed": 3}}, "unknown key"),
        ({"2big": {"scenario": "basic", "seeds": [1]}}, "label"),
        ({"big": ["basic"]}, "big"),
    ],
)
def test_bad_eval_sets_are_clear_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        check_eval_sets(bad)


def test_eval_sets_in_a_config_need_references_and_round_trip():
    sets = {"basic": {"scenario": "basic", "seeds": [1100, 1101], "overrides": {"workload": {"load": 1.3}}}}
    cfg = build_config("maskable_ppo", "testbed", {"eval": {"scenarios": sets, "references": ["aryl"]}})
    assert cfg.to_dict()["eval"]["scenarios"] == sets
    with pytest.raises(ConfigError, match="references"):
        build_config("maskable_ppo", "testbed", {"eval": {"scenarios": sets, "references": []}})


def test_eval_sets_build_their_own_envs_and_references():
    from aryl_gym.train.runner import eval_sets

    sets = {"big": {"scenario": "testbed", "seeds": [5], "overrides": {"workload": {"load": 1.2}}}}
    cfg = build_config("maskable_ppo", "tiny", {"eval": {"scenarios": sets, "references": ["aryl"]},
                                                "env_kwargs": {"action_mode": "sequential"}})
    ((label, maker, scen, seeds),) = eval_sets(cfg)
    assert label == "big" and seeds == [5]
    assert scen.name == "testbed" and scen.workload.load == 1.2
    env = maker()
    env.reset(options={"episode_seed": 5})
    assert env.unwrapped.episode.config.cluster.train_servers == scen.cluster.train_servers
    assert env.unwrapped.episode.config.workload.load == 1.2


@pytest.mark.slow
@pytest.mark.parametrize("background", [False, True])
def test_a_tiny_run_evaluates_every_set_in_process_and_in_the_background(tmp_path, background):
    from aryl_gym.train.runner import train

    sets = {"loaded": {"scenario": "tiny", "seeds": [1001], "overrides": {"workload": {"load": 1.2}}}}
    cfg = build_config("maskable_ppo", "tiny", {
        "env_kwargs": {"action_mode": "sequential", "stall_hours": 2}, "n_envs": 2, "total_timesteps": 512,
        "policy_kwargs": {"net_arch": [16, 16]}, "hyperparams": {"n_steps": 128, "batch_size": 64, "n_epochs": 1},
        "checkpoint_freq": 0,
        "eval": {"freq": 256, "seeds": [1000], "references": ["aryl", "fifo"], "scenarios": sets,
                 "background": background},
    })
    res = train(cfg, out=tmp_path / "runs", verbose=0)
    with open(res.run_dir / "eval.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 2
    from aryl_gym.train.evaluation import run_reference

    aryl = run_reference("aryl", cfg.scenario, 1000).avg_jct
    from aryl_gym.config import load_scenario

    loaded = run_reference("aryl", load_scenario("tiny").replace(workload={"load": 1.2}), 1001).avg_jct
    for r in rows:
        assert float(r["aryl_avg_jct"]) == pytest.approx(aryl)
        assert float(r["loaded_aryl_avg_jct"]) == pytest.approx(loaded)
        want = math.sqrt(float(r["jct_ratio_to_aryl"]) * float(r["loaded_avg_jct"]) / loaded)
        assert float(r["score"]) == pytest.approx(want)
