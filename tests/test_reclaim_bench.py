"""Reclaim at scale: snapshots of reclaim events, the study by size, the reclaim env's snapshot
mode and the reclaim leaderboard suite."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    aryl_reclaim,
    milp_reclaim,
    random_instance,
    reclaim_preemptions,
)

from aryl_gym.reclaim_snapshots import (
    Snapshot,
    load_snapshots,
    record_snapshots,
    save_snapshots,
    synthetic_snapshots,
)


def _same(a: Snapshot, b: Snapshot) -> bool:
    x, y = a.inst, b.inst
    return (
        sorted(x.loaned) == sorted(y.loaned)
        and {s: x.srv_jobs.get(s, {}) for s in x.loaned} == {s: y.srv_jobs.get(s, {}) for s in y.loaned}
        and {s: x.srv_flex.get(s, {}) for s in x.loaned} == {s: y.srv_flex.get(s, {}) for s in y.loaned}
        and {j: x.workers[j] for j in x.jobs()} == {j: y.workers[j] for j in y.jobs()}
        and {j: x.w_min[j] for j in x.jobs()} == {j: y.w_min[j] for j in y.jobs()}
        and {j: bool(x.elastic.get(j, False)) for j in x.jobs()} == {j: y.elastic[j] for j in y.jobs()}
        and {j: x.g.get(j, 1) for j in x.jobs()} == {j: y.g[j] for j in y.jobs()}
        and {j: x.time_one.get(j, 0.0) for j in x.jobs()} == {j: y.time_one[j] for j in y.jobs()}
        and (a.n, a.source, a.time, a.cap) == (b.n, b.source, b.time, b.cap)
    )


def test_snapshot_save_load_round_trip(tmp_path: Path) -> None:
    snaps = synthetic_snapshots(12, 3, 30, seed=4, elastic_p=0.6)
    snaps.append(Snapshot(ReclaimInstance(loaned=[7, 9], srv_jobs={}), 1, "empty", 12.5, (4, 4)))
    path = save_snapshots(tmp_path / "sub" / "s.npz", snaps)
    back = load_snapshots(path)
    assert len(back) == len(snaps)
    for a, b in zip(snaps, back):
        assert _same(a, b)
        assert reclaim_preemptions(a.inst, aryl_reclaim(a.inst, a.n)) == reclaim_preemptions(
            b.inst, aryl_reclaim(b.inst, b.n)
        )
    # not a snapshot file: a clear error naming the file
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.arange(3))
    with pytest.raises(ValueError, match="bad.npz: not a reclaim snapshot file"):
        load_snapshots(bad)
    with pytest.raises(ValueError, match="does not exist"):
        load_snapshots(tmp_path / "nope.npz")


def test_recorded_snapshots_are_the_state_the_rule_saw(tmp_path: Path) -> None:
    """Recording does not change the episode, and each snapshot replays Aryl's actual choice."""
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    snaps = record_snapshots("testbed", [0])
    assert snaps and all(s.source == "testbed/seed0" and s.n >= 1 for s in snaps)
    ref = make_episode("testbed", 0).simulator().run(make_policy("aryl"))
    sim = make_episode("testbed", 0).simulator()
    picks: list[list[int]] = []
    pol = make_policy("aryl")
    inner = pol.reclaim

    def spy(view, n):  # type: ignore[no-untyped-def]
        got = list(inner(view, n))
        picks.append(got)
        return got

    pol.reclaim = spy  # type: ignore[method-assign]
    res = sim.run(pol)
    assert res.avg_jct == ref.avg_jct and res.preemptions == ref.preemptions
    assert len(picks) == len(snaps)
    for sn, got in zip(snaps, picks):
        assert aryl_reclaim(sn.inst, sn.n) == got
        assert reclaim_preemptions(sn.inst, milp_reclaim(sn.inst, sn.n)) <= reclaim_preemptions(sn.inst, got)
    path = save_snapshots(tmp_path / "tb.npz", snaps)
    assert all(_same(a, b) for a, b in zip(snaps, load_snapshots(path)))


def test_reclaim_study_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import main

    snap = tmp_path / "tb.npz"
    rc = main(
        ["reclaim-study", "--scenario", "testbed", "--seeds", "0", "--save-snapshots", str(snap),
         "--synthetic", "6", "--min-servers", "15", "--max-servers", "70", "--json"]
    )
    assert rc == 0
    res = json.loads(capsys.readouterr().out)
    assert res["bins"] == ["<20", "20-59", ">=60"]
    by = {(s["origin"], s["bin"]) for s in res["summary"]}
    assert ("episodes", "<20") in by
    total = sum(s["instances"] for s in res["summary"])
    assert total == len(load_snapshots(snap)) + 6
    for s in res["summary"]:
        assert s["nontrivial"] + s["trivial"] == s["instances"]
        for rule in ("aryl", "default"):
            if s["nontrivial"]:
                assert s[rule]["preemptions"] >= s["optimal_preemptions"]
                assert 0.0 <= s[rule]["equal"] <= 1.0 and 0.0 <= s[rule]["overlap"] <= 1.0
    # the saved snapshots feed a second study
    assert main(["reclaim-study", "--snapshots", str(snap), "--bins", "10"]) == 0
    out = capsys.readouterr().out
    assert "episodes" in out and "paper" in out
    # bad input: exit code 2 with a message, no traceback
    assert main(["reclaim-study", "--snapshots", str(tmp_path / "nope.npz")]) == 2
    assert main(["reclaim-study", "--bins", "60,20"]) == 2
    assert main(["reclaim-study", "--save-snapshots", str(snap)]) == 2


def test_reclaim_env_snapshot_mode(tmp_path: Path) -> None:
    import gymnasium as gym

    import aryl_gym  # noqa: F401

    inst = ReclaimInstance(
        loaned=[20, 21, 22, 23],
        srv_jobs={20: {1: 1}, 21: {1: 1}, 22: {2: 1}, 23: {3: 2}},
        workers={1: 2, 2: 1, 3: 4},
        w_min={1: 2, 2: 1, 3: 2},
        elastic={3: True},
    )
    snaps = [Snapshot(inst, 2, "hand", 0.0, (8, 8, 8, 8))] + synthetic_snapshots(5, 3, 12, seed=1)
    path = save_snapshots(tmp_path / "s.npz", snaps)
    env = gym.make("aryl_gym/ArylReclaim-v1", snapshots=str(path), optimum=True, max_servers=16)
    from gymnasium.utils.env_checker import check_env

    check_env(env.unwrapped, skip_render_check=True)
    assert env.action_space.n == 16
    obs, info = env.reset(seed=0, options={"index": 0})
    assert info["index"] == 0 and info["to_pick"] == 2
    assert obs["action_mask"].tolist() == [1.0] * 4 + [0.0] * 12
    assert obs["servers"][3, 6] == 0.0  # job 3 keeps 2 >= w_min: taking server 23 preempts nothing
    # invalid pick (padding slot) is a no-op
    _, r, term, _, info = env.step(15)
    assert info["invalid"] == 1 and not term
    # server 23 (elastic scale-in: no preemption), then server 20 (preempts job 1)
    _, r1, term, _, _ = env.step(3)
    assert r1 == 0.0 and not term
    _, r2, term, _, info = env.step(0)
    assert r2 == -1.0 and term
    assert info["episode_metrics"]["preemptions"] == 1 == info["optimal_preemptions"]
    with pytest.raises(RuntimeError):
        env.step(1)
    # same seed, same draws
    a = [gym.make("aryl_gym/ArylReclaim-v1", snapshots=snaps).reset(seed=s)[1]["index"] for s in range(6)]
    b = [gym.make("aryl_gym/ArylReclaim-v1", snapshots=snaps).reset(seed=s)[1]["index"] for s in range(6)]
    assert a == b
    with pytest.raises(ValueError, match="max_servers"):
        gym.make("aryl_gym/ArylReclaim-v1", snapshots=snaps, max_servers=2)


class PreemptCostAgent:
    """A stand-in learned agent: the masked slot with the lowest preemption-cost feature."""

    def __init__(self, env: object):
        self.env = env

    def predict(self, obs, state=None, episode_start=None, deterministic=True, action_masks=None):  # type: ignore[no-untyped-def]
        cost = obs["servers"][:, 6] + 1e-3 * obs["servers"][:, 2]
        cost = np.where(action_masks, cost, np.inf)
        return int(np.argmin(cost)), state


def make_agent(env: object) -> PreemptCostAgent:
    return PreemptCostAgent(env)


def test_reclaim_suite_tiny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import main
    from aryl_gym.leaderboard.reclaim_suite import reclaim_suite_from_dict, run_reclaim_suite

    snaps = synthetic_snapshots(8, 4, 25, seed=2)
    f = save_snapshots(tmp_path / "s.npz", snaps)
    suite_yaml = tmp_path / "rs.yaml"
    suite_yaml.write_text(
        "name: rtiny\nkind: reclaim\ndescription: tiny\n"
        f"instances:\n  - {{snapshots: {f}}}\n  - {{scenario: testbed, seeds: [0]}}\n"
        "  - {synthetic: 4, servers: [30, 40], seed: 1}\n"
        "policies: [optimum, aryl, default, random]\n"
        "agents: {greedy: tests.test_reclaim_bench:make_agent}\n"
    )
    out = tmp_path / "out"
    assert main(["leaderboard", "--suite", str(suite_yaml), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "gap vs optimum" in text and "greedy (agent)" in text
    agg = json.loads((out / "leaderboard.json").read_text())
    ents = {e["entrant"]: e for e in agg["entrants"]}
    assert ents["optimum"]["gap"] == 0.0 and ents["optimum"]["optimal_share"] == 1.0
    assert ents["optimum"]["rank"] == 1
    for e in ents.values():
        assert e["preemptions"] >= e["optimal_preemptions"]
        assert e["instances"] == agg["instances"]
    assert (out / "snapshots" / "testbed-seed0.npz").is_file()
    n_rows = len((out / "results.csv").read_text().splitlines())
    assert n_rows == 1 + 5 * agg["instances"]
    # resume keeps the rows and gives the same table
    assert main(["leaderboard", "--suite", str(suite_yaml), "--out", str(out), "--resume", "--no-progress"]) == 0
    assert len((out / "results.csv").read_text().splitlines()) == n_rows
    assert json.loads((out / "leaderboard.json").read_text())["entrants"] == agg["entrants"]
    # without --resume/--overwrite an existing results.csv is an error (exit 2)
    assert main(["leaderboard", "--suite", str(suite_yaml), "--out", str(out)]) == 2
    # strict loading
    from aryl_gym.config import ConfigError

    with pytest.raises(ConfigError, match="unknown reclaim rule"):
        reclaim_suite_from_dict({"name": "x", "kind": "reclaim", "instances": [{"synthetic": 2}], "policies": ["nope"]})
    with pytest.raises(ConfigError, match="exactly one of"):
        reclaim_suite_from_dict({"name": "x", "kind": "reclaim", "instances": [{"seeds": [0]}]})
    # the shipped suite loads, and the episode-suite loader points to the right command
    from aryl_gym.leaderboard import load_suite
    from aryl_gym.leaderboard.reclaim_suite import load_reclaim_suite

    assert load_reclaim_suite("reclaim").policies == ("optimum", "aryl", "default", "random")
    with pytest.raises(ConfigError, match="reclaim suite"):
        load_suite("reclaim")
    # ranking on a hand-made instance set: random is never better than the optimum
    s = reclaim_suite_from_dict(
        {"name": "y", "kind": "reclaim", "instances": [{"synthetic": 3, "servers": [5, 8]}], "nontrivial_only": False}
    )
    res = run_reclaim_suite(s, tmp_path / "y", progress=False)
    assert {r["entrant"] for r in res.rows} == {"optimum", "aryl", "default", "random"}


def test_milp_solves_a_big_instance() -> None:
    """A 120-server state: the MILP's count is the fewest (it never loses to Aryl's heuristic or
    to the best of many random choices)."""
    rng = np.random.default_rng(9)
    inst = random_instance(rng, 120, elastic_p=0.5)
    n = 50
    best = reclaim_preemptions(inst, milp_reclaim(inst, n))
    assert best <= reclaim_preemptions(inst, aryl_reclaim(inst, n))
    for _ in range(200):
        pick = rng.choice(inst.loaned, size=n, replace=False)
        assert best <= reclaim_preemptions(inst, pick)
