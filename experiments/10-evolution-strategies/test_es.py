"""Evolution strategies on the action head (es.py): the batched per-row heads act as
the deployed argmax does, candidates share their episodes, the run is deterministic (also over
worker processes), ranks and fitness by hand, bad settings and bad CLI input."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent
from es import (
    ESSettings,
    HeadBatch,
    RolloutEnvFactory,
    centred_ranks,
    es_finetune,
    fitness,
    head_vector,
    play,
    set_head_vector,
)

from aryl_gym.rollout import env_action_masks

pytestmark = pytest.mark.skipif(not (PRETRAINED_DIR / "ppo-v1-kickstart.zip").exists(), reason="ppo-v1-kickstart is not shipped")

SEED = 40002  # a training-world episode seed no recipe uses


@pytest.fixture(scope="module")
def agent_factory():
    """ppo-v1-kickstart and its rollout env on the ``tiny`` scenario (short episodes; the set policy
    serves any cluster); ``for_agent`` gives the training worlds themselves."""
    agent = load_agent("ppo-v1-kickstart")
    assert RolloutEnvFactory.for_agent(agent).config["scenario"] == "testbed"
    return agent, RolloutEnvFactory({**agent.config, "scenario": "tiny", "worlds": {}}, agent.env_id)


def _states(agent, env, n: int = 200):
    obs, _ = env.reset(seed=SEED, options={"episode_seed": SEED})
    out, masks = [], []
    for _ in range(n):
        m = np.asarray(env_action_masks(env), dtype=bool)
        out.append(obs)
        masks.append(m)
        a = int(agent.masked_argmax({k: np.asarray(v)[None] for k, v in obs.items()}, m[None])[0])
        obs, _, te, tr, _ = env.step(a)
        if te or tr:
            break
    return out, np.stack(masks)


def test_head_vector_round_trip_and_errors(agent_factory):
    agent, _ = agent_factory
    model = copy.deepcopy(agent.model)
    v = head_vector(model.policy)
    assert v.shape == (3 * 65,)  # grant, release, commit scorers of width 64, with biases
    set_head_vector(model.policy, v + 1.0)
    assert np.allclose(head_vector(model.policy), v + 1.0, atol=1e-6)
    with pytest.raises(ValueError, match="195 parameters"):
        set_head_vector(model.policy, v[:-1])
    with pytest.raises(ValueError, match="non-finite"):
        set_head_vector(model.policy, np.full_like(v, np.nan))
    if (PRETRAINED_DIR / "ppo-testbed.zip").exists():
        with pytest.raises(ValueError, match="SlotActionHead"):
            head_vector(load_agent("ppo-testbed").model.policy)


def test_per_row_heads_act_as_the_deployed_argmax(agent_factory):
    """Rows with the shipped head act as ``LearnedAgent.masked_argmax``; rows with another head
    as the same model with that head written in, in one mixed batch."""
    agent, factory = agent_factory
    obs, masks = _states(agent, factory())
    n = len(obs)
    v = head_vector(agent.model.policy)
    other = v + np.random.default_rng(0).normal(0.0, 0.3, v.size)
    twin = copy.deepcopy(agent)
    set_head_vector(twin.model.policy, other)
    batch = {k: np.stack([np.asarray(o[k]) for o in obs]) for k in obs[0]}
    want_v = agent.masked_argmax(batch, masks)
    want_o = twin.masked_argmax(batch, masks)
    assert (want_v != want_o).any()  # the other head acts differently somewhere
    rows = np.arange(n) % 2 == 1
    heads = np.where(rows[:, None], other[None], v[None])
    got = HeadBatch(agent.model).actions(obs, masks, heads)
    assert (got == np.where(rows, want_o, want_v)).all()
    with pytest.raises(ValueError, match="heads must have shape"):
        HeadBatch(agent.model).actions(obs, masks, heads[:-1])


def _argmax_episode(agent, env, seed: int) -> float:
    from aryl_gym.rollout import result_from_info

    obs, _ = env.reset(seed=seed, options={"episode_seed": seed})
    while True:
        m = np.asarray(env_action_masks(env), dtype=bool)
        a = int(agent.masked_argmax({k: np.asarray(v)[None] for k, v in obs.items()}, m[None])[0])
        obs, _, te, tr, info = env.step(a)
        if te or tr:
            return float(result_from_info(info).avg_jct)


def test_play_matches_the_plain_argmax_episode(agent_factory):
    """Two episodes in lockstep with the shipped head: each ends as the plain one-env loop does."""
    agent, factory = agent_factory
    v = head_vector(agent.model.policy)
    jct, thr = play(agent.model, [factory(), factory()], [SEED, SEED + 1], np.stack([v, v]))
    assert jct[0] != jct[1]
    for s, j in zip([SEED, SEED + 1], jct):
        assert j == _argmax_episode(agent, factory(), s)
    assert not thr.any()
    with pytest.raises(ValueError, match="one of each per episode"):
        play(agent.model, [factory()], [SEED, SEED], np.stack([v, v]))


def test_centred_ranks_and_fitness_by_hand():
    assert centred_ranks(np.array([3.0, 1.0, 2.0])).tolist() == [0.5, -0.5, 0.0]
    assert centred_ranks(np.array([1.0, 1.0, 5.0, -np.inf])).tolist() == [0.0, 0.0, 0.5, -0.5]
    assert centred_ranks(np.array([7.0])).tolist() == [0.0]
    jct = np.array([[100.0, 400.0], [200.0, 200.0], [100.0, 100.0]])
    thr = np.array([[False, False], [False, False], [False, True]])
    f = fitness(jct, thr)
    assert f[0] == pytest.approx(-np.log(200.0)) and f[1] == pytest.approx(-np.log(200.0))
    assert f[2] == -np.inf  # a thrashed episode ranks last
    assert fitness(np.array([[np.nan, 1.0]]), np.zeros((1, 2), bool))[0] == -np.inf


def _tiny(agent, factory, workers: int, tmp_path: Path):
    model = copy.deepcopy(agent.model)
    path = tmp_path / "start.zip"
    model.save(path)
    thetas: list[np.ndarray] = []
    rows = es_finetune(model, factory, ESSettings(iterations=2, pairs=1, traces=1, first_episode_seed=SEED),
                       workers=workers, model_path=str(path), on_iteration=lambda r, t: thetas.append(t.copy()))
    return rows, thetas, head_vector(model.policy)


def test_es_is_deterministic_across_workers_and_starts_at_ratio_one(agent_factory, tmp_path):
    agent, factory = agent_factory
    r1, t1, h1 = _tiny(agent, factory, 1, tmp_path)
    r2, t2, h2 = _tiny(agent, factory, 2, tmp_path)
    assert [r.ratio_to_start for r in r1] == [r.ratio_to_start for r in r2]
    assert all((a == b).all() for a, b in zip(t1, t2))
    assert r1[0].ratio_to_start == 1.0  # theta is theta_0 before the first update: same episodes
    assert r1[0].seeds == [SEED] and r1[1].seeds == [SEED + 1]
    assert np.allclose(h1, t1[-1], atol=1e-6)  # the model holds the last theta
    assert not np.allclose(t1[-1], head_vector(agent.model.policy))


def test_settings_and_worker_errors(agent_factory):
    agent, factory = agent_factory
    for kw in ({"iterations": 0}, {"pairs": 1.5}, {"traces": True}, {"sigma": 0.0}, {"learning_rate": float("inf")}):
        with pytest.raises(ValueError, match="ESSettings"):
            ESSettings(**kw)
    with pytest.raises(ValueError, match="model_path"):
        es_finetune(agent.model, factory, ESSettings(iterations=1), workers=2)


def _script():
    import es_finetune

    return es_finetune


@pytest.mark.parametrize("argv, text", [
    (["--out", "x.pt"], "give a .zip path"),
    (["--out", "x.zip", "--iterations", "0"], "--iterations must be >= 1"),
    (["--out", "x.zip", "--sigma", "-1"], "--sigma must be a finite number > 0"),
    (["--out", "x.zip", "--lr", "nan"], "--lr must be a finite number > 0"),
    (["--out", "x.zip", "--agent", "no-such-agent"], "--agent no-such-agent"),
])
def test_cli_errors(argv, text, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        _script().main(argv)
    assert text in capsys.readouterr().err


def test_cli_from_iteration_needs_an_earlier_run(tmp_path, capsys):
    with pytest.raises(SystemExit):
        _script().main(["--out", str(tmp_path / "m.zip"), "--from-iteration", "3"])
    assert "not found (run without it first, or give --thetas)" in capsys.readouterr().err


def test_cli_from_iteration_writes_that_head(tmp_path, capsys):
    """A head history of two iterations: OUT gets the second head, and a wrong shape is refused."""
    agent = load_agent("ppo-v1-kickstart")
    v = head_vector(agent.model.policy)
    hist = tmp_path / "run.thetas.npy"
    np.save(hist, np.stack([v + 0.5, v - 0.25]))
    out = tmp_path / "m.zip"
    assert _script().main(["--out", str(out), "--from-iteration", "2", "--thetas", str(hist)]) == 0
    got = load_agent(str(out))
    assert np.allclose(head_vector(got.model.policy), v - 0.25, atol=1e-6)
    assert out.with_suffix(".yaml").exists()  # the agent's config beside it
    np.save(tmp_path / "bad.npy", np.zeros((1, 5)))
    with pytest.raises(SystemExit):
        _script().main(["--out", str(out), "--from-iteration", "1", "--thetas", str(tmp_path / "bad.npy")])
    assert "195 parameters" in capsys.readouterr().err
