"""Aryl, the reference elastic scheduler with capacity loaning (paper sections 4-5; SPEC 3).

Each round (``event_driven``: the simulator asks again at every event -- an arrival, a
completion, a loan change or a change made by the previous decision -- and fast-forwards the
rounds in between, where Aryl's decision would be the same):

1. **Reclaim** (paper section 4), before the decision, when inference wants servers back:
   :func:`aryl_gym.agents.reclaim.aryl_reclaim` (flexible-only servers first, then greedy lowest
   server preemption cost). ``aryl-optimal-reclaim`` uses the exact optimum (an integer program,
   :func:`aryl_gym.agents.reclaim.milp_reclaim`) at every size; ``aryl-default-reclaim`` the
   simulator's default rule.
2. **Loan**: every loanable server is accepted (``uses_loaning``).
3. **Phase one** (paper 5.2): the inelastic workload first -- inelastic jobs and elastic jobs'
   base demand ``w_min``. Running jobs keep their base allocation; their flexible workers are
   re-decided in phase two, so phase one may use the GPUs they hold (the inelastic workload is
   "the first class citizen"). Queued jobs are taken in order of predicted running time at base
   demand on a V100 (``pred_remaining / rate(w_min, TRAIN)``), shortest first, ties by id; each
   is admitted when its base fits (a best-fit trial placement on a copy of the free GPUs, with
   the engine's ``best_fit``), otherwise skipped. Pools: type-specific jobs only on training
   servers; type-agnostic jobs also on loaned inference servers, elastic ones preferring them
   (paper 5.3), inelastic ones preferring training servers.
4. **Phase two** (paper 5.2, Appendix D): a multiple-choice knapsack over the GPUs left, solved
   exactly by :func:`aryl_gym.agents.knapsack.solve_mckp`, separately per pool [ours: flexible
   workers stay in the GPU type of the job's base workers]. One group per elastic job with
   ``w_max > w_min`` (running ones included, in their current pool; newly admitted ones in
   their chosen pool); item ``k`` = ``k`` extra workers, weight ``k * g`` GPUs, value
   ``T(w_min) - T(w_min + k)`` seconds with ``T(w) = pred_remaining / rate(w, pool)``.
   The paper re-solves every round: a running job may scale in when it gets fewer extra workers
   than it has (no hysteresis; each change costs the scaling overhead).
   **Two readings of "the JCT reduction it brings"** (World v2): the paper's item value does not
   mention the pause a resize causes (``sim.scale_overhead_s``). ``aryl`` values items as above
   (the literal formula); ``aryl-pause`` (``charge_resize=True``) subtracts the pause from every
   choice that would resize a running job (keeping its current extra workers is the only choice
   without one; a job starting now pays none), so a worker moves only when the gain exceeds the
   pause. Both are reported (docs/reproduction.md).
5. **Placement** by the shared engine with ``group_flexible`` (paper 5.3).

**Placeability [ours].** Phase two's capacity is a GPU count, but a worker needs ``g`` GPUs on one
server, and flexible workers on inference servers must avoid the job's base servers. The
decision is therefore dry-run by the placement engine itself
(:func:`aryl_gym.sim.placement.plan`, each queued job only in its chosen pool) and every target
is cut to what that dry run placed. If a base admitted in phase one no longer fits (flexible
workers of running jobs stand where the phase-one trial expected free GPUs), phase two is redone
for that pool without growth, then with every elastic job of the pool at ``w_min``; a base that
still does not fit waits for the next round. So the engine reports no unplaced targets, and
the inelastic workload keeps its priority.

Variants (registry names):

* ``aryl`` -- all of the above;
* ``aryl-noloan`` -- no capacity loaning (``uses_loaning`` False): training servers only;
* ``aryl-noelastic`` -- no elastic scaling: elastic jobs are treated like inelastic ones at their
  requested size ``w_req`` (as Baseline runs them) and phase two is skipped. This is our reading
  of the paper's "without elastic scaling" ablation (section 7.3: loaning alone). The simulator's
  reclaim still scales an elastic job in rather than preempting it (the job model is elastic);
  the scheduler never grows it back;
* ``aryl-nogroup`` -- no special placement of elastic jobs (paper Table 6): they prefer
  training servers like inelastic jobs and flexible workers are not grouped apart;
* ``aryl-trainfirst`` [ours] -- as ``aryl`` but elastic type-agnostic jobs prefer training
  servers (V100) and use loaned T4 servers only when the training pool cannot host them (flexible
  workers on loaned servers stay grouped). The paper prefers inference servers for elastic jobs
  (5.3); with T4 at about 1/3 of a V100 that costs running time whenever V100s are free;
* ``aryl-optimal-reclaim`` -- the exact optimal reclaim (integer program solved by HiGHS, any size);
* ``aryl-default-reclaim`` -- the simulator's default reclaim (fewest busy GPUs first);
* ``aryl-hetero`` -- heterogeneous training (paper 7.2; jobs marked ``JobSpec.hetero`` by
  ``workload.hetero_fraction``): in phase two, a hetero job whose base is on training servers
  also joins the inference pool's knapsack, after the training pool's, with items ``k`` = ``k``
  flexible workers on loaned T4 servers on top of the ``e`` extra V100 workers it got there,
  valued ``T_V100(w_min + e) - T_mixed(w_min + e + k)`` (the mixed rate,
  :meth:`~aryl_gym.sim.engine.Simulator.rate_mixed`; only items that gain are ever chosen).
  Placement runs with ``PlacementOptions.hetero``. With no hetero job in the trace it decides
  exactly as ``aryl``;
* ``aryl-preempt`` [ours; not in the paper, which never preempts for scheduling] -- as ``aryl``,
  plus SRPT-style preemption before phase one: the shortest queued jobs (up to ``preempt_scan``
  = 8, in phase one's order) are taken in turn; one whose base does not fit may preempt running
  jobs of its pool whose predicted remaining time at their base demand exceeds ``preempt`` = 2
  times its own (longest first, as few as make it fit). Preempted jobs return to the queue and
  pay the relaunch overhead when they restart. The factor makes the rule stable: a job started
  this way is at least twice as short as the one it displaced, so the two never swap back. It
  is a reference for what preemption is worth in a world (testbed at loads 0.9-1.3: about
  0.75-0.85x Aryl's average JCT; basic: 0.99x; experiments/02-preemption-warm-start/) and the demonstrator of the
  set-policy config's warm start (configs/algos/maskable_ppo_set.yaml).

World v1: an elastic job requests its base demand ``w_min`` and may grow to ``w_max = r x
w_min`` (``docs/model.md``), so phase two can make a job run faster than Baseline runs it (in
World v0 the request was ``w_max`` and elasticity could only start a job earlier). The measured
comparison with Baseline, SJF, AFS and Pollux is in ``docs/reproduction.md``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from aryl_gym.agents.base import BasePolicy, register
from aryl_gym.agents.knapsack import solve_mckp_arrays
from aryl_gym.agents.reclaim import aryl_reclaim_view, default_reclaim_view, optimal_reclaim_view

from aryl_gym.sim.placement import fill, plan
from aryl_gym.sim.view import INFER, TRAIN, ClusterView, Decision, PlacementOptions

_GS = (1, 2, 4, 8)


def _fits(free: np.ndarray, mask: np.ndarray, g: int, w: int) -> bool:
    """Whether ``w`` workers of ``g`` GPUs fit on the ``mask`` servers' ``free`` GPUs."""
    return int((free[mask] // g).sum()) >= w


@dataclass
class ArylStats:
    """Per-episode counters for benchmarks and reports."""

    knapsack_s: list[float] = field(default_factory=list)  # wall seconds per MCKP solve round
    knapsack_groups: list[int] = field(default_factory=list)
    repairs: int = 0  # rounds that needed the placeability repair
    waited: int = 0  # admitted bases that could not be placed after repair
    preempted: int = 0  # running jobs preempted (``aryl-preempt``)




class ArylPolicy(BasePolicy):
    """Aryl (module docstring). Construct variants with the keyword arguments.

    Args:
        name: registry name.
        loaning: accept loaned inference servers.
        elastic: run phase two (elastic scaling); off = elastic jobs at their request ``w_req``.
        group: ``PlacementOptions(elastic_prefer_inference=group, group_flexible=group)``.
        reclaim: ``"aryl"``, ``"optimal"`` or ``"default"``.
        prefer_inference: elastic type-agnostic jobs prefer loaned inference servers (default:
            as ``group``); ``False`` with ``group`` on is the ``aryl-trainfirst`` variant.
        hetero: heterogeneous training (``aryl-hetero``): hetero jobs based on training servers
            may take flexible workers from the inference pool's knapsack.
    """

    event_driven = True

    def __init__(
        self,
        name: str = "aryl",
        loaning: bool = True,
        elastic: bool = True,
        group: bool = True,
        reclaim: str = "aryl",
        prefer_inference: bool | None = None,
        hetero: bool = False,
        preempt: float | None = None,
        preempt_scan: int = 8,
        charge_resize: bool = False,
    ):
        if preempt is not None and not (np.isfinite(preempt) and preempt >= 1.0):
            raise ValueError(f"preempt={preempt!r}; use None (never preempt) or a factor >= 1")
        if int(preempt_scan) < 1:
            raise ValueError(f"preempt_scan={preempt_scan!r}; use an integer >= 1")
        if reclaim not in ("aryl", "optimal", "default"):
            raise ValueError(f"reclaim rule {reclaim!r}; use 'aryl', 'optimal' or 'default'")
        self.name = name
        self.uses_loaning = loaning
        self.elastic_scaling = elastic
        prefer = group if prefer_inference is None else prefer_inference
        self.placement = PlacementOptions(
            elastic_prefer_inference=prefer, group_flexible=group, hetero=hetero
        )
        self.reclaim_rule = reclaim
        self.preempt = preempt
        self.preempt_scan = int(preempt_scan)
        self.charge_resize = bool(charge_resize)
        self.stats = ArylStats()
        self._jobs_ref: object = None
        self._pre: dict[int, int] = {}

    # ------------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        self.stats = ArylStats()
        self._jobs_ref = None
        self._pre = {}

    def reclaim(self, view: ClusterView, n: int) -> Sequence[int] | None:
        if self.reclaim_rule == "aryl":
            return aryl_reclaim_view(view, n)
        if self.reclaim_rule == "optimal":
            return optimal_reclaim_view(view, n)
        return default_reclaim_view(view, n)

    # ------------------------------------------------------------------------------------------
    def _static(self, view: ClusterView) -> None:
        """Per-trace arrays (built once per episode)."""
        if self._jobs_ref is view.jobs:
            return
        jobs = view.jobs
        self._jobs_ref = jobs
        self._item_cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self.g = np.array([j.g for j in jobs], dtype=np.int64)
        self.w_min = np.array([j.w_min for j in jobs], dtype=np.int64)
        self.w_max = np.array([j.w_max for j in jobs], dtype=np.int64)
        self.w_req = np.array([j.w_req for j in jobs], dtype=np.int64)
        self.elastic = np.array([j.elastic for j in jobs], dtype=bool)
        self.ta = np.array([j.type_agnostic for j in jobs], dtype=bool)
        self.hetero = np.array(
            [self.placement.hetero and j.hetero for j in jobs], dtype=bool
        )
        # rate of one worker per pool (V100 worker-seconds per second)
        self.rate1 = np.array(
            [[view.rate(j.id, 1, TRAIN), view.rate(j.id, 1, INFER)] for j in jobs], dtype=np.float64
        ).reshape(len(jobs), 2)
        # rate at the base demand per pool (includes a job's own scaling curve, if any)
        self.rate_base = np.array(
            [
                [view.rate(j.id, self._base(j.id), TRAIN), view.rate(j.id, self._base(j.id), INFER)]
                for j in jobs
            ],
            dtype=np.float64,
        ).reshape(len(jobs), 2)

    def _base(self, j: int) -> int:
        return int(self.w_min[j]) if self.elastic_scaling else int(self.w_req[j])

    def _pool_order(self, j: int, infer_ok: bool) -> tuple[int, ...]:
        if not (self.ta[j] and infer_ok):
            return (TRAIN,)
        if self.elastic[j] and self.placement.elastic_prefer_inference:
            return (INFER, TRAIN)
        return (TRAIN, INFER)

    # ------------------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Decision:
        self._static(view)
        cap = np.asarray(view.srv_cap)
        masks = {
            TRAIN: np.asarray(view.usable(TRAIN)).copy(),
            INFER: np.asarray(view.usable(INFER)).copy(),
        }
        infer_ok = bool(masks[INFER].any())

        # ---------------- phase one: the inelastic workload ----------------
        trial = np.asarray(view.srv_free, dtype=np.int64).copy()
        if self.elastic_scaling:
            trial += np.asarray(view.srv_flex_gpus, dtype=np.int64)  # flexible demand is re-decided
        self._pre = self._preemptions(view, trial, cap, masks, infer_ok) if self.preempt else {}
        for r in self._pre:  # a preempted job's GPUs are free for phase one and two
            self._free_gpus_of(view, r, trial, flex=not self.elastic_scaling)
        running = [j for j in view.running() if j not in self._pre]
        admitted: list[int] = []
        pool_of: dict[int, int] = {}
        q = np.asarray(view.queued(), dtype=np.int64)
        if len(q) and trial.any():
            base = self.w_min[q] if self.elastic_scaling else self.w_req[q]
            t_base = np.asarray(view.pred_remaining)[q] / self.rate_base[q, TRAIN]
            q = q[np.lexsort((q, t_base))]
            base = self.w_min[q] if self.elastic_scaling else self.w_req[q]
            gq = self.g[q]
            # workers of each size that fit per pool now (fragmentation aware; exact feasibility
            # test for w identical workers: sum over servers of floor(free / g) >= w)
            cnt = {p: {g: int((trial[masks[p]] // g).sum()) for g in _GS} for p in (TRAIN, INFER)}
            gi = np.searchsorted(np.array(_GS), gq)
            c_tr = np.array([cnt[TRAIN][g] for g in _GS])[gi]
            c_in = (
                np.array([cnt[INFER][g] for g in _GS])[gi]
                if infer_ok
                else np.zeros(len(q), np.int64)
            )
            maybe = (c_tr >= base) | (self.ta[q] & (c_in >= base))
            # Counts only shrink as bases are admitted, so jobs that do not fit now never will
            # this round: the Python loop runs over candidates only.
            for j, b, g in zip(q[maybe].tolist(), base[maybe].tolist(), gq[maybe].tolist()):
                for p in self._pool_order(j, infer_ok):
                    if cnt[p][g] < b:
                        continue
                    fill(trial, cap, masks[p], g, b)
                    admitted.append(j)
                    pool_of[j] = p
                    m = masks[p]
                    cnt[p] = {gg: int((trial[m] // gg).sum()) for gg in _GS}
                    break
                if cnt[TRAIN][1] == 0 and cnt[INFER][1] == 0:
                    break

        targets: dict[int, int] = {j: self._base(j) for j in admitted}
        pools_now = np.asarray(view.pool)
        workers_now = np.asarray(view.workers)
        if not self.elastic_scaling:
            final, waited = self._validate(view, targets, pool_of, admitted, strict=True)
            # A job admitted by counting to a pool where the engine cannot place it (flexible
            # grouping keeps a job's flexible workers off the servers of its base workers on the
            # loaned pool) tries its other pool once; kept only if no other job waits for it.
            # Was: it was admitted to the same pool round after round and never started, though
            # the other pool was free (the episode ended stalled).
            retry = {j: p for j in waited for p in self._pool_order(j, infer_ok) if p != pool_of[j]}
            if retry:
                moved = {**pool_of, **retry}
                f2, w2 = self._validate(view, targets, moved, admitted, strict=True)
                if set(w2) <= set(waited) and len(w2) < len(waited):
                    final, waited, pool_of = f2, w2, moved
            self.stats.waited += len(waited)
            final.update(self._pre)
            return Decision(
                targets=final, pools={j: pool_of[j] for j in final if j in pool_of}, order=admitted
            )

        # ---------------- phase two: the multiple-choice knapsack per pool ----------------
        elastic_jobs: list[tuple[int, int]] = []  # (job, pool)
        for j in running:
            if self.elastic[j]:
                elastic_jobs.append((j, int(pools_now[j])))
                targets[j] = int(self.w_min[j])
        for j in admitted:
            if self.elastic[j]:
                elastic_jobs.append((j, pool_of[j]))
        extra = self._knapsack(view, elastic_jobs, trial, masks)
        for j, k in extra.items():
            targets[j] += k

        # ---------------- placeability: replay on a copy with the engine's rules -------------
        order = admitted + [j for j in running if self.elastic[j]]
        final, waited = self._validate(view, targets, pool_of, order, strict=False)
        if waited:
            self.stats.repairs += 1
            bad_pools = {pool_of[j] for j in waited}
            for step in (1, 2):
                t2 = dict(targets)
                for j, p in elastic_jobs:
                    if p not in bad_pools:
                        continue
                    if step == 1 and j in pool_of:
                        t2[j] = int(self.w_min[j])
                    elif step == 1:
                        t2[j] = min(t2[j], int(workers_now[j]))
                    else:
                        t2[j] = int(self.w_min[j])
                final, waited = self._validate(view, t2, pool_of, order, strict=False)
                if not waited:
                    break
            self.stats.waited += len(waited)
        # Running jobs whose target equals what they have need not be listed.
        final = {j: t for j, t in final.items() if j in pool_of or t != int(workers_now[j])}
        final.update(self._pre)
        return Decision(
            targets=final, pools={j: pool_of[j] for j in final if j in pool_of}, order=order
        )

    # ------------------------------------------------------------------------------------------
    def _preemptions(
        self,
        view: ClusterView,
        free: np.ndarray,
        cap: np.ndarray,
        masks: dict[int, np.ndarray],
        infer_ok: bool,
    ) -> dict[int, int]:
        """``aryl-preempt`` [ours]: running jobs to preempt this round (job id -> 0).

        The shortest queued jobs (at most ``preempt_scan``, by the phase-one order) are taken in
        turn. One whose base fits in ``free`` (free GPUs plus the flexible ones phase two
        re-decides) keeps that space; one that does not fit may take the GPUs of running jobs
        in its pool whose predicted remaining time at their base demand exceeds ``preempt``
        times its own, longest first, as few as make its base fit. The scan stops at the first
        job that neither fits nor can preempt, so a preemption never serves a job behind one
        that waits. ``free`` is not changed.
        """
        q = np.asarray(view.queued(), dtype=np.int64)
        run = view.running()
        if not len(q) or not run:
            return {}
        assert self.preempt is not None
        free = free.copy()
        pools_now = np.asarray(view.pool)
        t_q = np.asarray(view.pred_remaining)[q] / self.rate_base[q, TRAIN]
        order = np.lexsort((q, t_q))[: self.preempt_scan]
        t_run = {r: view.pred_time(r, self._base(r), int(pools_now[r])) for r in run}
        pre: dict[int, int] = {}
        for j, tq in zip(q[order].tolist(), t_q[order].tolist()):
            g, b = int(self.g[j]), self._base(j)
            pools = self._pool_order(j, infer_ok)
            fit = next((p for p in pools if _fits(free, masks[p], g, b)), None)
            if fit is not None:
                fill(free, cap, masks[fit], g, b)
                continue
            for p in pools:
                victims = sorted(
                    (r for r in run
                     if r not in pre and int(pools_now[r]) == p and t_run[r] > self.preempt * tq),
                    key=lambda r: (-t_run[r], r),
                )
                trial = free.copy()
                chosen: list[int] = []
                for r in victims:
                    self._free_gpus_of(view, r, trial, flex=False)  # flex GPUs count as free
                    chosen.append(r)
                    if _fits(trial, masks[p], g, b):
                        break
                if chosen and _fits(trial, masks[p], g, b):
                    pre.update(dict.fromkeys(chosen, 0))
                    free = trial
                    fill(free, cap, masks[p], g, b)
                    break
            else:
                break
        self.stats.preempted += len(pre)
        return pre

    def _free_gpus_of(self, view: ClusterView, r: int, free: np.ndarray, flex: bool) -> None:
        """Add the GPUs of running job ``r``'s base workers (and flexible ones with ``flex``)
        to ``free``, per server."""
        base_srv, flex_srv = view.placement(r)
        for s, w in (*base_srv.items(), *(flex_srv.items() if flex else ())):
            free[s] += w * int(self.g[r])

    # ------------------------------------------------------------------------------------------
    def _knapsack(
        self,
        view: ClusterView,
        elastic_jobs: list[tuple[int, int]],
        trial: np.ndarray,
        masks: dict[int, np.ndarray],
    ) -> dict[int, int]:
        """Phase two: extra workers per elastic job, by an exact MCKP per pool (paper App. D)."""
        out: dict[int, int] = {}
        ws: list[np.ndarray]
        vs: list[np.ndarray]
        tic = time.perf_counter()
        ngroups = 0
        pred = np.asarray(view.pred_remaining)
        for p in (TRAIN, INFER):
            members = [j for j, pj in elastic_jobs if pj == p and self.w_max[j] > self.w_min[j]]
            if not members and not (p == INFER and self.hetero.any()):
                continue
            capacity = int(trial[masks[p]].sum())
            if capacity <= 0:
                continue
            ws = []
            vs = []
            pause = float(view.config.sim.scale_overhead_s) if self.charge_resize else 0.0
            workers = np.asarray(view.workers)
            for j in members:
                w_gpu, gain = self._items(view, j, p)
                ws.append(w_gpu)
                v = float(pred[j]) * gain
                if pause > 0.0 and int(workers[j]) > 0:  # a running job: a change pauses it
                    e_cur = int(workers[j]) - int(self.w_min[j])  # extra workers it has now
                    if e_cur > 0:  # no item (scale in to w_min) pays too: keeping e_cur gains
                        v = v.copy()
                        v[min(e_cur, len(v)) - 1] += pause
                    else:
                        v = v - pause
                vs.append(v)
            # heterogeneous training: hetero jobs based on V100 bid for T4 workers too
            mixed = []
            if p == INFER and self.hetero.any():
                for j, pj in elastic_jobs:
                    if pj != TRAIN or not self.hetero[j]:
                        continue
                    n0 = int(self.w_min[j]) + out.get(j, 0)
                    if n0 >= int(self.w_max[j]):
                        continue
                    w_gpu, gain = self._items_mixed(view, j, n0)
                    ws.append(w_gpu)
                    vs.append(float(pred[j]) * gain)
                    mixed.append(j)
            res = solve_mckp_arrays(ws, vs, capacity)
            ngroups += len(ws)
            for j, c in zip(members + mixed, res.choice):
                if c >= 0:
                    out[j] = out.get(j, 0) + c + 1
        self.stats.knapsack_s.append(time.perf_counter() - tic)
        self.stats.knapsack_groups.append(ngroups)
        return out

    def _items(self, view: ClusterView, j: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Static part of job ``j``'s knapsack items on pool ``p``: weights ``k * g`` (GPUs) and
        ``1 / rate(w_min) - 1 / rate(w_min + k)`` (s per unit of work), k = 1..w_max-w_min.
        Times the predicted remaining work, the second is ``T(w_min) - T(w_min + k)``."""
        key = (j, p)
        hit = self._item_cache.get(key)
        if hit is None:
            wmin, wmax, g = int(self.w_min[j]), int(self.w_max[j]), int(self.g[j])
            inv = np.array([1.0 / view.rate(j, w, p) for w in range(wmin, wmax + 1)])
            hit = (np.arange(1, wmax - wmin + 1, dtype=np.int64) * g, inv[0] - inv[1:])
            self._item_cache[key] = hit
        return hit

    def _items_mixed(self, view: ClusterView, j: int, n0: int) -> tuple[np.ndarray, np.ndarray]:
        """Hetero job ``j`` with ``n0`` workers on V100: items ``k`` = ``k`` more workers on T4,
        weights ``k * g`` and ``1 / rate_V100(n0) - 1 / rate_mixed(n0 + k)`` (s per unit of
        work; negative when mixing is slower, and then never chosen)."""
        key = (j, 2 + n0)
        hit = self._item_cache.get(key)
        if hit is None:
            wmax, g = int(self.w_max[j]), int(self.g[j])
            inv0 = 1.0 / view.rate(j, n0, TRAIN)
            inv = np.array(
                [1.0 / view.rate_mixed(j, w, w - n0) for w in range(n0 + 1, wmax + 1)]
            )
            hit = (np.arange(1, wmax - n0 + 1, dtype=np.int64) * g, inv0 - inv)
            self._item_cache[key] = hit
        return hit

    # ------------------------------------------------------------------------------------------
    def _validate(
        self,
        view: ClusterView,
        targets: dict[int, int],
        pool_of: dict[int, int],
        order: list[int],
        strict: bool,
    ) -> tuple[dict[int, int], list[int]]:
        """Dry-run the decision with the placement engine itself (:func:`plan`): each queued job
        only in its chosen pool, and with ``strict`` only at its full target.

        Returns (targets cut to what was placed, queued jobs whose base did not fit).
        """
        dec = Decision(targets={**targets, **self._pre}, pools=pool_of, order=order)
        p = plan(view, dec, self.placement, fixed_pools=True, whole=strict)
        started = set(p.report.started)
        out: dict[int, int] = {}
        waited: list[int] = []
        for j in targets:
            if j in self._pre:
                continue
            if j in pool_of and j not in started:
                waited.append(j)
            else:
                out[j] = p.workers(j)
        return out, waited


@register("aryl")
def _aryl() -> BasePolicy:
    return ArylPolicy("aryl")


@register("aryl-pause")
def _aryl_pause() -> BasePolicy:
    return ArylPolicy("aryl-pause", charge_resize=True)


@register("aryl-noloan")
def _aryl_noloan() -> BasePolicy:
    return ArylPolicy("aryl-noloan", loaning=False)


@register("aryl-noelastic")
def _aryl_noelastic() -> BasePolicy:
    return ArylPolicy("aryl-noelastic", elastic=False)


@register("aryl-nogroup")
def _aryl_nogroup() -> BasePolicy:
    return ArylPolicy("aryl-nogroup", group=False)


@register("aryl-trainfirst")
def _aryl_trainfirst() -> BasePolicy:
    return ArylPolicy("aryl-trainfirst", prefer_inference=False)


@register("aryl-optimal-reclaim")
def _aryl_opt() -> BasePolicy:
    return ArylPolicy("aryl-optimal-reclaim", reclaim="optimal")


@register("aryl-default-reclaim")
def _aryl_def() -> BasePolicy:
    return ArylPolicy("aryl-default-reclaim", reclaim="default")


@register("aryl-preempt")
def _aryl_preempt() -> BasePolicy:
    return ArylPolicy("aryl-preempt", preempt=2.0)


@register("aryl-hetero")
def _aryl_hetero() -> BasePolicy:
    return ArylPolicy("aryl-hetero", hetero=True)
