"""average_checkpoints.py: the mean of checkpoints' weights, checkpoint selection from a
run folder, the config copied beside the average, and clear errors."""

from __future__ import annotations

import pytest

pytest.importorskip("sb3_contrib")

import average_checkpoints as ac  # noqa: E402
import gymnasium as gym
import torch as th
from sb3_contrib import MaskablePPO

import aryl_gym  # noqa: F401
from aryl_gym.train.setpolicy import MaskableSetPolicy


def _model(seed: int) -> MaskablePPO:
    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=4)
    return MaskablePPO(MaskableSetPolicy, env, seed=seed, device="cpu",
                       policy_kwargs={"features_extractor_kwargs": {"embed_dim": 8}})


def _run(tmp_path, seeds=(0, 1, 2), steps=(100, 200, 300)):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("algo: maskable_ppo\nenv_kwargs: {action_mode: sequential, window: 4}\n")
    models = []
    for s, n in zip(seeds, steps):
        m = _model(s)
        m.save(str(run / "checkpoints" / f"rl_model_{n}_steps.zip"))
        models.append(m)
    return run, models


def test_the_average_is_the_mean_of_every_weight(tmp_path, capsys):
    run, models = _run(tmp_path)
    out = tmp_path / "avg.zip"
    assert ac.main([str(run), "--from", "200", "--to", "300", "--out", str(out)]) == 0
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    assert out.with_suffix(".yaml").read_text().startswith("algo: maskable_ppo")
    got = MaskablePPO.load(str(out), device="cpu").policy.state_dict()
    sd1, sd2 = models[1].policy.state_dict(), models[2].policy.state_dict()
    for k, v in got.items():
        if v.is_floating_point():
            assert th.allclose(v, (sd1[k] + sd2[k]) / 2, atol=1e-6), k
    # the checkpoints really differ, so the mean is not one of them
    k = next(k for k, v in got.items() if v.is_floating_point() and not th.equal(sd1[k], sd2[k]))
    assert not th.equal(got[k], sd1[k]) and not th.equal(got[k], sd2[k])


def test_selection_from_a_run_folder(tmp_path):
    run, _ = _run(tmp_path)
    names = [p.name for p in ac.run_checkpoints(run, 100, 300, every=200)]
    assert names == ["rl_model_100_steps.zip", "rl_model_300_steps.zip"]
    with pytest.raises(ValueError, match=r"no checkpoint between 400 and 500 steps \(it has: 100, 200, 300\)"):
        ac.run_checkpoints(run, 400, 500)


def test_different_networks_and_bad_arguments_are_clear_errors(tmp_path, capsys):
    a = _model(0).policy.state_dict()
    b = {k: v for k, v in a.items()}
    name = next(iter(b))
    b[name] = th.zeros(3, 3)
    with pytest.raises(ValueError, match="different network"):
        ac.average_state_dicts([a, b])
    assert ac.main([str(tmp_path / "nope.zip"), "--out", str(tmp_path / "x.zip")]) == 2
    assert "no such checkpoint file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ac.main([str(tmp_path), "--out", str(tmp_path / "x.txt")])
