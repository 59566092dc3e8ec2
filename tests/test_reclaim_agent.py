"""The learned reclaim agent: the dense event state and its features (observation v1 of
ArylReclaim), the numpy set policy and its loader, the DAgger teacher, the training command and
the agent on the reclaim leaderboard suite."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    milp_reclaim,
    optimal_reclaim,
    reclaim_preemptions,
)
from aryl_gym.agents.reclaim_learned import (
    ReclaimSetAgent,
    is_reclaim_agent_source,
    load_reclaim_agent,
    save_weights,
    shipped_reclaim_agents,
)

from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.reclaim_features import CONTEXT_FEATURES_V1, SERVER_FEATURES_V1, ReclaimState
from aryl_gym.reclaim_snapshots import Snapshot, synthetic_snapshots


def _hand_event() -> Snapshot:
    """Job 1 (inelastic, 2 workers) on servers 20 and 21, job 2 (inelastic) on 22, job 3
    (elastic, 4 workers, w_min 2) with 2 workers on 23 and 2 elsewhere. Returning 2 servers
    preempts at least one job: 23 is free (job 3 scales in to 2), then any one of 20, 21, 22."""
    inst = ReclaimInstance(
        loaned=[21, 20, 23, 22],
        srv_jobs={20: {1: 1}, 21: {1: 1}, 22: {2: 1}, 23: {3: 2}},
        srv_flex={23: {3: 2}},
        workers={1: 2, 2: 1, 3: 4},
        w_min={1: 2, 2: 1, 3: 2},
        elastic={3: True},
        g={1: 4, 2: 2, 3: 1},
    )
    return Snapshot(inst, 2, "hand", 0.0, (8, 8, 8, 8))


def _v0_reference(snap: Snapshot, picks: list[int]) -> np.ndarray:
    """The snapshot env's ``servers`` rows as it computed them before ReclaimState (dicts)."""
    inst = snap.inst
    slots = sorted(inst.loaned)
    removed: dict[int, int] = {}
    dead: set[int] = set()
    for s in picks:
        for j, k in inst.srv_jobs.get(s, {}).items():
            removed[j] = removed.get(j, 0) + k
            if j not in dead and not (inst.elastic.get(j, False) and inst.workers[j] - removed[j] >= inst.w_min[j]):
                dead.add(j)
    S = np.zeros((len(slots), 8), dtype=np.float32)
    caps = snap.cap if len(snap.cap) == len(slots) else (8,) * len(slots)
    for i, s in enumerate(slots):
        cap = float(max(caps[i], 1))
        on = inst.srv_jobs.get(s, {})
        fl = inst.srv_flex.get(s, {})
        busy = sum(k * inst.g.get(j, 1) for j, k in on.items())
        flex = sum(fl.get(j, 0) * inst.g.get(j, 1) for j in on)
        S[i] = [1.0, s in picks, busy / cap, (busy - flex) / cap, flex / cap, min(len(on) / 8.0, 1.0), 0.0,
                busy == flex]
        if s not in picks:
            cost = 0
            for j, k in on.items():
                if j in dead:
                    continue
                r = removed.get(j, 0) + k
                cost += int(not (inst.elastic.get(j, False) and inst.workers[j] - r >= inst.w_min[j]))
            S[i, 6] = min(cost / 8.0, 1.0)
    return np.clip(S, 0.0, 1.0)


# ------------------------------------------------------------------------------------------------
# the state and its features
# ------------------------------------------------------------------------------------------------
def test_state_v0_features_and_preemptions_match_the_reference() -> None:
    rng = np.random.default_rng(5)
    for sn in synthetic_snapshots(25, 2, 40, seed=11, elastic_p=0.6):
        st = ReclaimState.from_snapshot(sn)
        order = [int(x) for x in rng.permutation(st.L)]
        for k in range(sn.n + 1):
            picked = [st.servers[i] for i in order[:k]]
            assert np.array_equal(st.features_v0(), _v0_reference(sn, picked))
            assert st.preempted == reclaim_preemptions(sn.inst, picked)
            if k < sn.n:
                st.pick(order[k])


def test_v1_features_by_hand() -> None:
    st = ReclaimState.from_snapshot(_hand_event())
    assert st.servers == [20, 21, 22, 23]
    f = {name: i for i, name in enumerate(SERVER_FEATURES_V1)}
    S, C = st.features_v1()
    assert S.shape == (4, len(SERVER_FEATURES_V1)) and C.shape == (len(CONTEXT_FEATURES_V1),)
    assert S.dtype == np.float32 and 0 <= S.min() and S.max() <= 1
    # costs 1, 1, 1, 0
    assert S[:, f["cost"]].tolist() == [0.125, 0.125, 0.125, 0.0]
    assert S[:, f["cost_zero"]].tolist() == [0, 0, 0, 1]
    # taking 20 preempts job 1, which frees 21 (and vice versa); 22 frees nothing
    assert S[:, f["freed"]].tolist() == [0.125, 0.125, 0.0, 0.0]
    assert S[:, f["freed_rel"]].tolist() == [0.5, 0.5, 0.0, 0.0]  # / 2 picks to make
    assert np.allclose(S[:, f["ratio"]], [0.5 / 8, 0.5 / 8, 1 / 8, 0.0])
    # job 1 would also be preempted by 21: shared 1; it sits on 2 candidates: span 2
    assert np.allclose(S[:, f["shared"]], [1 / 16, 1 / 16, 0, 0])
    assert np.allclose(S[:, f["span"]], [2 / 8, 2 / 8, 1 / 8, 0])
    # lost GPUs: job 1's whole loaned allocation (2 workers x 4 GPUs), job 2's 2, job 3 scales in by 2
    assert np.allclose(S[:, f["lost"]], [8 / 64, 8 / 64, 2 / 64, 2 / 64])
    assert np.allclose(S[:, f["killed"]], [4 / 8, 4 / 8, 2 / 8, 0])
    # job 3 would be left with no slack after 23 goes: fragile
    assert S[:, f["fragile"]].tolist() == [0, 0, 0, 0.125]
    assert np.allclose(S[:, f["cost_rank"]], [1 / 3, 1 / 3, 1 / 3, 0])
    assert np.allclose(S[:, f["ratio_rank"]], [1 / 3, 1 / 3, 1, 0])
    assert np.allclose(S[:, f["freed_rank"]], [0, 0, 2 / 3, 2 / 3])
    # lookahead: every first pick can end with one preemption (20 then 21; 22 or 21 then 23; ...)
    assert np.allclose(S[:, f["look"]], 1 / 2 / 8) and not S[:, f["look_gap"]].any()
    assert not S[:, f["look_rank"]].any()
    c = {name: C[i] for i, name in enumerate(CONTEXT_FEATURES_V1)}
    assert c["to_pick"] == 0.5 and c["picked"] == 0 and c["zero_cover"] == 0.5 and c["zero_share"] == 0.25
    assert c["one_share"] == 0.75 and np.isclose(c["elastic_share"], 1 / 3) and c["look_min"] == 1 / 16
    # take 20: job 1 dies, 21 becomes free; picked rows are zero
    assert st.pick(0) == 1
    S, C = st.features_v1()
    assert not S[0].any()
    assert S[1, f["cost_zero"]] == 1 and S[1, f["dead"]] == 0.5
    assert np.isclose(C[CONTEXT_FEATURES_V1.index("dead_share")], 1 / 3)
    with pytest.raises(ValueError, match="cannot be picked"):
        st.pick(0)
    with pytest.raises(ValueError, match="cannot be picked"):
        st.pick(9)


def test_features_follow_a_permutation_of_the_servers() -> None:
    """Renaming the servers (so that their slot order changes) permutes the rows and nothing else."""
    sn = synthetic_snapshots(1, 30, 30, seed=3)[0]
    inst = sn.inst
    rng = np.random.default_rng(0)
    new_id = {s: int(x) for s, x in zip(sorted(inst.loaned), rng.permutation(100)[:30] + 500)}
    inst2 = ReclaimInstance(
        loaned=[new_id[s] for s in inst.loaned],
        srv_jobs={new_id[s]: dict(v) for s, v in inst.srv_jobs.items()},
        srv_flex={new_id[s]: dict(v) for s, v in inst.srv_flex.items()},
        workers=dict(inst.workers), w_min=dict(inst.w_min), elastic=dict(inst.elastic), g=dict(inst.g),
    )
    a = ReclaimState(inst, sn.n)
    b = ReclaimState(inst2, sn.n)
    row_b = {s: i for i, s in enumerate(b.servers)}
    perm = [row_b[new_id[s]] for s in a.servers]  # a's row i is b's row perm[i]
    for k in range(3):
        sa, ca = a.features_v1()
        sb, cb = b.features_v1()
        assert np.array_equal(sa, sb[perm]) and np.array_equal(ca, cb)
        assert np.array_equal(a.features_v0()[:, 2:], b.features_v0()[perm][:, 2:])
        a.pick(k)
        b.pick(perm[k])


def test_agent_scores_are_permutation_equivariant_and_batched_predict() -> None:
    agent = _random_agent(hidden=8, seed=1)
    rng = np.random.default_rng(2)
    x = rng.random((17, agent.n_features)).astype(np.float32)
    p = rng.permutation(17)
    assert np.allclose(agent.scores(x)[p], agent.scores(x[p]), atol=1e-5)
    env = ArylReclaimEnv(snapshots=synthetic_snapshots(3, 5, 12, seed=4), observation="v1")
    o1, _ = env.reset(options={"index": 0})
    o2, _ = env.reset(options={"index": 1})
    batch = {k: np.stack([o1[k], o2[k]]) for k in o1}
    acts, _ = agent.predict(batch)
    assert acts.tolist() == [agent.predict(o1)[0], agent.predict(o2)[0]]


def _shipped(seed: int = 0) -> ReclaimSetAgent:
    """The shipped reclaim-v1 (skips when its weights are absent, as in a partial checkout)."""
    if "reclaim-v1" not in shipped_reclaim_agents():
        pytest.skip("agents/pretrained/reclaim-v1.npz is not shipped (aryl-gym train-reclaim)")
    return load_reclaim_agent("reclaim-v1", seed=seed)


def _random_agent(hidden: int = 8, seed: int = 0) -> ReclaimSetAgent:
    rng = np.random.default_rng(seed)
    f = 6 + len(SERVER_FEATURES_V1) + len(CONTEXT_FEATURES_V1)
    return ReclaimSetAgent({
        "W1": rng.normal(size=(f, hidden)), "b1": rng.normal(size=hidden),
        "W2": rng.normal(size=(3 * hidden, hidden)), "b2": rng.normal(size=hidden),
        "w3": rng.normal(size=hidden), "b3": np.zeros(1),
    })


# ------------------------------------------------------------------------------------------------
# the env's observation v1
# ------------------------------------------------------------------------------------------------
def test_env_observation_v1_snapshot_mode() -> None:
    from gymnasium.utils.env_checker import check_env

    snaps = [_hand_event(), *synthetic_snapshots(4, 3, 15, seed=2)]
    env = ArylReclaimEnv(snapshots=snaps, observation="v1", max_servers=20)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(options={"index": 0})
    assert env.observation_space.contains(obs)
    st = ReclaimState.from_snapshot(snaps[0])
    s1, c1 = st.features_v1()
    assert np.array_equal(obs["servers_v1"][:4], s1) and not obs["servers_v1"][4:].any()
    assert np.array_equal(obs["reclaim_v1"], c1)
    # the v0 keys are the same as without the option
    obs0, _ = ArylReclaimEnv(snapshots=snaps, max_servers=20).reset(options={"index": 0})
    assert set(obs0) == {"servers", "cluster", "reclaim", "action_mask"}
    for k in obs0:
        assert np.array_equal(obs0[k], obs[k])
    with pytest.raises(ValueError, match="observation must be one of v0, v1"):
        ArylReclaimEnv(snapshots=snaps, observation="v2")


def test_env_observation_v1_live_mode_matches_the_snapshot() -> None:
    """At the first reclaim of a basic episode (and after one pick) the live env's servers_v1
    rows of the loaned servers, and its reclaim_v1, are those of the snapshot env on the same
    state (the recorder's view of it); the other inference servers' rows are zero."""
    from aryl_gym.agents.reclaim import instance_from_view

    live = ArylReclaimEnv(scenario="basic", observation="v1")
    obs, _ = live.reset(options={"episode_seed": 1})
    assert live.observation_space.contains(obs) and live.need >= 1
    sim = live.sim
    inst = instance_from_view(sim.view)
    loaned = sorted(inst.loaned)
    snap = Snapshot(inst, live.need, "live", sim.now, tuple(int(sim.srv_cap[s]) for s in loaned))
    senv = ArylReclaimEnv(snapshots=[snap], observation="v1")
    sobs, _ = senv.reset(options={"index": 0})
    rows = [s - live.n_train for s in loaned]
    assert np.array_equal(obs["servers_v1"][rows], sobs["servers_v1"][: len(rows)])
    assert np.array_equal(obs["reclaim_v1"], sobs["reclaim_v1"])
    assert np.array_equal(obs["servers"][rows][:, [2, 3, 4, 5, 6, 7]], sobs["servers"][: len(rows)][:, [2, 3, 4, 5, 6, 7]])
    other = np.setdiff1d(np.arange(live.n_inf), rows)
    assert not obs["servers_v1"][other].any()
    if live.need >= 2:  # after one pick, still the same
        obs, *_ = live.step(rows[0])
        sobs, *_ = senv.step(0)
        assert np.array_equal(obs["servers_v1"][rows], sobs["servers_v1"][: len(rows)])


# ------------------------------------------------------------------------------------------------
# the agent and its loader
# ------------------------------------------------------------------------------------------------
def test_shipped_agent_is_valid_and_optimal_on_the_hand_event() -> None:
    agent = _shipped()
    assert is_reclaim_agent_source("reclaim-v1") and not is_reclaim_agent_source("ppo-v1")
    assert agent.reclaim_env_kwargs == {"observation": "v1"}
    snaps = [_hand_event(), *synthetic_snapshots(6, 4, 30, seed=9)]
    env = ArylReclaimEnv(snapshots=snaps, observation="v1")
    for i, sn in enumerate(snaps):
        obs, info = env.reset(options={"index": i})
        while True:
            mask = env.action_masks()
            a, _ = agent.predict(obs, action_masks=mask)
            assert mask[a]  # always a loaned server not yet picked
            obs, _, term, trunc, info = env.step(a)
            assert info["invalid"] == 0
            if term or trunc:
                break
        assert term and len(set(env.picks)) == sn.n and set(env.picks) <= set(sn.inst.loaned)
        if i == 0:
            # the optimum preempts one job; so does the agent (23 first: a scale-in)
            assert info["preemptions"] == 1 == reclaim_preemptions(sn.inst, milp_reclaim(sn.inst, 2))
            assert 23 in env.picks


def test_agent_is_deterministic_and_samples_when_asked() -> None:
    agent = _shipped()
    sn = synthetic_snapshots(1, 40, 40, seed=12)[0]
    env = ArylReclaimEnv(snapshots=[sn], observation="v1")

    def play(det: bool, a: ReclaimSetAgent) -> list[int]:
        obs, _ = env.reset(options={"index": 0})
        while True:
            act, _ = a.predict(obs, deterministic=det)
            obs, _, term, trunc, _ = env.step(act)
            if term or trunc:
                return list(env.picks)

    assert play(True, agent) == play(True, _shipped())
    s1 = play(False, _shipped(seed=3))
    assert s1 == play(False, _shipped(seed=3))
    assert len(set(s1)) == sn.n


def test_agent_bad_inputs(tmp_path: Path) -> None:
    agent = _random_agent()
    obs, _ = ArylReclaimEnv(snapshots=[_hand_event()]).reset(options={"index": 0})
    with pytest.raises(ValueError, match="observation='v1'"):
        agent.predict(obs)
    with pytest.raises(ValueError, match="unknown reclaim agent 'nope'"):
        load_reclaim_agent("nope")
    with pytest.raises(ValueError, match="file not found"):
        load_reclaim_agent(tmp_path / "missing.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.arange(3))
    with pytest.raises(ValueError, match="not a reclaim agent weights file"):
        load_reclaim_agent(bad)
    assert not is_reclaim_agent_source(str(bad))
    w = {k: np.zeros((2, 2)) for k in ("W1", "b1", "W2", "b2", "w3", "b3")}
    with pytest.raises(ValueError, match="inconsistent shapes"):
        ReclaimSetAgent(w)
    with pytest.raises(ValueError, match="lack"):
        ReclaimSetAgent({"W1": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="expected candidate rows"):
        agent.scores(np.zeros((3, 5), dtype=np.float32))
    # a round trip through save_weights keeps the scores
    a = _random_agent(hidden=4, seed=7)
    p = save_weights(tmp_path / "w.npz", {"W1": a.W1, "b1": a.b1, "W2": np.vstack([a.W2a, a.W2mean, a.W2max]),
                                          "b2": a.b2, "w3": a.w3, "b3": np.array([a.b3])}, {"note": "t"})
    b = load_reclaim_agent(p)
    x = np.random.default_rng(0).random((5, a.n_features)).astype(np.float32)
    assert np.array_equal(a.scores(x), b.scores(x)) and b.meta["note"] == "t"
    assert is_reclaim_agent_source(str(p))


# ------------------------------------------------------------------------------------------------
# the teacher and training
# ------------------------------------------------------------------------------------------------
def test_optimal_completion_is_the_best_completion() -> None:
    """After any picks, the teacher's completion preempts as few jobs as the best of all
    completions (exhaustive search), and at the start it is the optimum."""
    from aryl_gym.train.reclaim_agent import optimal_completion

    rng = np.random.default_rng(4)
    for sn in synthetic_snapshots(30, 4, 9, seed=21, elastic_p=0.7):
        st = ReclaimState.from_snapshot(sn)
        opt, total = optimal_completion(st)
        assert total == reclaim_preemptions(sn.inst, optimal_reclaim(sn.inst, sn.n))
        for _ in range(int(rng.integers(0, sn.n))):
            st.pick(int(rng.choice(np.flatnonzero(~st.picked))))
        opt, total = optimal_completion(st)
        assert len(opt) == st.to_pick and not (opt & set(st.picks))
        picked = st.picked_servers()
        rest = [s for s in sn.inst.loaned if s not in picked]
        best = min(reclaim_preemptions(sn.inst, picked + list(c)) for c in itertools.combinations(rest, st.to_pick))
        assert total == best == reclaim_preemptions(sn.inst, picked + [st.servers[i] for i in opt])


def test_torch_scorer_matches_the_numpy_agent() -> None:
    th = pytest.importorskip("torch")
    from aryl_gym.train.reclaim_agent import make_model, state_inputs

    th.manual_seed(0)
    model = make_model(16)
    agent = ReclaimSetAgent(model.numpy_weights())
    sn = synthetic_snapshots(2, 20, 60, seed=8)
    xs = [state_inputs(ReclaimState.from_snapshot(s))[1] for s in sn]
    width = max(len(x) for x in xs)
    x = np.zeros((2, width, agent.n_features), dtype=np.float32)
    m = np.zeros((2, width), dtype=bool)
    for i, xi in enumerate(xs):
        x[i, : len(xi)] = xi
        m[i, : len(xi)] = True
    with th.no_grad():
        out = model(th.from_numpy(x), th.from_numpy(m)).numpy()
    for i, xi in enumerate(xs):
        assert np.allclose(out[i, : len(xi)], agent.scores(xi), atol=1e-4)


def test_train_config_refuses_the_suite_events() -> None:
    from aryl_gym.train.reclaim_agent import ReclaimTrainConfig

    ReclaimTrainConfig().check()
    with pytest.raises(ValueError, match="reclaim suite's evaluation events"):
        ReclaimTrainConfig(scenarios=(("basic", (2, 100)),)).check()
    with pytest.raises(ValueError, match="synthetic seed 0"):
        ReclaimTrainConfig(synthetic_seed=0).check()
    with pytest.raises(ValueError, match="validation basic seed"):
        ReclaimTrainConfig(val_scenarios=(("basic", (100,)),)).check()
    with pytest.raises(ValueError, match="synthetic servers"):
        ReclaimTrainConfig(synthetic_servers=(50, 20)).check()
    with pytest.raises(ValueError, match="rounds must be"):
        ReclaimTrainConfig(rounds=0).check()


def test_train_reclaim_cli_bad_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from aryl_gym.cli import main

    assert main(["train-reclaim", "--out", str(tmp_path / "a"), "--events", "basic:0-2"]) == 2
    assert "suite's evaluation events" in capsys.readouterr().err
    assert main(["train-reclaim", "--out", str(tmp_path / "a"), "--synthetic-seed", "0"]) == 2
    assert "synthetic seed 0" in capsys.readouterr().err
    assert main(["train-reclaim", "--out", str(tmp_path / "a"), "--events", "none", "--events", "basic:100"]) == 2
    assert "cannot be combined" in capsys.readouterr().err
    for bad in (["--synthetic-servers", "50-20"], ["--events", "basic"], ["--elastic", "2"], ["--lr", "-1"],
                ["--rounds", "0"]):
        with pytest.raises(SystemExit):
            main(["train-reclaim", *bad])
        assert "error" in capsys.readouterr().err
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "reclaim-agent.npz").write_bytes(b"x")
    assert main(["train-reclaim", "--out", str(tmp_path / "b"), "--events", "none", "--synthetic", "2"]) == 2
    assert "--overwrite" in capsys.readouterr().err


def _tiny_config(seed: int = 0):
    from aryl_gym.train.reclaim_agent import ReclaimTrainConfig

    return ReclaimTrainConfig(seed=seed, synthetic=6, synthetic_servers=(6, 14), scenarios=(), val_scenarios=(),
                              val_synthetic=3, rounds=2, epochs=1, final_epochs=1, hidden=8, batch=8)


def test_training_is_deterministic_per_seed(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from aryl_gym.train.reclaim_agent import train_reclaim_agent

    runs = [train_reclaim_agent(_tiny_config(), tmp_path / f"r{i}", progress=False, log=lambda m: None, plot=False)
            for i in range(2)]
    a, b = (load_reclaim_agent(r.weights) for r in runs)
    for k in ("W1", "W2a", "w3"):
        assert np.array_equal(getattr(a, k), getattr(b, k))
    assert [c["val_gap"] for c in runs[0].curve] == [c["val_gap"] for c in runs[1].curve]
    assert (tmp_path / "r0" / "curve.csv").is_file() and (tmp_path / "r0" / "config.json").is_file()
    assert a.meta["config"]["seed"] == 0 and a.meta["selected_round"] in (0, 1)
    c = train_reclaim_agent(_tiny_config(seed=1), tmp_path / "r2", progress=False, log=lambda m: None, plot=False)
    assert not np.array_equal(load_reclaim_agent(c.weights).W1, a.W1)


# ------------------------------------------------------------------------------------------------
# the leaderboard
# ------------------------------------------------------------------------------------------------
def test_reclaim_suite_with_the_learned_agent(tmp_path: Path) -> None:
    from aryl_gym.leaderboard.reclaim_suite import reclaim_suite_from_dict, run_reclaim_suite

    _shipped()
    suite = reclaim_suite_from_dict({
        "name": "ra", "kind": "reclaim", "instances": [{"synthetic": 6, "servers": [10, 70], "seed": 31}],
        "policies": ["optimum", "aryl"], "agents": {"learned": "reclaim-v1"},
    })
    res = run_reclaim_suite(suite, tmp_path / "out", extra_agents={
        "factory": "aryl_gym.agents.reclaim_learned:reclaim_v1"}, progress=False)
    agg = json.loads(res.json.read_text())
    ents = {e["entrant"]: e for e in agg["entrants"]}
    assert ents["learned"]["kind"] == "agent" and ents["learned"]["invalid"] == 0
    assert ents["learned"]["preemptions"] == ents["factory"]["preemptions"]  # the same agent
    assert ents["learned"]["preemptions"] >= ents["optimum"]["preemptions"]
    assert set(agg["by_size"]) == {"<60", ">=60"}
    assert sum(b["instances"] for b in agg["by_size"].values()) == agg["instances"]
    assert "By size" in res.markdown.read_text()


def test_lookahead_against_brute_force() -> None:
    """The lookahead of a candidate is its cost plus the m - 1 cheapest other costs, those it
    frees (cost 1, their only preempted job preempted by it) counted 0."""
    rng = np.random.default_rng(0)
    for sn in synthetic_snapshots(25, 3, 30, seed=5):
        st = ReclaimState.from_snapshot(sn)
        for _ in range(int(rng.integers(0, sn.n))):
            st.pick(int(rng.choice(np.flatnonzero(~st.picked))))
        kill = st.edge_kills()
        cost = st.costs()
        cand = ~st.picked
        kills_of = {int(t): set(st.e_j[(st.e_s == t) & kill].tolist()) for t in np.flatnonzero(cand)}
        freed = np.array([sum(1 for t in kills_of if t != s and cost[t] == 1 and kills_of[t] <= kills_of[s])
                          if s in kills_of else 0 for s in range(st.L)], dtype=float)
        look = st.lookahead(cost, freed, cand, st.to_pick)
        for s in kills_of:
            others = sorted(0 if (cost[t] == 1 and kills_of[t] <= kills_of[s]) else cost[t]
                            for t in kills_of if t != s)
            assert look[s] == cost[s] + sum(others[: max(st.to_pick - 1, 0)])
