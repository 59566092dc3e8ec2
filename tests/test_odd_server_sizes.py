"""Generated workloads on training servers whose GPU count is not a power of two (6, 10, 12 ...)
and under a ``max_job_gpus`` that is not one: every worker is 1, 2, 4 or 8 GPUs, and every job
fits the training servers, so each episode starts and finishes its jobs.

Before: a 6-GPU server (or ``max_job_gpus: 6``) drew 6-GPU workers, which the simulator refuses
("GPUs per worker g=6"); on 10- or 12-GPU servers a job could ask for more 8-GPU workers than
there are servers (one such worker per server) and never start, stalling the episode."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.scenario import make_episode
from aryl_gym.workload.generator import _pow2_floor, _worker_cap
from tests.test_hostile_v4_sim import _yaml


def _scenario(tmp_path, per_server: int, servers: int = 2, max_job_gpus: int | None = None,  # type: ignore[no-untyped-def]
              num_jobs: int = 120) -> str:
    w: dict = {"num_jobs": num_jobs, "elastic_fraction": 0.4, "duration_hours": 2.0,
               "duration_median_s": 900.0, "elastic_mean_hours": 0.5, "max_duration_s": 7200.0}
    if max_job_gpus is not None:
        w["max_job_gpus"] = max_job_gpus
    return str(_yaml(tmp_path, f"odd{per_server}-{servers}-{max_job_gpus}",
                     {"cluster": {"train_servers": servers, "train_gpus_per_server": per_server,
                                  "inf_servers": 1, "inf_gpus_per_server": 4},
                      "workload": w}))


@pytest.mark.parametrize("per_server,servers", [(3, 2), (5, 2), (6, 2), (7, 2), (10, 4), (12, 2), (12, 3)])
def test_workers_are_powers_of_two_and_every_job_fits_the_servers(tmp_path, per_server: int, servers: int) -> None:  # type: ignore[no-untyped-def]
    p = _scenario(tmp_path, per_server, servers)
    for seed in range(3):
        sim = make_episode(p, seed).simulator()
        for j in sim.jobs:
            assert j.g in (1, 2, 4, 8) and j.g <= per_server, (seed, j.id, j.g)
            room = servers * (per_server // j.g)  # workers of g GPUs the training servers hold
            assert j.w_min <= j.w_req <= j.w_max <= room, (seed, j.id, j.g, j.w_req, j.w_max, room)


@pytest.mark.parametrize("cap", [3, 5, 6, 7, 12])
def test_a_max_job_gpus_that_is_not_a_power_of_two_caps_without_odd_workers(tmp_path, cap: int) -> None:  # type: ignore[no-untyped-def]
    p = _scenario(tmp_path, 8, 2, max_job_gpus=cap)
    for seed in range(3):
        sim = make_episode(p, seed).simulator()
        for j in sim.jobs:
            assert j.g in (1, 2, 4, 8), (seed, j.id, j.g)
            assert j.g * j.w_req <= cap and j.g * j.w_max <= max(cap, j.g * j.w_req), (seed, j.id)


@pytest.mark.parametrize("per_server,servers", [(6, 2), (12, 2), (10, 4)])
def test_episodes_on_odd_servers_finish_every_job(tmp_path, per_server: int, servers: int) -> None:  # type: ignore[no-untyped-def]
    p = _scenario(tmp_path, per_server, servers, num_jobs=60)
    for seed in range(2):
        for policy in ("aryl", "baseline"):
            res = make_episode(p, seed).simulator().run(make_policy(policy))
            assert res.jobs_completed == res.jobs_total, (per_server, seed, policy)


@settings(max_examples=200, deadline=None)
@given(per_exp=st.integers(0, 3), mult=st.integers(1, 8), servers=st.integers(1, 64),
       max_gpus=st.integers(1, 4096), g_exp=st.integers(0, 3))
def test_the_server_cap_changes_nothing_when_the_worker_size_divides_the_server(
        per_exp: int, mult: int, servers: int, max_gpus: int, g_exp: int) -> None:
    """Where every drawn worker size divides a server's GPUs (1, 2, 4, 8 or any multiple of 8
    GPUs per server), capping by what the servers hold is the old ``max_gpus // g`` cap: traces of
    such scenarios are the ones drawn before."""
    per = (2 ** per_exp) * (mult if per_exp == 3 else 1)
    g = 2 ** g_exp
    if g > per:
        return
    max_gpus = min(max_gpus, servers * per)  # max_job_gpus, or all training GPUs
    g_arr = np.array([g])
    assert _worker_cap(g_arr, max_gpus, (servers, per))[0] == _worker_cap(g_arr, max_gpus, None)[0]


def test_pow2_floor() -> None:
    assert _pow2_floor(np.arange(1, 9)).tolist() == [1, 2, 2, 4, 4, 4, 4, 8]


@pytest.mark.parametrize("per_server,servers,gpus,want_g", [(6, 2, 12, 2), (12, 2, 24, 4), (10, 2, 20, 2), (8, 2, 16, 8),
                                                              (4, 4, 16, 4), (3, 4, 12, 1)])
def test_trace_jobs_split_into_workers_the_servers_hold(tmp_path, per_server: int, servers: int, gpus: int,  # type: ignore[no-untyped-def]
                                                        want_g: int) -> None:
    """A trace row of ``gpus`` GPUs becomes workers that the training servers can hold (a worker
    never spans servers). Was: the largest worker size dividing the row, so 12 GPUs on two 6-GPU
    servers were 3 workers of 4 (room for 2) and the simulator refused the whole trace."""
    from aryl_gym.config import ClusterConfig, ScenarioConfig
    from aryl_gym.sim.engine import Simulator
    from aryl_gym.workload.traces import load_trace
    from tests.test_traces import NO_ELASTIC, philly

    p = philly(tmp_path, ["2017-10-01 00:00:00,10.0,1,10.0,v",
                          f"2017-10-01 00:01:00,10.0,{gpus},{10.0 * gpus},v"])
    cl = ClusterConfig(train_servers=servers, train_gpus_per_server=per_server, inf_servers=0)
    jobs, _ = load_trace(p, "philly", map=NO_ELASTIC, cluster=cl)
    big = jobs[1]
    assert (big.g, big.g * big.w_min) == (want_g, gpus)
    assert big.w_max <= servers * (per_server // big.g)
    cfg = ScenarioConfig(name="odd", cluster=cl)
    res = Simulator(cfg, jobs, np.zeros(10), seed=0).run(make_policy("baseline"))  # starts, and finishes
    assert res.jobs_completed == res.jobs_total == 2
