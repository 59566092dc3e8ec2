"""The one episode runner (``aryl_gym.episodes``): its cache, resume, and that the leaderboard and
``aryl-gym reproduce`` run their episodes through it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from aryl_gym import episodes as ep
from aryl_gym.leaderboard import suite_from_dict
from aryl_gym.leaderboard.results import read_rows
from aryl_gym.leaderboard.runner import run_suite
from aryl_gym.scenario import load_scenario


def _quiet(msg: str) -> None:
    pass


class _Counting:
    """The local executor, recording the tasks it is handed."""

    def __init__(self) -> None:
        self.ran: list[ep.EpisodeTask] = []

    def __call__(self, tasks: Sequence[ep.EpisodeTask], workers: int) -> Iterator[ep.EpisodeOutput]:
        for out in ep.local_executor(tasks, 1):
            self.ran.append(out.task)
            yield out


def test_cache_miss_then_hit_then_fresh(tmp_path: Path) -> None:
    t = ep.policy_task(load_scenario("tiny"), "fifo", 0)
    first = _Counting()
    res, stats = ep.run_tasks([t, t], tmp_path, executor=first, progress="none", log=_quiet)
    assert stats.new == 1 and stats.cached == 0 and len(first.ran) == 1  # listed twice, run once
    assert ep.cache_path(tmp_path, t).is_file()
    again = _Counting()
    res2, stats2 = ep.run_tasks([t], tmp_path, executor=again, progress="none", log=_quiet)
    assert again.ran == [] and stats2.cached == 1 and res2[t].avg_jct == res[t].avg_jct
    assert stats2.wall_by_policy[("tiny", "fifo")]  # a cached episode keeps its cost
    fresh = _Counting()
    _, stats3 = ep.run_tasks([t], tmp_path, fresh=True, executor=fresh, progress="none", log=_quiet)
    assert stats3.new == 1 and len(fresh.ran) == 1
    # --cached-only runs nothing and says what is missing
    other = ep.policy_task(load_scenario("tiny"), "sjf", 0)
    res4, stats4 = ep.run_tasks([t, other], tmp_path, cached_only=True, progress="none", log=_quiet)
    assert list(res4) == [t] and stats4.missing == [other]


def test_a_damaged_cache_file_is_refused_naming_it(tmp_path: Path) -> None:
    t = ep.policy_task(load_scenario("tiny"), "fifo", 0)
    p = ep.cache_path(tmp_path, t)
    p.parent.mkdir(parents=True)
    p.write_text('{"result": {"avg_j')
    with pytest.raises(ep.CacheError, match="not valid JSON") as exc:
        ep.run_tasks([t], tmp_path, progress="none", log=_quiet)
    assert str(p) in str(exc.value) and "--fresh" in str(exc.value)


def test_the_cache_key_follows_the_config_and_the_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = load_scenario("tiny")
    a = ep.policy_task(tiny, "fifo", 0)
    b = ep.policy_task(tiny.replace(workload={"load": 0.5}), "fifo", 0)
    assert ep.cache_path(tmp_path, a) != ep.cache_path(tmp_path, b)
    assert ep.cache_path(tmp_path, a) == ep.cache_path(tmp_path, ep.policy_task(tiny, "fifo", 0))
    before = ep.cache_path(tmp_path, a)
    monkeypatch.setattr(ep, "METRICS_VERSION", 999)
    assert ep.cache_path(tmp_path, a) != before


def test_unknown_backend_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown backend 'spark'"):
        ep.executor_for("spark")


def test_leaderboard_and_reproduce_share_the_runner(tmp_path: Path) -> None:
    """One task type, one executor: the leaderboard's episode of (tiny, fifo, seed 0) is the
    reproduce cache's, with the same configuration hash and the same numbers."""
    suite = suite_from_dict({"name": "t", "scenarios": ["tiny"], "seeds": [0], "policies": ["fifo"],
                             "baseline": "fifo"})
    lb = _Counting()
    summ = run_suite(suite, tmp_path / "lb", executor=lb, progress=False, log=_quiet)
    rp = _Counting()
    t = ep.policy_task(load_scenario("tiny"), "fifo", 0)
    res, _ = ep.run_tasks([t], tmp_path / "rp", executor=rp, progress="none", log=_quiet)
    (lt,), (rt,) = lb.ran, rp.ran
    assert type(lt) is type(rt) is ep.EpisodeTask and lt.config_hash == rt.config_hash
    row = summ.rows[0]
    assert row["avg_jct"] == res[t].avg_jct and row["jobs_completed"] == res[t].jobs_completed
    # the leaderboard resumes through the same runner: a finished row is not run again
    again = _Counting()
    summ2 = run_suite(suite, tmp_path / "lb", resume=True, executor=again, progress=False, log=_quiet)
    assert again.ran == [] and summ2.resumed == 1 and read_rows(tmp_path / "lb" / "results.csv")[0] == summ2.rows


def test_run_results_matches_native_episodes_and_maps_worker_copies_back() -> None:
    """run_results (no cache) gives each task the result of its own native episode, an episode
    listed twice once, also when the tasks come back from worker processes as copies."""
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    cfg = load_scenario("tiny")
    tasks = [ep.policy_task(cfg, p, s) for p in ("fifo", "aryl") for s in (0, 1)]
    for workers in (1, 2):
        res = ep.run_results([*tasks, tasks[0]], workers=workers, progress=False)
        assert set(res) == set(tasks)
        for t in tasks:
            native = make_episode(cfg, t.seed).simulator().run(make_policy(t.policy))
            assert res[t].avg_jct == native.avg_jct and res[t].jobs_total == native.jobs_total


def test_run_results_names_a_failed_episode() -> None:
    bad = ep.policy_task(load_scenario("tiny"), "no-such-policy", 0)
    with pytest.raises(RuntimeError, match="tiny no-such-policy seed 0 failed"):
        ep.run_results([bad], progress=False)


def test_the_longest_episodes_start_first() -> None:
    """Tasks go to the executor by their estimated cost: policy weight x the scenario's GPUs."""
    handed: list[str] = []

    def record(tasks: Sequence[ep.EpisodeTask], workers: int) -> Iterator[ep.EpisodeOutput]:
        handed.extend(f"{t.scenario_name}/{t.policy}" for t in tasks)
        return iter(())

    tiny, testbed = load_scenario("tiny"), load_scenario("testbed")
    tasks = [ep.policy_task(c, p, 0) for c in (tiny, testbed)
             for p in ("aryl", "afs", "pollux-250", "pollux-250-elastic")]
    ep.run_episodes(tasks, ep.MemoryStore(), executor=record, progress="none", log=_quiet)
    # testbed has 64 GPUs, tiny 16: pollux-250-elastic 127 x 64, pollux-250 64 x 64, 127 x 16, ...
    assert handed == ["testbed/pollux-250-elastic", "testbed/pollux-250", "tiny/pollux-250-elastic",
                      "tiny/pollux-250", "testbed/afs", "testbed/aryl", "tiny/afs", "tiny/aryl"]
