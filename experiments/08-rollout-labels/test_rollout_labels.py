"""Rollout labels (labels.py): a branch replays the main episode exactly,
pruning drops only branches equal to the policy's own action, the label file and the fine-tune
(and its no-relabelling control), bad settings and bad CLI input."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from aryl_gym.agents.learned import PRETRAINED_DIR, load_agent
from labels import (
    LabelSettings,
    _Argmax,
    _Branch,
    _play_branches,
    probe_episode,
)

pytestmark = pytest.mark.skipif(not (PRETRAINED_DIR / "ppo-v1-kickstart.zip").exists(), reason="ppo-v1-kickstart is not shipped")

SEED = 40001  # a training-world episode seed no recipe uses


def _script():
    import rollout_labels

    return rollout_labels


@pytest.fixture(scope="module")
def agent_env():
    agent = load_agent("ppo-v1-kickstart")
    return agent, _script()._agent_env(agent)


def test_a_branch_with_the_policys_own_action_replays_the_episode(agent_env):
    """Deep-copied mid-episode, the env played on by the same argmax policy collects exactly the
    rewards the main episode collects from there (the simulator is deterministic)."""
    from aryl_gym.rollout import env_action_masks

    agent, env = agent_env
    act = _Argmax(agent.model)
    obs, _ = env.reset(seed=SEED, options={"episode_seed": SEED})
    rewards: list[float] = []
    branch = None
    while True:
        m = np.asarray(env_action_masks(env), dtype=bool)
        own = int(np.argmax(act.probs([obs], [m])[0]))
        if len(rewards) == 300:
            branch = _Branch(0, own, copy.deepcopy(env), int(env.unwrapped.decision_point))
        obs, r, term, trunc, _ = env.step(own)
        rewards.append(float(r))
        if term or trunc:
            break
    assert branch is not None and len(rewards) > 600
    _play_branches([branch], act, {}, LabelSettings(prune=False))
    expected = 0.0
    for r in rewards[300:]:
        expected += r
    assert branch.outcome == "finished"
    assert branch.steps == len(rewards) - 300
    assert branch.ret == expected


def test_pruning_drops_only_branches_equal_to_the_own_action(agent_env):
    agent, env = agent_env
    runs = {}
    for prune in (True, False):
        s = LabelSettings(probe_share=0.02, prune=prune)
        runs[prune] = probe_episode(agent.model, env, SEED, s, np.random.default_rng(3))
    (pa, sa), (pb, sb) = runs[True], runs[False]
    assert sa["probes"] == sb["probes"] > 0
    assert sa["pruned"] > 0 and sb["pruned"] == 0
    assert sa["branch_steps"] < sb["branch_steps"]
    assert [p["label"] for p in pa] == [p["label"] for p in pb]
    for p, q in zip(pa, pb):
        assert p["gain"] == pytest.approx(q["gain"], abs=1e-9)
        assert p["gain"] >= 0.0 and (p["gain"] > 0.0) == (p["label"] != p["own"])
        # a branch the pruned run dropped as equal ends, played out, with the own action's return
        for (a1, _, o1), (a2, r2, o2) in zip(p["branches"], q["branches"]):
            assert a1 == a2
            if o1 == "same":
                assert o2 == ("thrashing" if sb["thrashing"] else "finished")
                assert r2 == pytest.approx(q["own_return"], abs=1e-9)


def test_playing_branches_early_changes_nothing(agent_env):
    """With batch 1 the pending branches play after each decision point that leaves 4 or more
    (bounded memory); with a batch larger than all of them, once at the episode's end. The same
    records either way."""
    agent, env = agent_env
    out = {}
    for batch in (1, 10_000):
        s = LabelSettings(probe_share=0.02, batch=batch)
        out[batch] = probe_episode(agent.model, env, SEED, s, np.random.default_rng(5))
    (pa, sa), (pb, sb) = out[1], out[10_000]
    assert sa == sb and sa["probes"] >= 8
    assert [(p["label"], p["gain"], p["branches"]) for p in pa] == [(p["label"], p["gain"], p["branches"]) for p in pb]


def test_label_file_and_finetune_with_its_control(agent_env, tmp_path):
    from labels import collect_rollout_labels, finetune_on_labels

    from aryl_gym.train.bc import load_demos

    agent, env = agent_env
    out = tmp_path / "labels.npz"
    tot = collect_rollout_labels(agent.model, env, [SEED], out, LabelSettings(probe_share=0.03), rng_seed=1)
    obs, actions, masks = load_demos(out)
    d = np.load(out)
    assert len(actions) == int(tot["probes"]) > 0
    assert int(np.sum(d["actions"] != d["own"])) == int(tot["switched"])
    assert np.all(masks[np.arange(len(actions)), actions])  # every label is a valid action
    assert np.all((d["gain"] > 0) == (d["actions"] != d["own"]))
    assert np.all(d["p_top"] < 0.8)

    ctrl = load_agent("ppo-v1-kickstart")
    fit = finetune_on_labels(ctrl.model, [out], out, tmp_path / "ctrl.npz", margin=float("inf"), repeat=2, epochs=1)
    assert fit["relabelled"] == 0 and np.isnan(fit["relabelled_taken"])
    train = np.load(tmp_path / "ctrl.npz")
    assert len(train["actions"]) == 3 * len(actions)
    assert np.array_equal(train["actions"][: len(actions)], d["own"])  # anchors: the model's own argmax

    model = load_agent("ppo-v1-kickstart").model
    fit = finetune_on_labels(model, [out], out, tmp_path / "ft.npz", margin=0.0, repeat=2, epochs=1)
    assert fit["relabelled"] == int(tot["switched"])
    train = np.load(tmp_path / "ft.npz")
    assert np.array_equal(train["actions"][len(actions): 2 * len(actions)], d["actions"])


@pytest.mark.parametrize("horizon_h", [None, 2.0])
def test_futures_pair_the_own_action_exactly(agent_env, horizon_h):
    """Futures mode: a branch with the policy's *own* action forks, after its commit, onto the
    probe's fresh futures exactly as the main episode's own fork does (the same seeds give the
    same futures), so its value on each future equals the own action's to the last bit, and a
    different future gives a different return."""
    from labels import _Probe

    from aryl_gym.rollout import env_action_masks

    agent, env = agent_env
    act = _Argmax(agent.model)
    obs, _ = env.reset(seed=SEED, options={"episode_seed": SEED})
    rewards: list[float] = []
    branch, fp, t, commit = None, None, 0, 0
    while fp is None or fp.own_env is None:
        m = np.asarray(env_action_masks(env), dtype=bool)
        own = int(np.argmax(act.probs([obs], [m])[0]))
        point = int(env.unwrapped.decision_point)
        if branch is None and len(rewards) >= 300:
            t = len(rewards)
            branch = _Branch(0, own, copy.deepcopy(env), point)
            cut = float(env.unwrapped.sim.now) + (horizon_h or np.inf) * 3600.0
            fp = _Probe([11, 11, 12], cut)
        obs, r, term, trunc, _ = env.step(own)
        rewards.append(float(r))
        assert not (term or trunc)
        if branch is not None and env.unwrapped.decision_point != branch.point:
            fp.own_env = copy.deepcopy(env)  # type: ignore[union-attr]
            commit = len(rewards)
    assert branch is not None and fp is not None
    forks = _play_branches([branch], act, {}, LabelSettings(prune=False, futures=3), {0: fp})
    assert branch.outcome == "forked" and fp.own_env is None
    alt = sorted((b for b in forks if b.first is not None), key=lambda b: b.future)
    mine = sorted((b for b in forks if b.first is None), key=lambda b: b.future)
    assert [b.future for b in alt] == [b.future for b in mine] == [0, 1, 2]
    head = sum(rewards[t:commit])
    assert branch.ret == pytest.approx(head, abs=1e-9)
    for a, b in zip(alt, mine):
        assert a.ret == b.ret and a.steps == b.steps and a.outcome == b.outcome
        assert a.outcome == ("horizon" if horizon_h else "finished")
    assert mine[0].ret == mine[1].ret != mine[2].ret  # seeds 11, 11, 12


@pytest.mark.parametrize("kw", [{"threshold": 0.0}, {"threshold": 1.5}, {"min_prob": -0.1},
                                {"alternatives": 0}, {"probe_share": 2.0}, {"batch": 0},
                                {"futures": -1}, {"futures": 1.5}, {"horizon_h": 3.0},
                                {"futures": 2, "horizon_h": 0.0}, {"futures": 2, "horizon_h": float("inf")}])
def test_bad_settings(kw):
    with pytest.raises(ValueError, match=list(kw)[-1]):
        LabelSettings(**kw)


def test_cli_names_bad_input(tmp_path, capsys):
    mod = _script()
    with pytest.raises(SystemExit):
        mod.main(["finetune", "--labels", str(tmp_path / "nope.npz"), "--anchors", str(tmp_path / "nope.npz"),
                  "--out", str(tmp_path / "m.zip")])
    assert "no such file" in capsys.readouterr().err
    f = tmp_path / "x.npz"
    np.savez(f, a=np.zeros(2))
    with pytest.raises(SystemExit):
        mod.main(["finetune", "--labels", str(f), "--anchors", str(f), "--out", str(tmp_path / "m.pt")])
    assert "arrays" in capsys.readouterr().err  # x.npz is no labels file: named before the .zip check
    lab = tmp_path / "lab.npz"
    np.savez(lab, **{"obs/jobs": np.zeros((1, 2)), "actions": np.zeros(1), "masks": np.ones((1, 2)),
                     "own": np.zeros(1), "gain": np.zeros(1)})
    with pytest.raises(SystemExit):
        mod.main(["finetune", "--labels", str(lab), "--anchors", str(lab), "--out", str(tmp_path / "m.pt")])
    assert "give a .zip path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["finetune", "--labels", str(lab), "--anchors", str(f), "--out", str(tmp_path / "m.zip")])
    assert "--anchors" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["collect", "--seeds", "0-x", "--out", str(tmp_path / "l.npz")])
    assert "seed" in capsys.readouterr().err.lower()
    with pytest.raises(SystemExit):
        mod.main(["collect", "--seeds", "1", "--alternatives", "0", "--out", str(tmp_path / "l.npz")])
    assert "--alternatives must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["collect", "--seeds", "1", "--horizon-h", "2", "--out", str(tmp_path / "l.npz")])
    assert "horizon_h needs futures" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["collect", "--seeds", "1", "--futures", "2", "--horizon-h", "-1", "--out", str(tmp_path / "l.npz")])
    assert "--horizon-h must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        mod.main(["finetune", "--labels", str(lab), "--anchors", str(lab), "--min-t", "-1",
                  "--out", str(tmp_path / "m.zip")])
    assert "--min-t must be a finite number >= 0" in capsys.readouterr().err


def test_expected_labels_by_hand():
    """Values = return to the commit + mean return over the fresh futures, paired by future; an
    action with a thrashing fork loses; a probe whose alternatives all equal the own action keeps it."""
    from labels import _expected_labels

    def br(probe, first, ret, outcome, future=-1):
        b = _Branch(probe, first, None, 0, future=future)
        b.ret, b.outcome = ret, outcome
        return b

    rewards = [-1.0] * 6
    probes = [{"t": 0, "own": 3}, {"t": 4, "own": 2}]
    branches = [
        br(0, 5, -1.5, "forked"), br(0, 5, -9.0, "finished", 0), br(0, 5, -21.0, "horizon", 1),
        br(0, 7, -1.0, "forked"), br(0, 7, -2.0, "thrashing", 0), br(0, 7, -3.0, "finished", 1),
        br(0, None, -10.0, "finished", 0), br(0, None, -20.0, "horizon", 1),
        br(1, 4, -1.0, "same"),
    ]
    _expected_labels(probes, branches, rewards, {0: 2, 1: 5}, futures=2)
    # own: -2 + [-10, -20]; action 5: -1.5 + [-9, -21]: paired differences [1.5, -0.5]
    assert probes[0]["label"] == 5
    assert probes[0]["gain"] == pytest.approx(0.5)
    assert probes[0]["gain_se"] == pytest.approx(np.std([1.5, -0.5], ddof=1) / np.sqrt(2))
    assert (probes[1]["label"], probes[1]["gain"], probes[1]["gain_se"]) == (2, 0.0, 0.0)
    # the thrashing action is never preferred, however high its mean
    assert all(p["label"] != 7 for p in probes)
