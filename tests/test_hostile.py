"""A hostile user's inputs to the simulator API, the placement dry run, the envs and the load grid.

Each test pins one problem found by trying the public API the wrong way: what used to happen
(a silent wrong result, a deep traceback) is in the test's docstring; the test checks the clear
error or the correct result that replaced it.
"""

from __future__ import annotations

import copy
import math
import pickle
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.cli import main
from aryl_gym.envs.reward import parse_weights
from aryl_gym.load_grid import check_grid, parse_loads
from aryl_gym.scenario import make_episode
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.placement import Scratch, plan
from aryl_gym.sim.view import INFER, TRAIN, ClusterView, Decision, PlacementOptions
from aryl_gym.workload.traces_formats import TraceExtra

from .helpers import job, small_config

ALLOC = "aryl_gym/Aryl-v1"
RECLAIM = "aryl_gym/ArylReclaim-v1"


def _started(policy: str = "fifo", scenario: str = "testbed", rounds: int = 0) -> tuple[Simulator, Any]:
    sim = make_episode(scenario, 0).simulator()
    pol = make_policy(policy)
    pol.reset(sim.seed)
    sim.begin(pol)
    for _ in range(rounds):
        sim.step(pol)
    return sim, pol


def _same_state(a: Simulator, b: Simulator) -> None:
    assert a.now == b.now and a.done_count == b.done_count
    for name in ("remaining", "workers", "pool", "state", "srv_free", "srv_loaned", "finish"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


# ----------------------------------------------------------------------------------------------
# pickling and copying (Ray, SubprocVecEnv, checkpoints)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
@pytest.mark.parametrize("policy", ["fifo", "aryl", "afs", "gandiva"])
def test_simulator_copied_mid_episode_continues_identically(how: str, policy: str) -> None:
    """Was: the copy's ClusterView held frozen copies of the arrays (numpy views do not survive
    pickle/deepcopy), so policies on the copy read the state of the moment of copying and the
    episode diverged (even FIFO). Now the copy's view follows the copy."""
    sim, pol = _started(policy, rounds=40)
    dup = pickle.loads(pickle.dumps((sim, pol))) if how == "pickle" else copy.deepcopy((sim, pol))
    sim2, pol2 = dup
    assert sim2.view._sim is sim2
    for _ in range(300):
        if sim.done:
            break
        sim.step(pol)
        sim2.step(pol2)
    _same_state(sim, sim2)
    # the copy's view reads the copy's live arrays, not a snapshot
    assert np.shares_memory(sim2.view.srv_free, sim2.srv_free)
    assert not np.shares_memory(sim2.view.srv_free, sim.srv_free)


def test_view_arrays_stay_read_only_after_unpickling() -> None:
    sim, _ = _started("fifo", rounds=5)
    v = pickle.loads(pickle.dumps(sim)).view
    with pytest.raises(ValueError):
        v.workers[0] = 3
    assert isinstance(v, ClusterView)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        v.nope  # noqa: B018


def test_env_pickled_mid_episode_with_reclaims_continues_identically() -> None:
    """The env's reclaim rule reads the simulator's view: after unpickling it read stale arrays."""
    env = gym.make(ALLOC, scenario="testbed", action_mode="targets", window=8)
    env.reset(seed=3)
    rng = np.random.default_rng(0)

    def act(e: Any) -> np.ndarray:
        m = e.unwrapped.action_masks().reshape(e.unwrapped.k, -1)
        return np.array([rng.choice(np.flatnonzero(r)) for r in m])

    for _ in range(15):
        env.step(act(env))
    twin = pickle.loads(pickle.dumps(env.unwrapped))
    reclaims = 0
    for _ in range(400):
        a = act(env)
        o1, r1, t1, u1, i1 = env.step(a)
        o2, r2, t2, u2, i2 = twin.step(a)
        assert r1 == r2 and t1 == t2 and u1 == u2
        for k in o1:
            np.testing.assert_array_equal(o1[k], o2[k])
        reclaims = env.unwrapped.sim.reclaims_total
        if t1 or u1:
            break
    assert reclaims > 0  # the stretch exercised the reclaim rule


def test_trace_extra_pickles_and_deep_copies() -> None:
    """Was: ``TypeError: TraceExtra.__new__() missing 3 required positional arguments`` for the
    jobs of every trace scenario (pollux-w6, philly-...), so their envs and simulators could not
    be pickled or deep-copied."""
    base = {"atomic_bsz": 128}
    x = TraceExtra(base, 7, 4, 900.0)
    spec = JobSpec(0, 0.0, "bert", 1, 1, 4, True, True, 100.0, 90.0, extra=x)  # type: ignore[arg-type]
    for y in (pickle.loads(pickle.dumps(spec)).extra, copy.deepcopy(spec).extra, copy.copy(x)):
        assert type(y) is TraceExtra
        assert dict(y) == {"atomic_bsz": 128, "trace_line": 7, "trace_gpus": 4, "trace_duration_s": 900.0}


# ----------------------------------------------------------------------------------------------
# the round API
# ----------------------------------------------------------------------------------------------
def test_round_api_misuse_is_a_clear_error() -> None:
    """Was: open_round/close_round ran before begin(), close_round twice skipped a round's
    arrivals and loan phase (jobs that arrived were never queued), rounds after the last job
    advanced the clock and the accounting, and a dict decision died deep in the engine."""
    sim = make_episode("testbed", 0).simulator()
    pol = make_policy("fifo")
    with pytest.raises(RuntimeError, match="begin"):
        sim.open_round(pol)
    with pytest.raises(RuntimeError, match="begin"):
        sim.step(pol)
    with pytest.raises(RuntimeError, match="open_round"):
        sim.close_round(pol, None)
    sim.begin(pol)
    with pytest.raises(RuntimeError, match="open_round"):
        sim.close_round(pol, None)
    sim.open_round(pol)
    with pytest.raises(RuntimeError, match="twice"):
        sim.open_round(pol)
    with pytest.raises(TypeError, match="Decision"):
        sim.close_round(pol, {"targets": {}})  # type: ignore[arg-type]
    sim.close_round(pol, Decision())  # the round stayed open: it can still be closed
    res = sim.run(pol)  # run() begins again
    assert sim.done and res.jobs_completed == sim.n_jobs
    total = sim.acc.total_s
    with pytest.raises(RuntimeError, match="over"):
        sim.open_round(pol)
    with pytest.raises(RuntimeError, match="over"):
        sim.step(pol)
    assert sim.acc.total_s == total


@pytest.mark.parametrize("bad", [-1, 0, float("nan"), "6", True, None])
def test_stall_hours_must_be_positive_hours(bad: Any) -> None:
    """Was: run(stall_hours=-1) or NaN silently never (or always) stalled; a string was taken."""
    sim, pol = _started("fifo")
    with pytest.raises(ValueError, match="stall_hours"):
        sim.check_stall(bad)
    with pytest.raises(ValueError, match="stall_hours"):
        sim.run(pol, stall_hours=bad)


def test_stall_hours_inf_switches_the_rule_off() -> None:
    cfg = small_config(horizon_hours=20.0)
    sim = Simulator(cfg, [job(0, w=1)], np.zeros(10))
    never = make_policy("random")  # placeholder to get a policy object with the protocol
    never.decide = lambda view: Decision()  # type: ignore[method-assign]
    res = sim.run(never, stall_hours=math.inf)
    assert not res.stalled and sim.now >= 20 * 3600 - 1e-6


# ----------------------------------------------------------------------------------------------
# plan() and Scratch
# ----------------------------------------------------------------------------------------------
def _queued_sim() -> tuple[Simulator, Any, list[int]]:
    """Three queued jobs that fit an empty cluster, a round open."""
    cfg = small_config(train_servers=2, train_gpus=4, inf_servers=2, inf_gpus=4)
    jobs = [job(0, w=2), job(1, w=1), job(2, w=2, ta=True, elastic=True, w_min=1)]
    sim = Simulator(cfg, jobs, np.zeros(10))
    pol = make_policy("fifo")
    sim.begin(pol)
    sim.open_round(pol)
    return sim, pol, sim.queued_ids()


def test_plan_never_reads_a_float_or_string_job_id_as_another_job() -> None:
    """Was: ``Decision(targets={1.5: w})`` placed job 1 and ``{"3": w}`` job 3."""
    sim, pol, q = _queued_sim()
    j = q[0]
    w = sim.w_min_list[j]
    for key in (float(j) + 0.5, str(j), float(j), True):
        p = plan(sim, Decision(targets={key: w}), pol.placement)
        assert not p.report.started and not p.fully_placed
        assert any("not an integer" in r for r in p.report.invalid.values())
        assert np.array_equal(p.after.workers, sim.workers)
    # numpy integers are job ids
    assert plan(sim, Decision(targets={np.int64(j): w}), pol.placement).report.started == [j]
    # the real placement agrees with the dry run
    rep = sim.apply(Decision(targets={float(j) + 0.5: w}))
    assert not rep.started and int(sim.workers[j]) == 0


def test_plan_string_target_and_bad_pool_are_reported() -> None:
    sim, pol, q = _queued_sim()
    j = q[0]
    p = plan(sim, Decision(targets={j: str(sim.w_min_list[j])}), pol.placement)
    assert not p.report.started and "not a number" in next(iter(p.report.invalid.values()))
    p = plan(sim, Decision(targets={j: sim.w_min_list[j]}, pools={j: 7}), pol.placement)
    assert p.report.started == [j]  # the target still counts; the pool is ignored, and said so
    assert any("pool 7" in r for r in p.report.invalid.values())
    p = plan(sim, Decision(targets={j: sim.w_min_list[j]}, pools={j: INFER}), pol.placement)
    assert not p.report.invalid


@pytest.mark.parametrize(
    "decision, match",
    [
        ({1: 2}, "Decision"),
        (Decision(targets=None), "targets"),  # type: ignore[arg-type]
        (Decision(targets=[(1, 2)]), "targets"),  # type: ignore[arg-type]
        (Decision(pools=[1]), "pools"),  # type: ignore[arg-type]
        (Decision(order=["x"]), "order"),
        (Decision(order=5), "order"),  # type: ignore[arg-type]
        (Decision(order="12"), "order"),  # type: ignore[arg-type]
        (Decision(speedup=[1.0]), "speedup"),  # type: ignore[arg-type]
    ],
)
def test_malformed_decisions_raise_type_errors(decision: Any, match: str) -> None:
    """Was: AttributeError/ValueError from inside the engine (``'dict' object has no attribute
    'targets'``, ``invalid literal for int()``); a string order was read digit by digit."""
    sim, pol, _ = _queued_sim()
    with pytest.raises(TypeError, match=match):
        plan(sim, decision, pol.placement)
    with pytest.raises(TypeError, match=match):
        sim.close_round(pol, decision)
    sim.close_round(pol, None)  # nothing was changed; the round is still open


def test_plan_bad_options_and_source() -> None:
    sim, pol, _ = _queued_sim()
    with pytest.raises(TypeError, match="PlacementOptions"):
        plan(sim, Decision(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ClusterView, a Simulator or a Scratch"):
        plan(object(), Decision(), pol.placement)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="PlacementOptions"):
        Scratch(sim, {"hetero": True})  # type: ignore[arg-type]


def test_scratch_rejects_jobs_and_pools_the_engine_would_never_touch() -> None:
    """Was: ``grow`` started a finished job, placed on "pool 5" (read as inference), grew a
    running job in the other pool and past ``w_max``; ``fits(pool, 0)`` divided by zero."""
    cfg = small_config(train_servers=2, train_gpus=4, inf_servers=0)
    jobs = [job(0, w=4, w_min=1, elastic=True), job(1, w=2), job(2, submit=9e4, w=1)]
    sim = Simulator(cfg, jobs, np.zeros(10))
    pol = make_policy("fifo")
    sim.begin(pol)
    sim.open_round(pol)
    sim.close_round(pol, Decision(targets={0: 1}))
    sc = Scratch(sim, PlacementOptions())
    with pytest.raises(ValueError, match="pool must be"):
        sc.grow(0, 5, 1)
    with pytest.raises(ValueError, match="not in the trace"):
        sc.grow(7, TRAIN, 1)
    with pytest.raises(ValueError, match="PENDING"):
        sc.grow(2, TRAIN, 1)
    with pytest.raises(ValueError, match="one pool"):
        sc.grow(0, INFER, 1)
    assert sc.grow(1, INFER, 2) == 0  # a type-specific job never goes on inference servers
    assert sc.grow(0, TRAIN, 10, whole=True) == 0  # beyond w_max=4: not all of it
    assert sc.grow(0, TRAIN, 10) == 3 and int(sc.workers[0]) == 4  # cut to w_max
    with pytest.raises(ValueError, match="g must be"):
        sc.fits(TRAIN, 0)
    with pytest.raises(ValueError, match="pool must be"):
        sc.fits(3, 1)
    assert sc.fits(TRAIN, 1) == 4
    # the simulator was never changed
    assert int(sim.workers[0]) == 1 and int(sim.srv_free.sum()) == 7


# ----------------------------------------------------------------------------------------------
# JobSpec
# ----------------------------------------------------------------------------------------------
GOOD = dict(id=0, submit=0.0, family="bert", g=1, w_min=1, w_max=4, elastic=True,
            type_agnostic=True, work=100.0, pred_work=90.0)


@pytest.mark.parametrize(
    "field, value",
    [("w_min", 1.5), ("g", 1.0), ("w_max", "4"), ("w_req", True), ("elastic", "no"),
     ("type_agnostic", 1), ("family", None), ("work", math.inf), ("pred_work", math.nan),
     ("submit", math.inf), ("work", "100")],
)
def test_jobspec_validate_names_bad_types(field: str, value: Any) -> None:
    """Was: ``w_min=1.5`` ran as 1 worker, ``elastic="no"`` as elastic, ``work=inf`` never
    finished and ``submit=inf`` never arrived (an endless episode without a horizon)."""
    spec = JobSpec(**{**GOOD, field: value})
    with pytest.raises(ValueError, match=field):
        spec.validate()
    with pytest.raises(ValueError, match=field):
        Simulator(small_config(), [spec], np.zeros(10))


def test_jobspec_validate_accepts_numpy_scalars_and_good_specs() -> None:
    JobSpec(**GOOD).validate()
    JobSpec(**{**GOOD, "g": np.int64(2), "w_min": np.int32(1), "elastic": np.bool_(True)}).validate()
    JobSpec(**{**GOOD, "scaling": (1.0, 1.0, 0.9, 0.8, 0.7)}).validate()


# ----------------------------------------------------------------------------------------------
# env arguments, seeds, actions
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_steps": 1.5}, "max_steps"),
        ({"max_steps": "3"}, "max_steps"),
        ({"allow_preempt": "no"}, "allow_preempt"),
        ({"uses_loaning": "no"}, "uses_loaning"),
        ({"release": 2}, "release"),
        ({"stall_hours": True}, "stall_hours"),
        ({"reward": {"jct": float("nan")}}, "reward weight 'jct'"),
        ({"reward": {"jct": "x"}}, "reward weight 'jct'"),
        ({"jobs": [1, 2]}, "JobSpec"),
        ({"jobs": []}, "empty"),
        ({"trace_options": 5}, "trace_options"),
        ({"max_workers": 10**9}, "max_workers"),
    ],
)
def test_allocation_env_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    """Was: ``allow_preempt="no"`` switched preemption on, a NaN reward weight gave NaN rewards,
    ``jobs=[1, 2]`` failed at reset with AttributeError, ``max_workers=10**9`` tried to allocate
    gigabytes, ``max_steps="3"`` raised a bare TypeError."""
    with pytest.raises(ValueError, match=match):
        gym.make(ALLOC, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"reward_scale": 0}, "reward_scale"),
        ({"reward_scale": "1"}, "reward_scale"),
        ({"stall_hours": -1}, "stall_hours"),
        ({"max_steps": 0}, "max_steps"),
        ({"jobs": ["x"]}, "JobSpec"),
    ],
)
def test_reclaim_env_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    """Was: unchecked; ``stall_hours=-1`` ended episodes at the first idle round."""
    with pytest.raises(ValueError, match=match):
        gym.make(RECLAIM, **kwargs)


def test_numpy_reward_scale_and_seed_are_accepted() -> None:
    """Was: ``reward_scale=np.float32(10)`` rejected (np.float64 accepted); ``reset(seed=np.int64(3))``
    rejected by Gymnasium's seeding. A numpy seed is now the same episode as the int."""
    gym.make(ALLOC, reward_scale=np.float32(10.0))
    for env_id in (ALLOC, RECLAIM):
        a, b = gym.make(env_id), gym.make(env_id)
        oa, ia = a.reset(seed=np.int64(3))
        ob, ib = b.reset(seed=3)
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
        assert ia["time"] == ib["time"]


@pytest.mark.parametrize("mode", ["targets", "sequential", "priority"])
@pytest.mark.parametrize(
    "action",
    [np.zeros(4, complex) + 1j, np.array(["1"] * 4), np.array(["8"]), "8", np.array([2**70] * 4, dtype=object)],
    ids=["complex", "str-array", "str-array-1", "str", "bigint-object"],
)
def test_strings_and_complex_actions_are_invalid(mode: str, action: Any) -> None:
    """Was: numpy parsed ``"1"`` as 1 (and ``"8"`` was the commit in sequential mode), and a
    complex action lost its imaginary part silently."""
    env = gym.make(ALLOC, action_mode=mode, window=4)
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning either
        info = env.step(action)[4]
    assert info["invalid"] > 0


def test_fractional_discrete_actions_are_invalid_not_truncated() -> None:
    """Was: the reclaim env took 0.5 for server 0 (``int(0.5)``)."""
    counts = {}
    for a in (0, 0.0, np.array([0.0]), np.uint8(0), 0.5, "0", -0.5):
        env = gym.make(RECLAIM)
        env.reset(seed=0)
        counts[repr(a)] = env.step(a)[4]["invalid"]
    assert counts == {"0": 0, "0.0": 0, "array([0.])": 0, "np.uint8(0)": 0, "0.5": 1, "'0'": 1, "-0.5": 1}
    env = gym.make(ALLOC, action_mode="sequential", window=4)  # commit = 8
    env.reset(seed=0)
    assert env.step(8.5)[4]["invalid"] == 1
    assert env.step(np.float32(8.0))[4]["invalid"] == 0


def test_reward_weights_must_be_finite_numbers() -> None:
    for bad in (math.nan, math.inf, "1", None, True):
        with pytest.raises(ValueError, match="reward weight"):
            parse_weights({"jct": bad}, 0.0)
    assert parse_weights({"jct": np.float32(0.5)}, 0.0)["jct"] == 0.5


# ----------------------------------------------------------------------------------------------
# calibrate --load-grid
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, match",
    [("0.9-0.3", "above HI"), ("0.3-0.35", "multiple of 0.1"), ("0.5,0.5", "twice"),
     ("1e9", r"not in \(0, 10\]"), ("0.1-100", "at most 100"), ("nan-1", "LO-HI"), ("inf", "not in")],
)
def test_parse_loads_rejects_ranges_that_would_mislead(text: str, match: str) -> None:
    """Was: ``0.3-0.35`` silently dropped 0.35, ``0.9-0.3`` said "loads must be positive",
    ``0.5,0.5`` ran and counted the load twice, ``1e9`` was accepted."""
    with pytest.raises(ValueError, match=match):
        parse_loads(text)


def test_parse_loads_ranges() -> None:
    assert parse_loads("0.3-0.3") == [0.3]
    assert parse_loads("0.3-0.9") == [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert parse_loads("10") == [10.0]


@pytest.mark.parametrize(
    "scenario, seeds, workers, match",
    [("tiny", [0], 1, "num_jobs"), ("testbed", [0, 0], 1, "twice"), ("testbed", [], 1, "seed"),
     ("testbed", [-1], 1, "seed"), ("testbed", [0], 0, "workers")],
)
def test_load_grid_arguments_checked_before_running(scenario: str, seeds: list[int], workers: int,
                                                     match: str) -> None:
    """Was: ``--scenario tiny`` (fixed num_jobs) printed a grid of identical rows and "picked"
    a load that changes nothing; repeated seeds were averaged twice."""
    with pytest.raises(ValueError, match=match):
        check_grid(scenario, [0.3, 0.4], seeds, workers)


def test_load_grid_cli_on_a_load_free_scenario_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["calibrate", "--scenario", "tiny", "--load-grid", "0.3-0.5", "--seeds", "0"])
    err = capsys.readouterr().err
    assert rc == 2 and "num_jobs" in err and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# the stall rule and fast-forward
# ----------------------------------------------------------------------------------------------
def test_event_driven_policy_that_never_starts_a_job_stalls_instead_of_hanging() -> None:
    """Was: with no horizon, the first eventless round of an event-driven policy that leaves
    jobs queued fast-forwarded ~10**12 rounds, and the hourly accounting looped over every hour
    of them (the process hung; the stall rule never ran). Now no round is skipped while idle
    with a queue, and the episode ends as stalled after ``stall_hours``."""
    import signal

    from aryl_gym.agents.base import BasePolicy

    class Idle(BasePolicy):
        name = "idle"

        def decide(self, view: ClusterView) -> Decision:
            return Decision()

    assert Idle().event_driven
    sim = Simulator(small_config(), [job(0, w=1), job(1, submit=100.0, w=1)], np.zeros(10))

    def _boom(*_: object) -> None:
        raise TimeoutError("the simulator hung")

    old = signal.signal(signal.SIGALRM, _boom)
    signal.alarm(30)
    try:
        res = sim.run(Idle(), stall_hours=2.0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert res.stalled
    # idle (nothing running, nothing to arrive) from the round after the last arrival (100 s)
    assert 7200 < sim.now - 100 <= 7200 + 3 * 60


def test_trace_options_reset_option_is_accepted(tmp_path: Any) -> None:
    """Was: the docs and the env's docstring list ``trace_options`` among the reset options, but
    ``reset(options={"trace_options": ...})`` raised "unknown key"."""
    p = tmp_path / "mine.csv"
    p.write_text("submit,gpus,duration\n0,1,600\n30,2,1200\n90,4,300\n")
    m = tmp_path / "map.yaml"
    m.write_text("columns:\n  submit: submit\n  gpus: gpus\n  duration: duration\n")
    env = gym.make(ALLOC, trace=str(p), trace_format="csv", trace_map=str(m))
    env.reset(seed=0)
    assert env.unwrapped.sim.n_jobs == 3
    env.reset(seed=0, options={"trace_options": {"max_jobs": 2}})
    assert env.unwrapped.sim.n_jobs == 2
    with pytest.raises(ValueError, match="trace_options"):
        env.reset(seed=0, options={"trace_options": 5})


@pytest.mark.parametrize(
    "util", [np.array([]), np.full(10, np.nan), np.full(10, -1.0), np.full(10, 1.5), np.zeros((2, 3)), None]
)
def test_utilization_series_is_checked(util: Any) -> None:
    """Was: a negative utilization made more servers loanable than exist (4 of 2), NaN ended in
    "cannot reclaim 9223372036854775808 of 0 loaned servers" deep in a reclaim rule, and an
    empty series in ZeroDivisionError at the first round."""
    with pytest.raises(ValueError, match="utilization"):
        Simulator(small_config(), [job(0, w=1, ta=True)], util)


def test_help_of_every_command_prints(capsys):
    """``aryl-gym --help`` and each ``aryl-gym COMMAND --help`` print and exit 0 (argparse
    %-formats help strings, so a literal % in a command's HELP must not break them)."""
    from aryl_gym.cli import build_parser

    parser = build_parser()
    names = [a for a in parser._subparsers._group_actions[0].choices]  # type: ignore[union-attr]
    assert "reproduce" in names and "train" in names
    for argv in [["--help"], *[[n, "--help"] for n in names]]:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0, argv
        assert "usage: aryl-gym" in capsys.readouterr().out


def test_bare_model_zip_without_its_config_names_the_mismatch(tmp_path):
    """A model .zip copied away from its run folder has no training config: the env built from
    defaults does not fit it, and make_env says so (instead of a shape error inside SB3 at the
    first prediction); the training env's settings passed explicitly work."""
    import shutil
    from pathlib import Path

    from aryl_gym.agents.learned import load_agent

    from aryl_gym.config import ConfigError
    from aryl_gym.rollout import run_agent

    src = Path(__file__).resolve().parents[1] / "agents" / "pretrained" / "ppo-v1.zip"
    dst = tmp_path / "lonely.zip"
    shutil.copy(src, dst)
    agent = load_agent(dst)
    with pytest.raises(ConfigError, match=r"jobs: \(32, 17\).*no training config found"):
        agent.make_env(scenario="tiny")
    env = agent.make_env(scenario="tiny", window=32, observation="v1", allow_preempt=True,
                         action_mode="sequential", window_order="pred_time")
    res, _, _ = run_agent(agent, env, 0)
    assert res.jobs_completed > 0


@pytest.mark.slow
def test_evaluation_worker_exits_when_the_training_process_is_killed(tmp_path):
    """A killed training run cannot shut its background-evaluation pool down; the worker notices
    that its parent is gone and exits instead of holding its memory forever."""
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "trainer.py"
    script.write_text(
        "import multiprocessing as mp, os, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from aryl_gym.train.async_eval import _init_worker\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=mp.get_context('spawn'), initializer=_init_worker,\n"
        "                               initargs=(os.getpid(),))\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(proc.stdout.readline())
        os.kill(worker, 0)  # alive
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.time() + 15
        while time.time() < deadline:
            try:
                os.kill(worker, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            os.kill(worker, signal.SIGKILL)
            raise AssertionError("the evaluation worker outlived its killed parent by 15 s")
    finally:
        if proc.poll() is None:
            proc.kill()
