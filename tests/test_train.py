"""Training: config loading, a smoke run with TensorBoard ``cluster/`` tags, resume, evaluation,
behaviour cloning, and the shipped agent (issue 7).

The smoke runs use the real ``aryl_gym/Aryl-v1`` on ``tiny``; a small stub env (defined here)
covers the machinery independently of the env's dynamics.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")
pytest.importorskip("tensorboard")

import gymnasium as gym
from gymnasium import spaces

from aryl_gym.config import ConfigError
from aryl_gym.metrics import EpisodeResult
from aryl_gym.train.config import load_train_config
from tests.helpers import play_sjf_grant

STUB_ID = "aryl_gym_test/Stub-v0"
_RESULT: dict = {}


def _stub_result(seed: int, invalid: int) -> EpisodeResult:
    """A real EpisodeResult (fifo on tiny) with the given seed, cached."""
    if "r" not in _RESULT:
        from aryl_gym.agents import make_policy

        from aryl_gym.scenario import make_episode

        _RESULT["r"] = make_episode("tiny", 0).simulator().run(make_policy("fifo"))
    d = _RESULT["r"].to_dict()
    d["seed"] = seed
    d["invalid_decisions"] = invalid
    return EpisodeResult.from_dict(d)


class StubEnv(gym.Env):
    """Three actions, the third always masked; reward +1 for action 0. 40 steps per episode."""

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium convention)

    def __init__(self, scenario: str = "tiny", length: int = 40, action_mode: str = "x"):
        self.observation_space = spaces.Dict(
            {
                "x": spaces.Box(0.0, 1.0, (4,), np.float32),
                "action_mask": spaces.Box(0.0, 1.0, (3,), np.float32),
            }
        )
        self.action_space = spaces.Discrete(3)
        self.length = length
        self.t = 0
        self.invalid = 0
        self.seed_used = 0

    def _obs(self) -> dict:
        x = np.full(4, self.t / self.length, dtype=np.float32)
        return {"x": x, "action_mask": np.array([1, 1, 0], dtype=np.float32)}

    def action_masks(self) -> np.ndarray:
        return np.array([True, True, False])

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_used = int(seed) if seed is not None else int(self.np_random.integers(1 << 30))
        self.t = 0
        self.invalid = 0
        return self._obs(), {}

    def step(self, action):
        a = int(action)
        if a == 2:
            self.invalid += 1
        self.t += 1
        term = self.t >= self.length
        info: dict = {"invalid_actions": self.invalid}
        if term:
            info["episode_result"] = _stub_result(self.seed_used, self.invalid)
        return self._obs(), float(a == 0), term, False, info


if STUB_ID not in gym.registry:
    gym.register(STUB_ID, entry_point=StubEnv)


def _real_env_available() -> bool:
    import aryl_gym  # noqa: F401

    return "aryl_gym/Aryl-v1" in gym.registry


def _tb_tags(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for ev in sorted((run_dir / "tb").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(ev))
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in acc.Scalars(tag))
    return out


def _write_cfg(tmp_path: Path, env_id: str, algo: str = "maskable_ppo", extra: str = "") -> Path:
    p = tmp_path / f"{algo}.yaml"
    p.write_text(
        f"""
algo: {algo}
default:
  env_id: {env_id}
  n_envs: 2
  total_timesteps: 512
  policy_kwargs: {{net_arch: [16, 16]}}
  hyperparams: {{n_steps: 128, batch_size: 64, n_epochs: 2}}
  checkpoint_freq: 256
  eval: {{freq: 256, seeds: [1000], references: [fifo]}}
{extra}
"""
    )
    return p


# ----------------------------------------------------------------------------------------------
# config
# ----------------------------------------------------------------------------------------------
def test_shipped_configs_resolve_per_scenario():
    for name in ("maskable_ppo", "ppo"):
        tiny = load_train_config(name, scenario="tiny")
        tb = load_train_config(name, scenario="testbed")
        basic = load_train_config(name, scenario="basic")  # no section: default only
        assert tiny.algo == name and tiny.scenario == "tiny"
        assert tiny.total_timesteps < tb.total_timesteps
        assert tiny.hyperparams["n_steps"] != basic.hyperparams["n_steps"]
        # deep merge: tiny overrides n_steps but keeps the default's learning rate
        assert tiny.hyperparams["learning_rate"] == basic.hyperparams["learning_rate"]
        assert tb.eval.references[0] == "aryl"
    assert load_train_config("maskable_ppo", "tiny").masked
    assert not load_train_config("ppo", "tiny").masked


def test_unknown_keys_are_errors(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("algo: ppo\ndefault:\n  n_env: 2\n")
    with pytest.raises(ConfigError, match="n_env.*Allowed keys"):
        load_train_config(p, "tiny")
    p.write_text("algo: ppo\ndefault:\n  eval: {frequency: 3}\n")
    with pytest.raises(ConfigError, match="frequency"):
        load_train_config(p, "tiny")
    p.write_text("algo: sac\ndefault: {}\n")
    with pytest.raises(ConfigError, match="unknown algo 'sac'"):
        load_train_config(p, "tiny")
    p.write_text("algo: ppo\ndefault:\n  hyperparams: {learning_rat: 0.1}\n")
    cfg = load_train_config(p, "tiny")
    from stable_baselines3 import PPO

    from aryl_gym.train.config import check_hyperparams

    with pytest.raises(ConfigError, match="learning_rat"):
        check_hyperparams(PPO, cfg.hyperparams)
    # 1e-4 (no dot) is a number, as in YAML 1.2 (issue 34; PyYAML's YAML 1.1 reads it as text)
    p.write_text("algo: ppo\ndefault:\n  hyperparams: {learning_rate: 1e-4, device: cpu}\n")
    assert load_train_config(p, "tiny").hyperparams["learning_rate"] == 1e-4
    # a number quoted as text: a clear error before SB3's assertion
    p.write_text("algo: ppo\ndefault:\n  hyperparams: {learning_rate: '1e-4', device: cpu}\n")
    cfg = load_train_config(p, "tiny")
    assert cfg.hyperparams["learning_rate"] == "1e-4"
    with pytest.raises(ConfigError, match=r"learning_rate: '1e-4' is text, not a number.*learning_rate: 1.0e-04"):
        check_hyperparams(PPO, cfg.hyperparams)
    check_hyperparams(PPO, {"learning_rate": 1.0e-4})
    # the runner passes verbose and device itself (was: "got multiple values for keyword argument")
    with pytest.raises(ConfigError, match="'device' is set by the training runner"):
        check_hyperparams(PPO, {"device": "cpu"})


def test_config_round_trips_through_run_dict():
    from aryl_gym.train.config import config_from_run_dict

    cfg = load_train_config("maskable_ppo", "testbed", overrides={"seed": 7, "eval": {"seeds": [5, 6]}})
    again = config_from_run_dict(cfg.to_dict())
    assert again == cfg
    assert again.eval.seeds == (5, 6) and again.seed == 7


def test_model_class_builds_a_subclass_of_the_algo_and_names_what_is_wrong():
    """``model_class`` (how an experiment's algorithm subclass is trained, e.g.
    experiments/04-time-discounting); run configs written before it hold ``time_horizon_hours:
    null``, which still load."""
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.config import config_from_run_dict
    from aryl_gym.train.runner import model_class

    cfg = load_train_config("maskable_ppo", "tiny", overrides={"model_class": "sb3_contrib:MaskablePPO"})
    assert model_class(cfg) is MaskablePPO
    for spec, msg in (("no_such_module:X", "cannot be imported"), ("stable_baselines3:DQN", "subclass")):
        with pytest.raises(ConfigError, match=msg):
            model_class(cfg.replace(model_class=spec))
    with pytest.raises(ConfigError, match="module:Class"):
        load_train_config("maskable_ppo", "tiny", overrides={"model_class": "sb3_contrib.MaskablePPO"})
    old = {**cfg.to_dict(), "time_horizon_hours": None}
    del old["model_class"]
    assert config_from_run_dict(old).model_class is None


# ----------------------------------------------------------------------------------------------
# machinery on the stub env
# ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stub_training_logs_cluster_tags_checkpoints_and_resumes(tmp_path):
    from aryl_gym.train.runner import train

    cfg = load_train_config(_write_cfg(tmp_path, STUB_ID), "tiny")
    res = train(cfg, out=tmp_path / "runs", verbose=0)
    run = res.run_dir
    assert run.name.startswith("tiny__maskable_ppo__0__")
    for f in ("config.yaml", "args.json", "commit.txt", "model.zip", "eval.csv", "summary.json"):
        assert (run / f).exists(), f
    assert res.num_timesteps >= 512
    tags = _tb_tags(run)
    for t in ("cluster/avg_jct", "cluster/p95_jct", "cluster/avg_queue_time", "cluster/usage",
              "cluster/preemptions", "cluster/invalid_actions", "eval/avg_jct", "eval/fifo_avg_jct",
              "eval/jct_ratio_to_fifo", "rollout/ep_rew_mean"):
        assert t in tags, (t, sorted(tags))
    # the masked third action is never taken, so the env counted no invalid action
    assert all(v == 0.0 for _, v in tags["cluster/invalid_actions"])
    # the fifo line is the native fifo figure on the held-out eval seed
    from aryl_gym.train.evaluation import run_reference

    fifo = run_reference("fifo", "tiny", 1000).avg_jct
    assert [v for _, v in tags["eval/fifo_avg_jct"]] == pytest.approx([fifo] * len(tags["eval/fifo_avg_jct"]), rel=1e-6)
    # the agent's eval figure is the stub's (fifo on tiny seed 0)
    assert tags["eval/avg_jct"][0][1] == pytest.approx(_stub_result(0, 0).avg_jct, rel=1e-6)
    ckpts = sorted((run / "checkpoints").glob("rl_model_*_steps.zip"))
    assert ckpts
    # resume: the run's last checkpoint continues from its step count, in the same run folder
    # (an earlier one of a run that went further continues in a new folder: test_hostile_v2)
    ck = max(ckpts, key=lambda c: int(c.stem.split("_")[-2]))
    n0 = int(ck.stem.split("_")[-2])
    assert n0 >= res.num_timesteps
    res2 = train(cfg.replace(total_timesteps=1024), resume=ck, verbose=0)
    assert res2.run_dir == run
    assert res2.num_timesteps >= 1024
    steps = [s for s, _ in _tb_tags(run)["time/fps"]]
    assert max(steps) >= 1024 and min(steps) < n0 + 256


def test_bc_warm_start_learns_the_demonstrated_action(tmp_path):
    from aryl_gym.train.bc import pretrain
    from aryl_gym.train.runner import build_model, make_vec_env

    # demonstrator always picks action 1 (valid, but PPO's reward prefers 0)
    n = 512
    rng = np.random.default_rng(0)
    x = rng.random((n, 4)).astype(np.float32)
    mask = np.tile(np.array([1, 1, 0], dtype=np.float32), (n, 1))
    f = tmp_path / "demos.npz"
    np.savez(f, **{"obs/x": x, "obs/action_mask": mask, "actions": np.ones(n, dtype=np.int64),
                   "masks": mask.astype(bool)})
    cfg = load_train_config(_write_cfg(tmp_path, STUB_ID), "tiny")
    venv = make_vec_env(cfg)
    model = build_model(cfg, venv)
    stats = pretrain(model, f, epochs=15, batch_size=128, learning_rate=3e-3)
    assert stats["accuracy"] == 1.0
    a, _ = model.predict({"x": x[:8], "action_mask": mask[:8]}, action_masks=mask[:8].astype(bool),
                         deterministic=True)
    assert (a == 1).all()
    venv.close()


def test_bad_demos_file_is_a_clear_error(tmp_path):
    from aryl_gym.train.bc import load_demos

    with pytest.raises(ConfigError, match="not found"):
        load_demos(tmp_path / "nope.npz")
    f = tmp_path / "x.npz"
    np.savez(f, foo=np.zeros(3))
    with pytest.raises(ConfigError, match="expected observations"):
        load_demos(f)


def test_load_agent_from_run_and_evaluate_json(tmp_path, capsys):
    from aryl_gym.agents.learned import load_agent

    from aryl_gym.train.evaluation import run_agent
    from aryl_gym.train.runner import train

    cfg = load_train_config(_write_cfg(tmp_path, STUB_ID), "tiny", overrides={"eval": {"freq": 0}})
    res = train(cfg, out=tmp_path / "runs", verbose=0)
    agent = load_agent(res.run_dir)
    assert agent.masked and agent.scenario == "tiny"
    env = agent.make_env()
    r, _ret, steps = run_agent(agent, env, seed=3)
    assert steps == 40 and r.seed == 3 and r.invalid_decisions == 0
    # predict takes the mask from the observation when none is given
    obs, _ = env.reset(seed=0)
    for _ in range(20):
        a, _ = agent.predict(obs, deterministic=False)
        assert int(a) in (0, 1)
    from aryl_gym.cli import main

    assert main(["evaluate", "--agent", str(res.run_dir), "--seeds", "1,2", "--against", "fifo"]) == 0
    out = json.loads(capsys.readouterr().out)
    pols = {(r["policy"], r["seed"]) for r in out["rows"]}
    # the ratios' denominator (--baseline, default baseline) runs even when not listed
    assert pols == {(res.run_dir.name, 1), (res.run_dir.name, 2), ("fifo", 1), ("fifo", 2),
                    ("baseline", 1), ("baseline", 2)}
    assert out["ratios"]["baseline"]["avg_jct"] == pytest.approx(1.0)
    assert main(["evaluate", "--agent", str(res.run_dir), "--seeds", "1", "--baseline", "nope"]) == 2
    assert "--baseline 'nope' is neither a policy" in capsys.readouterr().err


def test_unknown_agent_is_a_clear_error():
    from aryl_gym.agents.learned import load_agent

    with pytest.raises(ConfigError, match="unknown agent 'no-such-agent'"):
        load_agent("no-such-agent")


def test_train_package_does_not_import_torch():
    import subprocess
    import sys

    code = (
        "import sys, aryl_gym, aryl_gym.train, aryl_gym.agents.learned, aryl_gym.cli,"
        " aryl_gym.envs, aryl_gym.leaderboard.runner, aryl_gym.agents;"
        "aryl_gym.cli.build_parser(); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------
# the real env on tiny
# ----------------------------------------------------------------------------------------------
needs_env = pytest.mark.skipif(not _real_env_available(), reason="aryl_gym/Aryl-v1 not registered yet (issue 5)")


@pytest.mark.slow
@needs_env
def test_smoke_training_on_tiny_writes_cluster_tags_and_a_loadable_model(tmp_path):
    from aryl_gym.agents.learned import load_agent

    from aryl_gym.cli import main
    from aryl_gym.train.evaluation import run_agent, run_reference

    out = tmp_path / "runs"
    # stall_hours=2: an untrained agent that never grants ends its episode after 2 idle hours
    rc = main(["train", "--config", "maskable_ppo", "--scenario", "tiny", "--timesteps", "2048",
               "--seed", "3", "--out", str(out), "--n-envs", "2", "--eval-freq", "1024",
               "--eval-seeds", "1000,1001", "--checkpoint-freq", "1024", "--quiet",
               "--set", "n_steps=256", "--set", "batch_size=128", "--env", "stall_hours=2"])
    assert rc == 0
    (run,) = [p for p in out.iterdir() if p.is_dir()]  # beside .aryl-gym-owner
    assert run.name.startswith("tiny__maskable_ppo__3__")
    tags = _tb_tags(run)
    for t in ("cluster/avg_jct", "cluster/p95_jct", "cluster/avg_queue_time", "cluster/usage",
              "cluster/preemptions", "cluster/invalid_actions", "eval/avg_jct",
              "eval/aryl_avg_jct", "eval/fifo_avg_jct", "eval/jct_ratio_to_aryl"):
        assert t in tags, (t, sorted(tags))
    # masked actions are never invalid
    assert all(v == 0.0 for _, v in tags["cluster/invalid_actions"])
    # the Aryl line is Aryl's native figure on the same seeds (seeding of the eval episodes)
    aryl = np.mean([run_reference("aryl", "tiny", s).avg_jct for s in (1000, 1001)])
    assert tags["eval/aryl_avg_jct"][-1][1] == pytest.approx(aryl, rel=1e-5)
    agent = load_agent(run)
    env = agent.make_env()
    assert agent.env_kwargs["stall_hours"] == 2
    res, _, _steps = run_agent(agent, env, seed=1000)
    assert res.seed == 1000 and res.jobs_total == 30 and res.invalid_decisions == 0
    # resume from the first checkpoint continues the step count; the run went further (its
    # model.zip is at 2048), so it continues in a new run folder and the run is left as it was
    ck = min((run / "checkpoints").glob("rl_model_*_steps.zip"), key=lambda p: int(p.stem.split("_")[-2]))
    before = (run / "model.zip").read_bytes()
    rc = main(["train", "--resume", str(ck), "--timesteps", "2560", "--quiet", "--eval-freq", "0"])
    assert rc == 0
    assert (run / "model.zip").read_bytes() == before
    (new,) = [p for p in out.iterdir() if p.is_dir() and p != run]
    import yaml

    assert yaml.safe_load((new / "config.yaml").read_text())["total_timesteps"] == 2560
    steps_logged = [s for s, _ in _tb_tags(new)["time/fps"]]
    assert max(steps_logged) >= 2560
    from stable_baselines3.common.save_util import load_from_zip_file

    data, _, _ = load_from_zip_file(new / "model.zip")
    # 1024 steps from the checkpoint + the rest up to 2560: the count continued, not restarted
    assert 2560 <= data["num_timesteps"] < 2560 + 512


@needs_env
def test_shipped_agent_loads_and_acts_with_masks():
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    if not (PRETRAINED_DIR / "ppo-testbed.zip").exists():
        pytest.skip("agents/pretrained/ppo-testbed.zip absent (train it: see docs/training.md)")
    agent = load_agent("ppo-testbed")
    assert agent.scenario == "testbed" and agent.masked
    env = agent.make_env()
    obs, _ = env.reset(seed=1000, options={"episode_seed": 1000})
    for _ in range(200):
        mask = env.unwrapped.action_masks()
        a, _ = agent.predict(obs, deterministic=True)
        assert mask[int(a)], "the agent chose a masked action"
        obs, _, term, trunc, info = env.step(a)
        assert info["invalid"] == 0
        if term or trunc:
            break


@needs_env
def test_reference_reward_sums_to_the_jct_difference():
    """Undiscounted, the wrapped return is (total JCT of the reference - the agent's) / scale."""
    from aryl_gym.train.evaluation import run_reference
    from aryl_gym.train.wrappers import ReferenceJCTReward

    env = ReferenceJCTReward(gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential"), "fifo")
    total, info, term = play_sjf_grant(env)
    assert term
    agent = info["episode_result"]
    ref = run_reference("fifo", "tiny", 7)
    assert ref.jobs_completed == ref.jobs_total
    expected = (sum(ref.jcts) - sum(agent.jcts)) / 3600.0
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-6)


@needs_env
def test_reference_reward_carries_the_jct_weight():
    """was: the reference's term had weight 1 whatever the env's jct weight, so with weight w
    the return summed to (reference - w x agent) / scale."""
    from aryl_gym.train.evaluation import run_reference
    from aryl_gym.train.wrappers import ReferenceJCTReward

    env = ReferenceJCTReward(gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential",
                                      reward={"jct": 0.25}), "fifo")
    total, info, term = play_sjf_grant(env)
    assert term
    ref = run_reference("fifo", "tiny", 7)
    expected = 0.25 * (sum(ref.jcts) - sum(info["episode_result"].jcts)) / 3600.0
    assert total == pytest.approx(expected, rel=1e-9, abs=1e-6)
    with pytest.raises(ValueError, match=r"reward_reference=.fifo. makes the jct reward relative .* drop reward_reference"):
        ReferenceJCTReward(gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", reward="queue"),
                           "fifo")

def _masked_batch(env, n: int, seed: int = 0):
    """``n`` observations and masks of a masked-random rollout (resets when an episode ends)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    obss, masks = [], []
    for _ in range(n):
        m = env.unwrapped.action_masks()
        obss.append(obs)
        masks.append(m)
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            obs, _ = env.reset()
    return {k: np.stack([o[k] for o in obss]) for k in obss[0]}, np.stack(masks)


@needs_env
def test_fast_masked_argmax_equals_sb3_deterministic_predict():
    """LearnedAgent's direct masked argmax gives exactly MaskablePPO.predict's deterministic
    actions, batched and single, for a fresh (near-uniform logits) and the shipped model."""
    from aryl_gym.agents.learned import PRETRAINED_DIR, LearnedAgent, load_agent
    from sb3_contrib import MaskablePPO

    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=8)
    fresh = MaskablePPO("MultiInputPolicy", env, seed=3, device="cpu",
                        policy_kwargs={"net_arch": [16, 16]})
    agents = [(LearnedAgent(name="fresh", model=fresh, masked=True), env)]
    if (PRETRAINED_DIR / "ppo-testbed.zip").exists():
        shipped = load_agent("ppo-testbed")
        agents.append((shipped, shipped.make_env()))
    for agent, e in agents:
        batch, masks = _masked_batch(e, 256)
        assert agent._fast_ok()
        want, _ = agent.model.predict(batch, action_masks=masks, deterministic=True)
        got, _ = agent.predict(batch, action_masks=masks, deterministic=True)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert masks[np.arange(len(got)), got].all()
        # one observation, mask taken from obs["action_mask"]: same action and shape as SB3's
        one = {k: v[7] for k, v in batch.items()}
        w1, _ = agent.model.predict(one, action_masks=masks[7], deterministic=True)
        g1, _ = agent.predict(one)
        assert np.shape(g1) == np.shape(w1) and int(g1) == int(w1)


@needs_env
def test_traced_masked_argmax_equals_eager_and_follows_weight_updates(monkeypatch):
    """The TorchScript trace behind LearnedAgent.masked_argmax gives the eager pass's actions
    (single and batched observations of the shipped set policy), holds the policy's own
    parameters (an in-place update reaches it, as training's does), and a policy that cannot
    be traced runs eagerly with the same actions."""
    import torch as th
    from aryl_gym.agents import learned
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    if not (PRETRAINED_DIR / "ppo-v1.zip").exists():
        pytest.skip("the shipped ppo-v1 weights are absent")
    agent = load_agent("ppo-v1")
    agent.numpy = False  # the torch passes only (the numpy pass has its own test below)
    env = agent.make_env("testbed")
    batch, masks = _masked_batch(env, 96)

    def actions(trace: bool) -> tuple[np.ndarray, list[int]]:
        agent.trace = trace
        b, _ = agent.predict(batch, action_masks=masks)
        one = [int(agent.predict({k: v[i] for k, v in batch.items()})[0]) for i in range(0, 96, 8)]
        return b, one

    traced, eager = actions(True), actions(False)
    np.testing.assert_array_equal(traced[0], eager[0])
    assert traced[1] == eager[1]
    assert agent._traces and all(fn is not None for fn in agent._traces.values())  # traced, not fallen back
    assert agent._feed is not None and agent._feed.fn not in (None, False)  # one observation: its own trace
    with th.no_grad():
        for p in agent.model.policy.parameters():
            p.mul_(-0.5)
    flipped_traced, flipped_eager = actions(True), actions(False)
    np.testing.assert_array_equal(flipped_traced[0], flipped_eager[0])
    assert flipped_traced[1] == flipped_eager[1]  # the single observations' (frozen) trace too
    assert not np.array_equal(flipped_traced[0], traced[0])  # the update changed the actions

    def no_trace(*a, **k):
        raise RuntimeError("cannot trace")

    fresh = load_agent("ppo-v1")
    fresh.numpy = False
    monkeypatch.setattr(th.jit, "trace", no_trace)
    got, _ = fresh.predict(batch, action_masks=masks)
    np.testing.assert_array_equal(got, eager[0])
    assert list(fresh._traces.values()) == [None]
    one = {k: v[5] for k, v in batch.items()}
    want = fresh.masked_argmax(one, one["action_mask"] > 0.5)
    got1 = fresh.predict(one)[0]
    assert fresh._feed.fn is None and np.shape(got1) == np.shape(want) and int(got1) == int(want)
    assert learned._TRACE_CACHE >= 2


@needs_env
def test_numpy_pass_gives_the_torch_action_and_defers_near_ties(monkeypatch):
    """The set policy's numpy actor scores one observation like the torch pass (logits within
    float32 rounding, actions equal over testbed and basic states), follows in-place weight
    updates, and leaves a call to torch exactly when the best allowed logit does not lead the
    next by the margin; a policy without a numpy actor (an MLP) runs through torch."""
    import torch as th
    from aryl_gym.agents import learned
    from aryl_gym.agents.learned import LearnedAgent, load_agent
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.setpolicy import NumpyActor

    if not (learned.PRETRAINED_DIR / "ppo-v1.zip").exists():
        pytest.skip("the shipped ppo-v1 weights are absent")
    agent = load_agent("ppo-v1")
    pol = agent.model.policy
    assert NumpyActor.supports(pol)
    states = []
    for scenario in ("testbed", "basic"):
        batch, _ = _masked_batch(agent.make_env(scenario), 128)
        states += [{k: v[i] for k, v in batch.items()} for i in range(len(batch["jobs"]))]

    def torch_logits(one: dict) -> np.ndarray:
        with th.inference_mode():
            t = {k: th.from_numpy(v[None]) for k, v in one.items()}
            return pol.action_net(pol.mlp_extractor.forward_actor(
                pol.extract_features(t, pol.pi_features_extractor)))[0].numpy()

    def check(agent: LearnedAgent) -> list[int]:
        actor = NumpyActor(agent.model.policy)
        for one in states[::16]:
            np.testing.assert_allclose(actor.logits(one, one["action_mask"]), torch_logits(one), rtol=0, atol=1e-4)
        decided = []
        for one in states:
            agent.numpy = True
            got = agent.predict(one)[0]
            agent.numpy = False
            want = agent.predict(one)[0]
            assert np.shape(got) == np.shape(want) and got.dtype == want.dtype and int(got) == int(want)
            decided.append(learned._numpy_argmax(agent._feed, one) is not None)
        return decided

    decided = check(agent)
    assert sum(decided) > 0.8 * len(decided)  # the numpy pass decides most calls
    with th.no_grad():
        for p in pol.parameters():
            p.mul_(-0.5)
    check(agent)  # in-place updates reach the numpy views

    # the margin: a call is left to torch exactly when the lead is within it
    one = states[3]
    agent._feed.fill(one)
    scores = np.sort(np.where(one["action_mask"] > 0.5, NumpyActor(pol).logits(one, one["action_mask"]), -np.inf))
    lead = float(scores[-1] - scores[-2])
    monkeypatch.setattr(learned, "NUMPY_MARGIN", 1.01 * lead / max(1.0, abs(float(scores[-1]))))
    assert learned._numpy_argmax(agent._feed, one) is None
    monkeypatch.setattr(learned, "NUMPY_MARGIN", 0.99 * lead / max(1.0, abs(float(scores[-1]))))
    assert learned._numpy_argmax(agent._feed, one) is not None
    # nothing allowed, or a NaN logit: torch decides
    nan = {**one, "cluster": np.full_like(one["cluster"], np.nan)}
    agent._feed.fill(nan)
    assert learned._numpy_argmax(agent._feed, nan) is None
    none = {**one, "action_mask": np.zeros_like(one["action_mask"])}
    agent._feed.fill(none)
    assert learned._numpy_argmax(agent._feed, none) is None

    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", action_mode="sequential", window=8)
    mlp = LearnedAgent(name="mlp", model=MaskablePPO("MultiInputPolicy", env, seed=3, device="cpu",
                                                     policy_kwargs={"net_arch": [16, 16]}))
    assert not NumpyActor.supports(mlp.model.policy)
    obs, _ = env.reset(seed=1)
    assert env.unwrapped.action_masks()[int(mlp.predict(obs)[0])]
    assert mlp._feed.np_actor is None and mlp._feed.fn not in (None, False)


def test_config_records_demonstrations_then_warm_starts(tmp_path):
    # bc.policy without bc.demos: the run records the reference policy's demonstrations in the
    # training env into its own folder, clones them, and keeps the step-0 policy (one command
    # reproduces a warm-started agent).
    from aryl_gym.agents.learned import load_agent

    from aryl_gym.train.bc import load_demos
    from aryl_gym.train.runner import train

    cfg = load_train_config("maskable_ppo_set", "tiny", {
        "bc": {"policy": "aryl-preempt", "episodes": 2, "seed": 7, "epochs": 2},
        "total_timesteps": 1024, "eval": {"freq": 0}, "checkpoint_freq": 0,
    })
    res = train(cfg, out=tmp_path / "runs", verbose=0)
    obs, actions, masks = load_demos(res.run_dir / "demos.npz")
    assert len(actions) > 0 and masks is not None
    # every demonstrated action was allowed by the env's mask at that step
    assert masks[np.arange(len(actions)), actions].all()
    assert (res.run_dir / "warm_start.zip").exists()
    agent = load_agent(str(res.run_dir / "warm_start.zip"))
    env = agent.make_env()
    obs0, _ = env.reset(options={"episode_seed": 1000})
    a, _ = agent.predict(obs0, action_masks=env.unwrapped.action_masks(), deterministic=True)
    assert env.unwrapped.action_masks()[int(np.asarray(a).ravel()[0])]


def test_unknown_demonstrator_is_a_config_error():
    with pytest.raises(ConfigError, match="bc.policy: unknown policy 'nope'"):
        load_train_config("maskable_ppo_set", "tiny", {"bc": {"policy": "nope"}})
    with pytest.raises(ConfigError, match="eval.references"):
        load_train_config("maskable_ppo_set", "tiny", {"eval": {"references": ["aryl", "ayrl"]}})


@pytest.mark.slow
def test_init_from_starts_from_the_given_weights(tmp_path):
    import torch
    from sb3_contrib import MaskablePPO

    from aryl_gym.train.runner import train

    base = {"total_timesteps": 1024, "eval": {"freq": 0}, "checkpoint_freq": 0}
    first = train(load_train_config("maskable_ppo_set", "tiny", base), out=tmp_path / "a", verbose=0)
    src = first.run_dir / "model.zip"
    cfg = load_train_config("maskable_ppo_set", "tiny", {**base, "init_from": str(src), "seed": 5})
    second = train(cfg, out=tmp_path / "b", verbose=0)
    want = MaskablePPO.load(src, device="cpu").policy.state_dict()
    got = MaskablePPO.load(second.run_dir / "warm_start.zip", device="cpu").policy.state_dict()
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)
    # a model of another network does not fit: a config error naming the file
    other = train(load_train_config("maskable_ppo_set", "tiny", {
        **base, "policy_kwargs": {"features_extractor_kwargs": {"embed_dim": 16}, "vf_hidden": 16}}),
        out=tmp_path / "c", verbose=0)
    bad = load_train_config("maskable_ppo_set", "tiny", {**base, "init_from": str(other.run_dir / "model.zip")})
    with pytest.raises(ConfigError, match="do not fit"):
        train(bad, out=tmp_path / "d", verbose=0)
    missing = load_train_config("maskable_ppo_set", "tiny", {**base, "init_from": str(tmp_path / "none.zip")})
    with pytest.raises(ConfigError, match="file not found"):
        train(missing, out=tmp_path / "e", verbose=0)


def test_shipped_ppo_v2_deploys_as_trained_and_repeats_its_episodes():
    """``ppo-v2`` (agents/pretrained/ppo-v2.md) loads with its run's config: World v2's env with
    backfill, ``window_fit`` 4 and the shield on, as it was trained and selected. It is a set
    policy (its numpy actor serves it), so the one network acts on testbed and ``basic``; a
    testbed episode finishes every job and repeats to the bit, and the weights are not
    ``ppo-v1``'s."""
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    from aryl_gym.rollout import run_agent
    from aryl_gym.train.setpolicy import NumpyActor

    if not (PRETRAINED_DIR / "ppo-v2.zip").exists():
        pytest.skip("the shipped ppo-v2 weights are absent")
    agent = load_agent("ppo-v2")
    assert agent.env_id == "aryl_gym/Aryl-v2"
    assert NumpyActor.supports(agent.model.policy)
    env = agent.make_env("testbed")
    opts = env.unwrapped.options
    assert opts.backfill and opts.window_fit == 4 and opts.allow_preempt
    assert opts.stall_guard and opts.preempt_guard and opts.thrash_sustained
    first = run_agent(agent, env, seed=31)
    again = run_agent(agent, agent.make_env("testbed"), seed=31)
    assert first[0].jobs_unfinished == 0 and first[0].avg_jct > 0
    assert (first[0].avg_jct, first[1], first[2]) == (again[0].avg_jct, again[1], again[2])
    big = agent.make_env("basic")  # a 512-GPU cluster through the same network
    obs, _ = big.reset(seed=5)
    a = agent.predict(obs)[0]
    assert big.unwrapped.action_masks()[int(a)]
    v1 = load_agent("ppo-v1").model.policy.state_dict()
    v2 = agent.model.policy.state_dict()
    assert v1.keys() == v2.keys() and any(not np.array_equal(v1[k].numpy(), v2[k].numpy()) for k in v1)


def test_ppo_v2_recipe_is_its_shipped_config_and_experiment_22s():
    """``configs/algos/maskable_ppo_v2.yaml`` (testbed, seed 0) resolves to the shipped
    ``ppo-v2.yaml`` and to experiment 22's config it was taken from, so the one training command
    the card gives trains what shipped."""
    import yaml
    from aryl_gym.agents.learned import PRETRAINED_DIR

    recipe = load_train_config("maskable_ppo_v2", "testbed").to_dict()
    root = Path(__file__).resolve().parents[1]
    exp = root / "experiments" / "22-backfill-training" / "ppo_v2_backfill.yaml"
    if exp.exists():
        assert load_train_config(str(exp), "testbed").to_dict() == recipe
    assert recipe["env_kwargs"]["backfill"] is True and recipe["env_id"] == "aryl_gym/Aryl-v2"
    path = PRETRAINED_DIR / "ppo-v2.yaml"
    if not path.exists():
        pytest.skip("ppo-v2 is not shipped")
    assert yaml.safe_load(path.read_text()) == recipe


def test_predict_with_the_observations_own_mask_takes_the_one_observation_pass(monkeypatch):
    """The rollout loop passes the env's masks to ``predict``; when they are the observation's
    own ``action_mask`` the one-observation pass (preallocated inputs, numpy first) serves the
    call with masked_argmax's action, and a mask that differs goes to masked_argmax, which
    honours it."""
    from aryl_gym.agents import learned
    from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent

    if not (PRETRAINED_DIR / "ppo-v1.zip").exists():
        pytest.skip("the shipped ppo-v1 weights are absent")
    agent = load_agent("ppo-v1")
    batch, masks = _masked_batch(agent.make_env("testbed"), 48)
    states = [({k: v[i] for k, v in batch.items()}, masks[i]) for i in range(len(masks))]
    want = [int(agent.masked_argmax(o, m)) for o, m in states]
    calls = []
    real = learned.LearnedAgent.masked_argmax
    monkeypatch.setattr(learned.LearnedAgent, "masked_argmax",
                        lambda self, o, m: calls.append(1) or real(self, o, m))
    got = [int(agent.predict(o, action_masks=m)[0]) for o, m in states]
    assert got == want and calls == []  # all served by the one-observation pass
    o, m = next((o, m) for o, m in states if m.sum() >= 2)
    only = np.zeros_like(m)
    only[np.flatnonzero(m)[-1]] = True  # a narrower mask than the observation's
    a = int(agent.predict(o, action_masks=only)[0])
    assert calls == [1] and a == int(np.flatnonzero(m)[-1])
    assert learned._same_mask(m, o["action_mask"]) and not learned._same_mask(only, o["action_mask"])
    assert not learned._same_mask(m[:-1], o["action_mask"][:-1].reshape(1, -1))
