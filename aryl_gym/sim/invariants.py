"""Invariants of a simulator state, checked after any round (``simulate --check-invariants``).

:func:`check` verifies, from the raw arrays (not from the simulator's own running totals):

* no GPU is used twice: on every server, the GPUs held by the jobs placed on it plus its free
  GPUs equal its capacity, and free GPUs are in ``[0, capacity]``;
* the per-server job table (``srv_jobs``) and the per-pool busy counters agree with the jobs'
  placements;
* a job's workers are all on servers of the job's pool, except the flexible workers of a
  heterogeneous-training job (``JobSpec.hetero``) whose base is on training servers, which may be
  on loaned inference servers; the per-job count of workers on inference servers and the
  "mixed" flag match the placements, and a mixed job runs at the mixed rate; a job on an inference server is
  type-agnostic (no type-specific job on a T4) and that server is currently loaned (no worker
  on a returned server);
* a running job has workers inside the range the engine enforces (``[w_min, w_max]``, or the
  wider one of a policy's ``elasticity``), exactly the ones placed; a job that
  is not running holds no server;
* the state sets (queued, running, done count) match the state array, and the running
  aggregates kept on events match a recount: the queued GPU demand (``queued_gpus_min``,
  ``queued_gpus_max``) and the free-capacity index (``free_index``: servers by free GPUs, the
  loaned servers);
* loans respect the loan controller: no more servers loaned than loanable now (none when the
  policy does not loan), and the loaned-GPU counter matches the loaned servers;
* work is conserved: remaining work is in ``[0, work]``, a finished job has none left and
  finished no earlier than its lower bound (work at ``w_max`` on its fastest allowed GPU).

:class:`InvariantChecker` adds the checks across rounds: time and every job's done work never go
backwards. A violation raises :class:`InvariantError` naming the round, the job or server and
the numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from aryl_gym.metrics import min_time_factor_of
from aryl_gym.sim.index import FreeIndex
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import INFER, TRAIN

if TYPE_CHECKING:
    from aryl_gym.sim.engine import Simulator

_EPS = 1e-6


class InvariantError(AssertionError):
    """A simulator invariant does not hold; the message says which, where and when."""


def _fail(sim: Simulator, msg: str) -> None:
    raise InvariantError(f"round {sim.round_index} (t={sim.now:.0f} s): {msg}")


def check(sim: Simulator) -> None:
    """Raise :class:`InvariantError` if any invariant of the current state fails."""
    cap, free = sim.srv_cap, sim.srv_free
    bad = np.flatnonzero((free < 0) | (free > cap))
    if len(bad):
        s = int(bad[0])
        _fail(sim, f"server {s} has {int(free[s])} free GPUs of {int(cap[s])}")
    on_server: list[dict[int, int]] = [dict() for _ in range(sim.n_servers)]
    busy_train = busy_loan = 0
    state = sim.state
    # Jobs that hold servers: the running ones and whatever the servers' job tables name (a
    # placement recorded on a job but on no server shows up as a table mismatch below).
    holders = set(sim._running)
    for tab in sim.srv_jobs:
        holders.update(tab)
    idle = state != JobState.RUNNING
    if np.any(sim.workers[idle] != 0):
        j = int(np.flatnonzero(idle & (sim.workers != 0))[0])
        _fail(sim, f"job {j} in state {JobState(int(state[j])).name} has {int(sim.workers[j])} workers")
    # plain lists of the holders' fields: per-element numpy indexing would dominate
    hl = np.fromiter(sorted(holders), dtype=np.int64, count=len(holders))
    # the worker range is the one the engine enforces (Simulator.set_elasticity)
    lo = np.asarray(sim.lim_lo_list, dtype=np.int64)
    hi = np.asarray(sim.lim_hi_list, dtype=np.int64)
    fields = (sim.g, sim.pool, sim.type_agnostic, sim.workers, lo, hi, state)
    cols = [a[hl].tolist() for a in fields]
    srv_pool, srv_loaned = sim.srv_pool.tolist(), sim.srv_loaned.tolist()
    hetero = sim.hetero_list
    used_l = [0] * sim.n_servers
    running_code = int(JobState.RUNNING)
    for j, gj, pj, taj, wj, wminj, wmaxj, st in zip(hl.tolist(), *cols):
        placed = 0
        on_inf = 0
        for d in (sim.base[j], sim.flex[j]):
            for s, k in d.items():
                if k <= 0:
                    _fail(sim, f"job {j} has {k} workers recorded on server {s}")
                used_l[s] += k * gj
                on_server[s][j] = on_server[s].get(j, 0) + k
                placed += k
                sp = srv_pool[s]
                if sp != pj and not (hetero[j] and d is sim.flex[j] and pj == TRAIN):
                    _fail(sim, f"job {j} (pool {pj}) has workers on server {s} of pool "
                               f"{sp}: a job's workers span GPU types")
                if sp == INFER:
                    if not taj:
                        _fail(sim, f"type-specific job {j} runs on inference server {s}")
                    if not srv_loaned[s]:
                        _fail(sim, f"job {j} has a worker on server {s}, which is not loaned (returned)")
                    busy_loan += k * gj
                    on_inf += k
                elif sp == TRAIN:
                    busy_train += k * gj
        if on_inf != sim.inf_workers.item(j):
            _fail(sim, f"job {j}: {sim.inf_workers.item(j)} workers counted on inference servers "
                       f"but {on_inf} placed there")
        mixed = 0 < on_inf < placed
        if mixed != bool(sim.mixed[j]):
            _fail(sim, f"job {j}: mixed flag {bool(sim.mixed[j])} but {on_inf} of {placed} "
                       f"workers on inference servers")
        if mixed and sim.rate.item(j) != sim.rate_mixed(j, wj, on_inf):
            _fail(sim, f"mixed job {j} runs at rate {sim.rate.item(j)!r}, not the mixed rate "
                       f"{sim.rate_mixed(j, wj, on_inf)!r}")
        if st == running_code:
            if placed != wj:
                _fail(sim, f"job {j} has {wj} workers but {placed} placed")
            if not wminj <= wj <= wmaxj:
                _fail(sim, f"running job {j} has {wj} workers outside [{wminj}, {wmaxj}]")
        elif placed or wj:
            _fail(sim, f"job {j} in state {JobState(st).name} holds {placed} placed workers")
    used = np.asarray(used_l, dtype=np.int64)
    over = np.flatnonzero(used + free != cap)
    if len(over):
        s = int(over[0])
        _fail(sim, f"server {s}: {int(used[s])} GPUs used + {int(free[s])} free != capacity "
                   f"{int(cap[s])} (a GPU used twice or lost)")
    for s in range(sim.n_servers):
        if sim.srv_jobs[s] != on_server[s]:
            _fail(sim, f"server {s}: job table {sim.srv_jobs[s]} != placements {on_server[s]}")
    if busy_train != sim.busy_train_gpus or busy_loan != sim.busy_loan_gpus:
        _fail(sim, f"busy GPU counters (train {sim.busy_train_gpus}, loaned {sim.busy_loan_gpus}) != "
                   f"placements (train {busy_train}, loaned {busy_loan})")
    # state sets
    running = set(np.flatnonzero(state == JobState.RUNNING).tolist())
    queued = set(np.flatnonzero(state == JobState.QUEUED).tolist())
    if running != sim._running:
        _fail(sim, f"running set differs from the state array by {sorted(running ^ sim._running)[:5]}")
    if queued != sim._queued:
        _fail(sim, f"queued set differs from the state array by {sorted(queued ^ sim._queued)[:5]}")
    done = state == JobState.DONE
    if int(done.sum()) != sim.done_count:
        _fail(sim, f"done count {sim.done_count} != {int(done.sum())} jobs in state DONE")
    # aggregates kept on events
    q = np.flatnonzero(state == JobState.QUEUED)
    qmin, qmax = int(sim.g[q] @ sim.w_min[q]), int(sim.g[q] @ sim.w_max[q])
    if (qmin, qmax) != (sim.queued_gpus_min, sim.queued_gpus_max):
        _fail(sim, f"queued GPU demand counters ({sim.queued_gpus_min}, {sim.queued_gpus_max}) != "
                   f"recount ({qmin}, {qmax})")
    fresh = FreeIndex(free.tolist(), cap.tolist(), (sim.srv_pool == TRAIN).tolist(), sim.srv_loaned.tolist())
    if fresh != sim.free_index:
        _fail(sim, f"free-capacity index {sim.free_index!r} != recount {fresh!r}")
    # loans
    loaned = sim.srv_loaned
    if np.any(loaned & (sim.srv_pool != INFER)):
        _fail(sim, "a training server is marked loaned")
    n_loaned = int(loaned.sum())
    if n_loaned != sim.n_loaned:
        _fail(sim, f"loaned-server counter {sim.n_loaned} != {n_loaned} servers marked loaned")
    if int(cap[loaned].sum()) != sim.loaned_gpus:
        _fail(sim, f"loaned-GPU counter {sim.loaned_gpus} != {int(cap[loaned].sum())}")
    if n_loaned > sim.loanable_now:
        _fail(sim, f"{n_loaned} servers loaned but only {sim.loanable_now} loanable now")
    if not sim.uses_loaning and n_loaned:
        _fail(sim, f"{n_loaned} servers loaned to a policy that does not loan")
    # work
    rem, work = sim.remaining, sim.work
    tol = _EPS * np.maximum(work, 1.0)
    if np.any(rem < -tol) or np.any(rem > work + tol):
        j = int(np.flatnonzero((rem < -tol) | (rem > work + tol))[0])
        _fail(sim, f"job {j} has {rem[j]!r} work left of {work[j]!r}")
    if done.any():
        if np.any(np.abs(rem[done]) > tol[done]):
            j = int(np.flatnonzero(done & (np.abs(rem) > tol))[0])
            _fail(sim, f"finished job {j} still has {rem[j]!r} work left")
        fastest = np.where(sim.type_agnostic, sim.speeds.max(1), sim.speeds[:, 0])
        lb = work / (sim.w_max * fastest)
        # a tuned job (Decision.speedup, e.g. Pollux's batch-size tuning) may run faster than
        # its base rate: its bound divides by the table's largest multiplier
        for j, mult in sim.rate_mult.items():
            lb[j] /= max(1.0, float(np.max(mult)))
        # a job that ran beyond w_max or at a tuned batch (World v2's goodput curves) may beat
        # the bound at w_max, not its shortest running time over every configuration
        for j in sim.curve_jobs:
            lb[j] *= min_time_factor_of(sim.config, sim.jobs[j])
        jct = sim.finish - sim.submit
        short = done & (jct < lb - 1e-6 * np.maximum(lb, 1.0))
        if short.any():
            j = int(np.flatnonzero(short)[0])
            _fail(sim, f"job {j} finished in {jct[j]:.3f} s, below its lower bound {lb[j]:.3f} s")


class InvariantChecker:
    """:func:`check` plus the checks across rounds; call it after every round (``on_round``)."""

    def __init__(self) -> None:
        self.rounds = 0
        self._now = -np.inf
        self._remaining: np.ndarray | None = None

    def __call__(self, sim: Simulator) -> None:
        check(sim)
        if sim.now < self._now:
            _fail(sim, f"time went backwards from {self._now} s")
        rem = sim.remaining
        if self._remaining is not None and len(self._remaining) == len(rem):
            grew = rem > self._remaining + _EPS * np.maximum(sim.work, 1.0)
            if grew.any():
                j = int(np.flatnonzero(grew)[0])
                _fail(sim, f"job {j}'s remaining work grew from {self._remaining[j]!r} to {rem[j]!r}")
        self._remaining = rem.copy()
        self._now = sim.now
        self.rounds += 1
