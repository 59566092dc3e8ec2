"""Review of the reclaim side (rules, snapshots, features, train-reclaim, the reclaim suite) as a
hostile user would: exhaustive checks on small instances and regressions of the fixes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    aryl_reclaim,
    milp_reclaim,
    optimal_reclaim,
    random_instance,
    reclaim_lost_gpus,
    reclaim_preemptions,
)

from aryl_gym.reclaim_features import ReclaimState
from aryl_gym.reclaim_snapshots import Snapshot, load_snapshots, save_snapshots, synthetic_snapshots


def _free_instance(rng: np.random.Generator) -> ReclaimInstance:
    """Any consistent small instance: arbitrary placements, server ids, GPUs per worker, jobs
    with workers elsewhere, elastic or not (flexible workers only beyond w_min)."""
    L = int(rng.integers(1, 7))
    ids = sorted(int(x) for x in rng.choice(100, L, replace=False))
    inst = ReclaimInstance(loaned=ids, srv_jobs={s: {} for s in ids}, srv_flex={s: {} for s in ids})
    for j in range(int(rng.integers(0, 6))):
        on = {s: int(rng.integers(1, 4)) for s in ids if rng.random() < 0.4}
        if not on:
            continue
        w = sum(on.values()) + int(rng.integers(0, 3))
        el = bool(rng.random() < 0.6)
        inst.workers[j], inst.w_min[j], inst.elastic[j] = w, int(rng.integers(1, w + 1)) if el else w, el
        inst.g[j], inst.time_one[j] = int(rng.choice([1, 2, 4])), float(rng.uniform(1, 100))
        for s, k in on.items():
            inst.srv_jobs[s][j] = k
    inst.validate()
    return inst


def _brute(inst: ReclaimInstance, n: int) -> tuple[int, int]:
    return min((reclaim_preemptions(inst, c), reclaim_lost_gpus(inst, c))
               for c in itertools.combinations(sorted(inst.loaned), n))


def test_optimum_is_the_exhaustive_lexicographic_optimum_on_free_instances() -> None:
    """The MILP and the exhaustive rule against brute force (fewest preemptions, then fewest GPUs
    lost) on instances unlike random_instance's: arbitrary ids, jobs over many servers."""
    rng = np.random.default_rng(11)
    for _ in range(60):
        inst = _free_instance(rng)
        for n in range(len(inst.loaned) + 1):
            best = _brute(inst, n)
            for rule in (milp_reclaim, optimal_reclaim):
                got = rule(inst, n)
                assert len(set(got)) == n and set(got) <= set(inst.loaned)
                assert (reclaim_preemptions(inst, got), reclaim_lost_gpus(inst, got)) == best


def _aryl_by_definition(inst: ReclaimInstance, n: int) -> list[int]:
    """Aryl's rule as agents/reclaim.py's docstring words it, recomputed from scratch each pick."""
    taken: list[int] = []

    def removed(c: list[int]) -> dict[int, int]:
        r: dict[int, int] = {}
        for s in c:
            for j, k in inst.srv_jobs[s].items():
                r[j] = r.get(j, 0) + k
        return r

    def live_busy(s: int) -> int:
        r = removed(taken)
        dead = {j for j, x in r.items() if not (inst.elastic[j] and inst.workers[j] - x >= inst.w_min[j])}
        return sum(k * inst.g[j] for j, k in inst.srv_jobs[s].items() if j not in dead)

    def loss(s: int) -> float:
        r = removed(taken)
        return sum(inst.time_one[j] / (inst.workers[j] - r.get(j, 0) - k) - inst.time_one[j] / (inst.workers[j] - r.get(j, 0))
                   for j, k in inst.srv_jobs[s].items())

    flex = [s for s in sorted(inst.loaned)
            if all(inst.srv_flex[s].get(j, 0) == k for j, k in inst.srv_jobs[s].items())]
    while len(taken) < n and flex:
        s = min(flex, key=lambda s: (loss(s), live_busy(s), s))
        flex.remove(s)
        taken.append(s)
    while len(taken) < n:
        cand = [s for s in sorted(inst.loaned) if s not in taken]
        s = min(cand, key=lambda s: (reclaim_preemptions(inst, [*taken, s]) - reclaim_preemptions(inst, taken),
                                     live_busy(s), s))
        taken.append(s)
    return taken


def test_aryl_rule_follows_its_documented_definition() -> None:
    rng = np.random.default_rng(12)
    for _ in range(80):
        inst = random_instance(rng, int(rng.integers(2, 9)), elastic_p=float(rng.random()))
        for n in range(len(inst.loaned) + 1):
            assert aryl_reclaim(inst, n) == _aryl_by_definition(inst, n)


def test_state_costs_and_snapshot_round_trip_on_free_instances(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    snaps = []
    for _ in range(40):
        inst = _free_instance(rng)
        L = len(inst.loaned)
        st = ReclaimState(inst, L)
        for slot in rng.permutation(L):
            before = reclaim_preemptions(inst, st.picked_servers())
            for q in np.flatnonzero(~st.picked):
                want = reclaim_preemptions(inst, [*st.picked_servers(), st.servers[q]]) - before
                assert st.costs()[q] == want
            assert st.pick(int(slot)) == reclaim_preemptions(inst, st.picked_servers()) - before
        snaps.append(Snapshot(inst, int(rng.integers(0, L + 1)), "x/seed1", 2.5,
                              tuple(int(c) for c in rng.integers(1, 9, L))))
    back = load_snapshots(save_snapshots(tmp_path / "s.npz", snaps))
    for a, b in zip(snaps, back):
        assert (a.n, a.source, a.time, a.cap) == (b.n, b.source, b.time, b.cap)
        for n in range(a.servers + 1):
            assert milp_reclaim(a.inst, n) == milp_reclaim(b.inst, n)
            assert aryl_reclaim(a.inst, n) == aryl_reclaim(b.inst, n)
        sa, sb = ReclaimState.from_snapshot(a), ReclaimState.from_snapshot(b)
        assert np.array_equal(sa.features_v0(), sb.features_v0())
        for x, y in zip(sa.features_v1(), sb.features_v1()):
            assert np.array_equal(x, y)


def _flex_of_inelastic_job() -> ReclaimInstance:
    # server 0 holds one worker of the inelastic job 0, marked flexible; server 1 one worker of
    # the elastic job 1, which has slack: returning server 1 preempts nothing
    return ReclaimInstance(
        loaned=[0, 1], srv_jobs={0: {0: 1}, 1: {1: 1}}, srv_flex={0: {0: 1}, 1: {}},
        workers={0: 2, 1: 4}, w_min={0: 2, 1: 1}, elastic={0: False, 1: True},
    )


def test_snapshot_file_with_impossible_flexible_workers_is_refused(tmp_path: Path) -> None:
    """Flexible workers are those beyond w_min of an elastic job. A file claiming more loaded,
    and Aryl's "flexible servers first, without preemption" phase then preempted."""
    inst = _flex_of_inelastic_job()
    with pytest.raises(ValueError, match="flexible"):
        inst.validate()
    path = save_snapshots(tmp_path / "bad.npz", [Snapshot(inst, 1, "hand", 0.0, (8, 8))])
    with pytest.raises(ValueError, match="flexible"):
        load_snapshots(path)
    # one flexible worker too many on an elastic job: the division by zero of phase one
    inst2 = ReclaimInstance(loaned=[0], srv_jobs={0: {0: 2}}, srv_flex={0: {0: 2}},
                            workers={0: 2}, w_min={0: 1}, elastic={0: True})
    with pytest.raises(ValueError, match="flexible"):
        inst2.validate()


# ------------------------------------------------------------------------------------------------
# train-reclaim
# ------------------------------------------------------------------------------------------------
def test_train_reclaim_refuses_a_run_without_validation_events() -> None:
    """With no validation event every round's gap was NaN and round 0 (teacher states only) was
    written as the selected agent, whatever the later rounds learned."""
    from aryl_gym.train.reclaim_agent import ReclaimTrainConfig

    with pytest.raises(ValueError, match="no validation events"):
        ReclaimTrainConfig(synthetic=6, scenarios=(), val_scenarios=(), val_synthetic=0).check()
    with pytest.raises(ValueError, match="no validation events"):
        ReclaimTrainConfig(synthetic=6, scenarios=(), val_scenarios=(("basic", ()),), val_synthetic=0).check()
    ReclaimTrainConfig(synthetic=6, scenarios=(), val_scenarios=(), val_synthetic=2).check()


@pytest.mark.slow
def test_train_reclaim_cli_without_validation_events_writes_nothing(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from aryl_gym.cli import main

    out = tmp_path / "run"
    assert main(["train-reclaim", "--out", str(out), "--events", "none", "--synthetic", "2",
                 "--synthetic-servers", "4-6", "--val-events", "none", "--val-synthetic", "0",
                 "--rounds", "2", "--epochs", "1", "--final-epochs", "1", "--hidden", "4", "--no-progress"]) == 2
    assert "no validation events" in capsys.readouterr().err
    assert not (out / "reclaim-agent.npz").exists()


# ------------------------------------------------------------------------------------------------
# the reclaim suite
# ------------------------------------------------------------------------------------------------
class _Stuck:
    """An agent that repeats slot 0: one valid pick, then invalid ones until play's step limit."""

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[int, Any]:
        return 0, state


def stuck_agent() -> _Stuck:
    return _Stuck()


def test_reclaim_suite_scores_an_invalid_choice_as_the_simulator_plays_it(tmp_path: Path) -> None:
    """An agent that returned fewer than n servers was scored on its short choice: fewer
    preemptions than the optimum, a negative gap and rank 1 for an agent that does nothing."""
    from aryl_gym.leaderboard.reclaim_suite import reclaim_suite_from_dict, run_reclaim_suite

    suite = reclaim_suite_from_dict({"name": "rv", "kind": "reclaim", "policies": ["optimum"],
                                     "instances": [{"synthetic": 3, "servers": [6, 9], "seed": 31}]})
    res = run_reclaim_suite(suite, tmp_path / "out", extra_agents={"stuck": f"{__name__}:stuck_agent"},
                            progress=False, log=lambda m: None)
    rows = [r for r in res.rows if r["entrant"] == "stuck"]
    assert rows and all(r["note"] for r in rows if r["n"] > 1)
    assert all(r["preemptions"] >= r["optimal_preemptions"] for r in rows)
    ents = {e["entrant"]: e for e in json.loads(res.json.read_text())["entrants"]}
    assert ents["stuck"]["gap"] >= 0 and ents["optimum"]["rank"] == 1
    assert ents["stuck"]["preemptions"] == sum(r["preemptions"] for r in rows)


def test_as_played_completes_like_the_simulator() -> None:
    from aryl_gym.agents.reclaim import default_reclaim_instance

    from aryl_gym.leaderboard.reclaim_suite import as_played

    sn = synthetic_snapshots(1, 8, 8, seed=3)[0]
    sn.n = 4
    order = default_reclaim_instance(sn.inst, 8)
    s0 = order[-1]
    assert as_played(sn, [s0, s0, 999]) == [s0, *[s for s in order if s != s0][:3]]
    assert as_played(sn, order[:4]) == order[:4]


def _fake_record(scenario: str, seeds: Any, policy: str = "aryl", data_root: Any = None) -> list[Snapshot]:
    """Events that say which scenario file they came from (no episode is run)."""
    seed = 101 if str(scenario).endswith(".yaml") else 100
    return [Snapshot(sn.inst, sn.n, f"{Path(str(scenario)).stem}/seed{seed}", 0.0, sn.cap)
            for sn in synthetic_snapshots(2, 5, 7, seed=seed)]


def test_reclaim_suite_keeps_two_scenarios_of_one_stem_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario file named like a shipped scenario (other/tiny.yaml) read the shipped one's
    cached events (OUT/snapshots/tiny-seed0.npz) and its instance keys collided with them: the
    table then held one row where results.csv had two."""
    import aryl_gym.leaderboard.reclaim_suite as rs
    from aryl_gym.config import configs_dir

    monkeypatch.setattr(rs, "record_snapshots", _fake_record)
    other = tmp_path / "other"
    other.mkdir()
    text = (configs_dir() / "scenarios" / "tiny.yaml").read_text()
    (other / "tiny.yaml").write_text(text.replace("name: tiny", "name: tiny-other", 1) + "\n# a copy\n")
    suite = rs.reclaim_suite_from_dict({"name": "rs2", "kind": "reclaim", "policies": ["optimum", "aryl"],
                                        "nontrivial_only": False,
                                        "instances": [{"scenario": "tiny", "seeds": [0]},
                                                      {"scenario": str(other / "tiny.yaml"), "seeds": [0]}]})
    inst, _ = rs.build_instances(suite, tmp_path / "cache")
    keys = [k for k, _ in inst]
    assert len(keys) == len(set(keys)) == 4
    assert {sn.source for _, sn in inst} == {"tiny/seed100", "tiny/seed101"}
    assert (tmp_path / "cache" / "tiny-seed0.npz").is_file()  # the shipped name's cache is unchanged
    res = rs.run_reclaim_suite(suite, tmp_path / "out", progress=False, log=lambda m: None)
    ents = {e["entrant"]: e for e in json.loads(res.json.read_text())["entrants"]}
    assert ents["aryl"]["instances"] == 4


def test_reclaim_suite_refuses_an_instance_given_twice(tmp_path: Path) -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.leaderboard.reclaim_suite import build_instances, reclaim_suite_from_dict

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    save_snapshots(a / "s.npz", synthetic_snapshots(2, 5, 6, seed=1))
    save_snapshots(b / "s.npz", synthetic_snapshots(2, 5, 6, seed=2))
    for entries in ([{"snapshots": str(a / "s.npz")}, {"snapshots": str(b / "s.npz")}],
                    [{"synthetic": 2, "servers": [5, 9], "seed": 4, "elastic": 0.1},
                     {"synthetic": 2, "servers": [5, 9], "seed": 4, "elastic": 0.9}]):
        suite = reclaim_suite_from_dict({"name": "dup", "kind": "reclaim", "instances": entries})
        with pytest.raises(ConfigError, match="given twice"):
            build_instances(suite, None)


def test_reclaim_suite_resume_replays_rows_of_other_events(tmp_path: Path) -> None:
    """Resumed rows were matched by instance key alone: after the suite file changed (here the
    elastic share of a synthetic entry), --resume kept the old events' rows, and the table mixed
    them with the new events' optimum."""
    from aryl_gym.leaderboard.reclaim_suite import (
        build_instances,
        reclaim_suite_from_dict,
        run_reclaim_suite,
    )

    def suite(elastic: float) -> Any:
        return reclaim_suite_from_dict({"name": "rr", "kind": "reclaim", "policies": ["optimum", "aryl", "default"],
                                        "instances": [{"synthetic": 4, "servers": [6, 9], "seed": 5,
                                                       "elastic": elastic}]})

    said: list[str] = []
    run_reclaim_suite(suite(0.0), tmp_path / "out", progress=False, log=said.append)
    run_reclaim_suite(suite(0.0), tmp_path / "out", resume=True, progress=False, log=said.append)
    assert not any("played again" in m for m in said)  # an unchanged suite keeps its rows
    res = run_reclaim_suite(suite(1.0), tmp_path / "out", resume=True, progress=False, log=said.append)
    assert any("played again" in m for m in said)
    snaps = dict(build_instances(suite(1.0), None)[0])
    for r in res.rows:
        sn = snaps[r["instance"]]
        assert r["optimal_preemptions"] == reclaim_preemptions(sn.inst, milp_reclaim(sn.inst, sn.n))
        if r["entrant"] == "aryl":
            assert r["preemptions"] == reclaim_preemptions(sn.inst, aryl_reclaim(sn.inst, sn.n))
    # the file holds the new rows only, once each, and resumes clean
    said.clear()
    again = run_reclaim_suite(suite(1.0), tmp_path / "out", resume=True, progress=False, log=said.append)
    assert not any("played again" in m or "duplicat" in m for m in said)
    assert sorted((r["instance"], r["entrant"]) for r in again.rows) == sorted(
        (r["instance"], r["entrant"]) for r in res.rows)
