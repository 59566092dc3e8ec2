"""The RLlib backend (``aryl-gym train --backend rllib``, issue 35): the config mapping, argument
errors, the masked RLModule, RLlib checkpoints as agents; one slow short training run on
``tiny`` that must beat the random policy on paired seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from aryl_gym.agents.learned import rllib_module_dir

from aryl_gym.config import ConfigError
from aryl_gym.train.config import load_train_config
from aryl_gym.train.rllib_backend import rllib_settings


@pytest.fixture(scope="module")
def rllib() -> Any:
    """``aryl_gym.train.rllib_module`` (imports ray.rllib and torch once for the module)."""
    pytest.importorskip("torch")
    pytest.importorskip("ray.rllib", reason="needs the rllib extra (pip install 'aryl-gym[rllib]')")
    import aryl_gym.train.rllib_module as mod

    return mod


def _tiny_env() -> Any:
    import gymnasium as gym

    return gym.make("aryl_gym/Aryl-v2", scenario="tiny", action_mode="sequential")


# ---------------------------------------------------------------------------------------------
# the config
# ---------------------------------------------------------------------------------------------
def test_settings_map_maskable_ppo_hyperparams() -> None:
    cfg = load_train_config("maskable_ppo", scenario="tiny")
    st = rllib_settings(cfg)
    tr = st["training"]
    # tiny: n_steps 256 x n_envs 2 per update, batch 128; the rest from `default`
    assert tr["train_batch_size_per_learner"] == 512 == st["train_batch_size"]
    assert st["num_envs_per_env_runner"] == 2
    assert (tr["minibatch_size"], tr["num_epochs"]) == (128, 5)
    assert (tr["lr"], tr["gamma"], tr["lambda_"]) == (3.0e-4, 0.995, 0.95)
    assert (tr["entropy_coeff"], tr["clip_param"], tr["vf_loss_coeff"], tr["grad_clip"]) == (0.01, 0.2, 0.5, 0.5)
    # MaskablePPO has no KL penalty and no clipped value loss
    assert tr["use_kl_loss"] is False and tr["vf_clip_param"] == float("inf")
    assert st["model_config"] == {"hiddens": [64, 64], "activation": "tanh"}
    lin = rllib_settings(load_train_config("maskable_ppo", scenario="tiny",
                                           overrides={"hyperparams": {"learning_rate": "lin_1.0e-3"}}))
    assert lin["training"]["lr"] == [[0, 1.0e-3], [20000, 0.0]]


@pytest.mark.parametrize("config,scenario,overrides,expect", [
    # testbed's section sets target_kl (SB3 stops an update's epochs early): no counterpart
    ("maskable_ppo", "testbed", None, "--set target_kl=null"),
    ("ppo", "tiny", None, "not algo 'ppo'"),
    ("maskable_ppo_set", "tiny", None, "policy 'MaskableSetPolicy'"),
    ("maskable_ppo", "tiny", {"env_kwargs": {"action_mode": "targets"}}, "action_mode: sequential"),
    ("maskable_ppo", "tiny", {"normalize_obs": True}, "normalize_obs"),
    ("maskable_ppo", "tiny", {"hyperparams": {"batch_size": 4096}}, "exceeds the rollout"),
])
def test_settings_reject_what_rllib_does_not_do(config: str, scenario: str, overrides: Any, expect: str) -> None:
    cfg = load_train_config(config, scenario=scenario, overrides=overrides)
    with pytest.raises(ConfigError, match="RLlib backend") as exc:
        rllib_settings(cfg)
    assert expect in str(exc.value)
    if config == "maskable_ppo" and scenario == "testbed":  # and the suggested fix works
        fixed = load_train_config(config, scenario=scenario, overrides={"hyperparams": {"target_kl": None}})
        assert rllib_settings(fixed)["training"]["minibatch_size"] == 512


@pytest.mark.parametrize("argv,expect", [
    (["--num-env-runners", "2"], "--num-env-runners needs --backend rllib"),
    (["--backend", "rllib", "--vec-env", "subproc"], "--vec-env belong to the SB3 backend"),
    (["--backend", "rllib", "--bc-demos", "x.npz"], "--bc-demos belong to the SB3 backend"),
])
def test_cli_argument_errors(argv: list[str], expect: str, capsys: pytest.CaptureFixture[str],
                             tmp_path: Path) -> None:
    from aryl_gym.cli import main

    rc = main(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--out", str(tmp_path), *argv])
    assert rc == 2
    assert expect in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_env_runners_against_the_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a running cluster (here a stand-in with 3 CPUs): the default is its CPUs minus one
    (the driver trains), more runners than CPUs is an error naming the fix."""
    import types

    from aryl_gym.train.rllib_backend import connect_ray

    fake = types.SimpleNamespace(is_initialized=lambda: True, cluster_resources=lambda: {"CPU": 3.0})
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert connect_ray(None)[1:] == (False, 2)
    assert connect_ray(0)[1:] == (False, 0) and connect_ray(3)[1:] == (False, 3)
    with pytest.raises(ConfigError, match="--num-env-runners 4: the Ray cluster has 3 CPUs"):
        connect_ray(4)


def test_no_ray_at_import() -> None:
    code = ("import sys, aryl_gym, aryl_gym.commands.train, aryl_gym.train.rllib_backend, "
            "aryl_gym.agents.learned\n"
            "assert 'ray' not in sys.modules and 'torch' not in sys.modules, "
            "sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'torch'))\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_module_dir_resolution(tmp_path: Path) -> None:
    def module(d: Path) -> Path:
        d.mkdir(parents=True)
        (d / "class_and_ctor_args.pkl").write_bytes(b"")
        (d / "module_state.pkl").write_bytes(b"")
        return d

    run = tmp_path / "run"
    run.mkdir()
    assert rllib_module_dir(run) is None  # no rllib.json: not an RLlib run
    (run / "rllib.json").write_text("{}")
    with pytest.raises(ConfigError, match="holds no module yet"):
        rllib_module_dir(run)
    ck = run / "checkpoints"
    for n in (512, 1536):
        (ck / f"rllib_{n}_steps").mkdir(parents=True)
        (ck / f"rllib_{n}_steps" / "rllib_checkpoint.json").write_text("{}")
        (ck / f"rllib_{n}_steps" / "learner_group").mkdir()
    # the latest checkpoint by steps (1536 > 512), then module/, then best_module/
    assert rllib_module_dir(run) == ck / "rllib_1536_steps" / "learner_group" / "learner" / "rl_module" / "default_policy"
    assert rllib_module_dir(ck / "rllib_512_steps") == ck / "rllib_512_steps" / "learner_group" / "learner" / "rl_module" / "default_policy"
    assert rllib_module_dir(module(run / "module")) == run / "module"
    assert rllib_module_dir(run) == run / "module"
    module(run / "best_module")
    assert rllib_module_dir(run) == run / "best_module"
    assert rllib_module_dir(tmp_path / "missing") is None


# ---------------------------------------------------------------------------------------------
# the RLModule and the agent
# ---------------------------------------------------------------------------------------------
def test_mask_hand_case(rllib: Any) -> None:
    import torch

    logits = torch.tensor([[1.0, 2.0, 3.0], [0.5, -0.5, 7.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    out = rllib.apply_mask(logits, mask)
    assert out.tolist() == [[1.0, rllib.MASKED_LOGIT, 3.0], [rllib.MASKED_LOGIT, -0.5, rllib.MASKED_LOGIT]]
    p = torch.softmax(out, dim=-1)
    assert p[0, 1].item() == 0.0 and p[1, 1].item() == 1.0
    # finite everywhere: the PPO loss's log-probabilities and entropy stay finite
    logp = torch.log_softmax(out, dim=-1)
    assert torch.isfinite(logp).all() and torch.isfinite((p * logp).sum(-1)).all()


def _module(rllib: Any, env: Any, seed: int = 0) -> Any:
    import torch

    torch.manual_seed(seed)
    return rllib.MaskedPPOTorchModule(observation_space=env.observation_space,
                                      action_space=env.action_space,
                                      model_config={"hiddens": [16], "activation": "tanh"})


def test_module_masks_every_forward_pass(rllib: Any) -> None:
    import torch
    from ray.rllib.core.columns import Columns

    env = _tiny_env()
    mod = _module(rllib, env)
    obs = [env.reset(seed=s)[0] for s in range(3)]
    obs.append(env.step(int(np.flatnonzero(obs[-1]["action_mask"])[0]))[0])
    batch = {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}
    masks = batch["action_mask"].numpy() > 0.5
    assert (~masks).any()  # the case has refused actions
    for fwd in (mod.forward_inference, mod.forward_exploration, mod.forward_train):
        out = fwd({Columns.OBS: {k: v.clone() for k, v in batch.items()}})[Columns.ACTION_DIST_INPUTS]
        assert out.shape == masks.shape
        assert (out.detach().numpy()[~masks] == rllib.MASKED_LOGIT).all()
        assert (out.detach().numpy()[masks] > -1e3).all()
    dist = mod.get_exploration_action_dist_cls().from_logits(mod.forward_exploration({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS])
    draws = dist.sample(sample_shape=(500,)).numpy()  # (500, B)
    assert all(masks[b, a] for row in draws for b, a in enumerate(row))
    assert mod.compute_values({Columns.OBS: batch}).shape == (len(obs),)
    env.close()


def test_checkpoint_loads_as_agent(rllib: Any, tmp_path: Path) -> None:
    from aryl_gym.agents.learned import RLlibAgent, load_agent, resolve_agent_path

    from aryl_gym.rollout import run_agent

    env = _tiny_env()
    mod = _module(rllib, env, seed=3)
    run = tmp_path / "tiny__rllib_ppo__0__x"
    run.mkdir()
    (run / "rllib.json").write_text(json.dumps({"backend": "rllib"}))
    cfg = load_train_config("maskable_ppo", scenario="tiny")
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    mod.save_to_path(str(run / "module"))

    agent = load_agent(str(run))
    assert isinstance(agent, RLlibAgent) and agent.scenario == "tiny"
    # the weights file identifies the agent (leaderboard provenance), with the run's config
    state, conf, _ = resolve_agent_path(str(run))
    assert state.parent == run / "module" and conf == run / "config.yaml"
    obs, _ = env.reset(seed=0, options={"episode_seed": 2000})
    batch = {k: np.stack([obs[k], obs[k]]) for k in obs}
    acts, _ = agent.predict(batch)
    logits, _ = agent.logits(obs)
    allowed = np.flatnonzero(obs["action_mask"] > 0.5)
    # the masked argmax, by hand: the allowed action with the largest logit (the module's own)
    import torch

    with torch.no_grad():
        raw = mod.pi(mod.features({k: torch.as_tensor(obs[k][None]) for k in obs})).numpy()[0]
    want = allowed[np.argmax(raw[allowed])]
    assert agent.predict(obs)[0] == want and list(acts) == [want, want]
    np.testing.assert_allclose(logits[0][allowed], raw[allowed], rtol=1e-6)
    # an explicit mask narrower than the observation's is obeyed
    only = np.zeros_like(obs["action_mask"], dtype=bool)
    only[allowed[-1]] = True
    assert agent.predict(obs, action_masks=only)[0] == allowed[-1]
    # a whole episode through the rollout loop the leaderboard uses
    res, _, steps = run_agent(agent, agent.make_env(scenario="tiny"), 2000)
    assert steps > 0 and res.jobs_total > 0
    env.close()


def test_missing_extra_is_named(rllib: Any, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from aryl_gym.agents.learned import load_rllib_agent

    from aryl_gym.cli import main
    from aryl_gym.extras import rllib_unavailable

    monkeypatch.setitem(sys.modules, "ray.rllib", None)  # "import ray.rllib" now fails as if absent
    assert rllib_unavailable() == ("the RLlib backend needs ray.rllib (ray[rllib] and torch): "
                                   "pip install 'aryl-gym[rllib]'")
    rc = main(["train", "--backend", "rllib", "--config", "maskable_ppo", "--scenario", "tiny",
               "--out", str(tmp_path)])
    assert rc == 2 and "pip install 'aryl-gym[rllib]'" in capsys.readouterr().err
    mod = tmp_path / "m"
    mod.mkdir()
    (mod / "class_and_ctor_args.pkl").write_bytes(b"")
    (mod / "module_state.pkl").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"aryl-gym\[rllib\]"):
        load_rllib_agent(mod)


# ---------------------------------------------------------------------------------------------
# a short training run (slow: Ray start-up and 100,000 env steps, about 3 minutes)
# ---------------------------------------------------------------------------------------------
def _paired(agent: Any, env: Any, seeds: range, deterministic: bool) -> np.ndarray:
    """random's avg JCT minus the agent's, seed by seed (the same episode for both)."""
    from aryl_gym.rollout import run_agent
    from aryl_gym.train.evaluation import RandomMaskedAgent

    ours = [run_agent(agent, env, s, deterministic=deterministic)[0].avg_jct for s in seeds]
    rand = [run_agent(RandomMaskedAgent(s), env, s)[0].avg_jct for s in seeds]
    return np.array(rand) - np.array(ours)


@pytest.mark.slow
def test_short_run_beats_random_on_paired_seeds(rllib: Any, tmp_path: Path) -> None:
    import ray
    from aryl_gym.agents.learned import load_agent
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from aryl_gym.train.rllib_backend import train_rllib

    cfg = load_train_config("maskable_ppo", scenario="tiny",
                            overrides={"total_timesteps": 100_000, "checkpoint_freq": 50_000,
                                       "eval": {"freq": 25_000}})
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    try:
        res = train_rllib(cfg, out=tmp_path, num_env_runners=1, verbose=0)  # one remote runner
    finally:
        ray.shutdown()
    run = res.run_dir
    assert res.num_timesteps >= 100_000
    # a checkpoint after the first iteration at or past 50,000 steps (512-step updates; a remote
    # runner may hand in a few steps more), and the final one
    cks = sorted(int(p.name.split("_")[1]) for p in (run / "checkpoints").iterdir())
    assert 50_000 <= cks[0] < 50_000 + 600 and cks[-1] == res.num_timesteps
    assert (run / "module").is_dir() and (run / "best_module").is_dir()
    ea = EventAccumulator(str(run / "tb"))
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    assert {"cluster/avg_jct", "cluster/episodes", "eval/avg_jct", "eval/jct_ratio_to_aryl"} <= tags
    episodes = [e.value for e in ea.Scalars("cluster/episodes")]
    assert episodes == sorted(episodes) and episodes[-1] > 500

    # held-out seeds (training draws from the run seed, evaluation plays 1000-1002). On tiny an
    # untrained network's argmax already beats random (a fixed rule grants more steadily than
    # random picks), so learning is judged on the *sampling* policy, which starts as masked
    # uniform, i.e. as random: after training it must beat random by more than two standard
    # errors of the paired difference (measured: 641 s +- 120 s at 100,000 steps).
    agent = load_agent(str(run / "module"))
    env = agent.make_env(scenario="tiny")
    seeds = range(2000, 2120)
    sampled = _paired(agent, env, seeds, deterministic=False)
    assert sampled.mean() > 2 * sampled.std(ddof=1) / np.sqrt(len(seeds)), sampled.mean()
    argmax = _paired(load_agent(str(run)), env, seeds, deterministic=True)  # best_module/
    assert argmax.mean() > 0
