"""Choosing which loaned inference servers to give back (paper section 4; SPEC 3 step 1).

When inference needs ``n`` of its loaned servers back this round, every training worker on a
returned server leaves it: an elastic job that keeps at least ``w_min`` workers elsewhere scales
in, any other job with a worker there is preempted. Three rules are offered:

* :func:`aryl_reclaim` -- Aryl's heuristic. (1) Loaned servers that hold only *flexible* workers
  of elastic jobs (or nothing) are released first: no preemption, only a scale-in (paper 5.3:
  "release the server group for flexible demands first without any preemption to see if this
  alone is sufficient"); among them the smallest predicted JCT loss first [ours], recomputed
  after each pick. (2) Then greedily the server with the lowest *server preemption cost* = the
  number of jobs that would be preempted if it were taken now, given the servers already taken
  (an elastic job that stays at ``>= w_min`` counts 0; a job already marked for preemption
  counts 0) [ours]; ties to fewer busy GPUs (of jobs not yet preempted), then the lower id;
  costs are recomputed after each pick.
* :func:`milp_reclaim` -- the exact optimum (fewest preempted jobs, then fewest GPUs lost) as a
  0-1 integer program solved by HiGHS through :func:`scipy.optimize.milp`; any size.
* :func:`optimal_reclaim` -- exhaustive search over all ``C(L, n)`` subsets of the ``L`` loaned
  servers for the fewest preempted jobs (paper section 7.3 compares Aryl's heuristic with it).
  Ties: fewest GPUs lost by training (busy GPUs of jobs on the taken servers, preempted jobs'
  whole allocation on loaned servers counted once), then the lexicographically smallest sorted
  id tuple. For small instances only (guarded by ``max_subsets``); the reference the integer
  program is tested against.
* :func:`default_reclaim_instance` -- the simulator's simple default: fewest busy GPUs first.

All rules work on a lightweight :class:`ReclaimInstance` (plain mappings), so studies can build
random instances without a simulator; :func:`instance_from_view` and the ``*_view`` adapters
take a :class:`~aryl_gym.sim.view.ClusterView`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from aryl_gym.sim.engine import default_reclaim
from aryl_gym.sim.view import ClusterView


@dataclass
class ReclaimInstance:
    """What a reclaim rule needs to know.

    Attributes:
        loaned: ids of the servers on loan (the candidates), any order.
        srv_jobs: server id -> {job id: workers of that job on the server} (loaned servers).
        srv_flex: server id -> {job id: flexible workers of that job on the server}; a subset of
            ``srv_jobs`` (flexible = beyond ``w_min``, paper 5.3).
        workers: job id -> total workers of the job (on all servers, loaned or not).
        w_min: job id -> fewest workers the job can run with.
        elastic: job id -> whether the job may scale in.
        g: job id -> GPUs per worker (for busy-GPU tie-breaks); default 1.
        time_one: job id -> predicted remaining running time with one worker (s), so that
            ``T(w) = time_one / w``; used for the JCT loss of a scale-in. Default 0.
    """

    loaned: list[int]
    srv_jobs: dict[int, dict[int, int]]
    srv_flex: dict[int, dict[int, int]] = field(default_factory=dict)
    workers: dict[int, int] = field(default_factory=dict)
    w_min: dict[int, int] = field(default_factory=dict)
    elastic: dict[int, bool] = field(default_factory=dict)
    g: dict[int, int] = field(default_factory=dict)
    time_one: dict[int, float] = field(default_factory=dict)

    def jobs(self) -> list[int]:
        """Job ids with a worker on a loaned server, ascending."""
        out: set[int] = set()
        for s in self.loaned:
            out.update(self.srv_jobs.get(s, {}))
        return sorted(out)

    def busy(self, s: int) -> int:
        return sum(k * self.g.get(j, 1) for j, k in self.srv_jobs.get(s, {}).items())

    def validate(self) -> None:
        """Raise ``ValueError`` when the instance is inconsistent (for user-built instances)."""
        for s in self.loaned:
            for j, k in self.srv_jobs.get(s, {}).items():
                if k <= 0:
                    raise ValueError(f"server {s}: job {j} has {k} workers; must be >= 1")
                if j not in self.workers or j not in self.w_min:
                    raise ValueError(f"server {s}: job {j} lacks workers/w_min entries")
                if self.srv_flex.get(s, {}).get(j, 0) > k:
                    raise ValueError(f"server {s}: job {j} has more flexible than total workers")
        for j in self.jobs():
            on_loaned = sum(self.srv_jobs.get(s, {}).get(j, 0) for s in self.loaned)
            if on_loaned > self.workers[j]:
                raise ValueError(f"job {j}: {on_loaned} workers on loaned servers > total")
            # flexible workers are those beyond w_min of an elastic job (paper 5.3; the simulator's
            # rebalance keeps min(workers, w_min) of them base). Was: not checked, so a file with
            # more made aryl_reclaim's "no preemption" first phase preempt, or divide by zero
            flex = sum(self.srv_flex.get(s, {}).get(j, 0) for s in self.loaned)
            room = max(self.workers[j] - self.w_min[j], 0) if self.elastic.get(j, False) else 0
            if flex > room:
                raise ValueError(f"job {j}: {flex} flexible workers on loaned servers, but an "
                                 f"{'elastic' if self.elastic.get(j, False) else 'inelastic'} job with "
                                 f"{self.workers[j]} workers and w_min {self.w_min[j]} has {room}")


def instance_from_view(view: ClusterView) -> ReclaimInstance:
    """Build a :class:`ReclaimInstance` from the simulator's current state."""
    loaned = [int(s) for s in np.flatnonzero(view.srv_loaned)]
    srv_jobs: dict[int, dict[int, int]] = {}
    jobs: set[int] = set()
    for s in loaned:
        on = view.jobs_on(s)
        srv_jobs[s] = on
        jobs.update(on)
    srv_flex: dict[int, dict[int, int]] = {s: {} for s in loaned}
    inst = ReclaimInstance(loaned=loaned, srv_jobs=srv_jobs, srv_flex=srv_flex)
    for j in sorted(jobs):
        spec = view.jobs[j]
        _, flex = view.placement(j)
        for s, k in flex.items():
            if s in srv_flex:
                srv_flex[s][j] = k
        inst.workers[j] = int(view.workers[j])
        inst.w_min[j] = int(spec.w_min)
        inst.elastic[j] = bool(spec.elastic)
        inst.g[j] = int(spec.g)
        p = int(view.pool[j])
        rate1 = view.rate(j, 1, p) if p >= 0 else 0.0
        inst.time_one[j] = float(view.pred_remaining[j]) / rate1 if rate1 > 0 else 0.0
    return inst


# ------------------------------------------------------------------------------------------------
# evaluation
# ------------------------------------------------------------------------------------------------
def reclaim_preemptions(inst: ReclaimInstance | ClusterView, servers: Iterable[int]) -> int:
    """Number of jobs preempted if ``servers`` are returned together.

    A job with workers on the returned servers is preempted unless it is elastic and keeps at
    least ``w_min`` workers (the simulator's rule, :meth:`Simulator.reclaim_servers`; returning
    servers one by one gives the same set, since workers only decrease).
    """
    if isinstance(inst, ClusterView):
        inst = instance_from_view(inst)
    removed: dict[int, int] = {}
    for s in servers:
        for j, k in inst.srv_jobs.get(int(s), {}).items():
            removed[j] = removed.get(j, 0) + k
    return sum(1 for j, r in removed.items() if _preempted(inst, j, r))


def _preempted(inst: ReclaimInstance, j: int, removed: int) -> bool:
    return removed > 0 and not (
        inst.elastic.get(j, False) and inst.workers[j] - removed >= inst.w_min[j]
    )


def _flex_only(inst: ReclaimInstance, s: int) -> bool:
    fl = inst.srv_flex.get(s, {})
    return all(fl.get(j, 0) == k for j, k in inst.srv_jobs.get(s, {}).items())


# ------------------------------------------------------------------------------------------------
# rules
# ------------------------------------------------------------------------------------------------
def aryl_reclaim(inst: ReclaimInstance, n: int) -> list[int]:
    """Aryl's reclaim heuristic (module docstring): flexible-only servers first, then greedy
    lowest server preemption cost with costs recomputed after each pick.

    Complexity: O(n * L * J_s) for ``L`` loaned servers with ``J_s`` jobs each.
    """
    n = _check_n(inst, n)
    left = dict(inst.workers)  # workers each job still has
    dead: set[int] = set()  # jobs marked for preemption
    taken: list[int] = []
    cand = sorted(inst.loaned)
    # live busy GPUs per server (jobs not marked for preemption), updated as jobs die
    busy = {s: inst.busy(s) for s in cand}
    where: dict[int, list[int]] = {}
    for s in cand:
        for j in inst.srv_jobs.get(s, {}):
            where.setdefault(j, []).append(s)
    flex_only = [s for s in cand if _flex_only(inst, s)]

    def take(s: int) -> None:
        for j, k in inst.srv_jobs.get(s, {}).items():
            if j in dead:
                continue
            left[j] -= k
            if not (inst.elastic.get(j, False) and left[j] >= inst.w_min[j]):
                dead.add(j)
                gj = inst.g.get(j, 1)
                for s2 in where[j]:
                    busy[s2] -= inst.srv_jobs[s2][j] * gj
            else:
                busy[s] -= k * inst.g.get(j, 1)
        taken.append(s)
        cand.remove(s)

    # (1) servers holding only flexible workers: scale-in without preemption.
    while len(taken) < n and flex_only:
        best: tuple[float, int, int] | None = None
        for s in flex_only:
            loss = 0.0
            for j, k in inst.srv_jobs.get(s, {}).items():
                w = left[j]
                a = inst.time_one.get(j, 0.0)
                loss += a / (w - k) - a / w  # flexible workers never take a job below w_min >= 1
            key = (loss, busy[s], s)
            if best is None or key < best:
                best = key
        assert best is not None
        flex_only.remove(best[2])
        take(best[2])
    # (2) greedy lowest server preemption cost.
    while len(taken) < n:
        best2: tuple[int, int, int] | None = None
        for s in cand:
            cost = 0
            for j, k in inst.srv_jobs.get(s, {}).items():
                if j in dead:
                    continue
                if not (inst.elastic.get(j, False) and left[j] - k >= inst.w_min[j]):
                    cost += 1
            key = (cost, busy[s], s)
            if best2 is None or key < best2:
                best2 = key
        assert best2 is not None
        take(best2[2])
    return taken


def default_reclaim_instance(inst: ReclaimInstance, n: int) -> list[int]:
    """The simulator's simple default: fewest busy GPUs first, ties by id."""
    n = _check_n(inst, n)
    return sorted(inst.loaned, key=lambda s: (inst.busy(s), s))[:n]


def optimal_reclaim(inst: ReclaimInstance, n: int, max_subsets: int = 5_000_000) -> list[int]:
    """Exhaustive optimal reclaim: the ``n``-subset of loaned servers with the fewest preempted
    jobs (ties: fewest GPUs lost, then smallest sorted id tuple).

    Vectorised over subsets in chunks: O(C(L, n) * J) for ``J`` jobs on loaned servers.

    Raises:
        ValueError: when ``C(L, n) > max_subsets`` (use :func:`aryl_reclaim` for big instances).
    """
    n = _check_n(inst, n)
    servers = sorted(inst.loaned)
    L = len(servers)
    total = math.comb(L, n)
    if total > max_subsets:
        raise ValueError(
            f"optimal reclaim over C({L}, {n}) = {total:,} subsets exceeds max_subsets="
            f"{max_subsets:,}; use the heuristic or raise the limit"
        )
    if n == 0:
        return []
    jobs = inst.jobs()
    col = {j: i for i, j in enumerate(jobs)}
    J = len(jobs)
    mat = np.zeros((L, J), dtype=np.int64)  # workers of job on server
    for r, s in enumerate(servers):
        for j, k in inst.srv_jobs.get(s, {}).items():
            mat[r, col[j]] = k
    wk = np.array([inst.workers[j] for j in jobs], dtype=np.int64)
    wmin = np.array([inst.w_min[j] for j in jobs], dtype=np.int64)
    el = np.array([inst.elastic.get(j, False) for j in jobs], dtype=bool)
    gg = np.array([inst.g.get(j, 1) for j in jobs], dtype=np.int64)
    on_loaned = mat.sum(axis=0)
    best_key: tuple[int, int] | None = None
    best_combo: tuple[int, ...] = ()
    it = itertools.combinations(range(L), n)
    chunk = 65536
    while True:
        block = list(itertools.islice(it, chunk))
        if not block:
            break
        idx = np.array(block, dtype=np.int64)  # (M, n), lexicographic order
        removed = mat[idx].sum(axis=1)  # (M, J)
        pre = (removed > 0) & ~(el & (wk - removed >= wmin))
        npre = pre.sum(axis=1)
        # GPUs lost: scaled-in workers of surviving jobs + all loaned workers of preempted jobs
        lost = (np.where(pre, on_loaned, removed) * gg).sum(axis=1)
        order = np.lexsort((lost, npre))  # stable: first (lexicographic) combo among ties
        m = int(order[0])
        key = (int(npre[m]), int(lost[m]))
        if best_key is None or key < best_key:
            best_key, best_combo = key, tuple(int(x) for x in idx[m])
    return [servers[r] for r in best_combo]


def milp_reclaim(
    inst: ReclaimInstance,
    n: int,
    secondary: bool = True,
    time_limit: float | None = None,
) -> list[int]:
    """Exact optimal reclaim as a mixed-integer program, solved by HiGHS
    (:func:`scipy.optimize.milp`); works at any size (``aryl-gym bench --only reclaim`` times it
    up to 200 loaned servers).

    Variables: ``x_s`` = 1 when loaned server ``s`` is returned; ``p_j`` = 1 when job ``j`` is
    preempted; ``q_j >= 0`` (only with ``secondary``). With ``k_js`` the workers of job ``j`` on
    server ``s``, ``a_j = sum_s k_js`` its workers on loaned servers and ``slack_j = workers_j -
    w_min_j`` for an elastic job, 0 otherwise (job ``j`` is preempted iff
    ``sum_s k_js x_s > slack_j``)::

        minimise   W * sum_j p_j  +  sum_j g_j * (sum_s k_js x_s + q_j)      [second term: secondary]
        s.t.       sum_s x_s = n
                   x_s <= p_j                       for every s with k_js > slack_j
                   sum_s k_js x_s - (a_j - slack_j) p_j <= slack_j           (when some k_js <= slack_j)
                   q_j >= a_j p_j - sum_s k_js x_s,  q_j >= 0
                   x, p binary

    The second term is the GPUs lost by training (:func:`optimal_reclaim`'s tie-break:
    scaled-in workers of surviving jobs plus the whole loaned allocation of preempted jobs, since
    ``g_j (removed_j + q_j)`` is ``g_j a_j`` when preempted and ``g_j removed_j`` otherwise).
    ``W = 1 + sum_j g_j a_j`` exceeds any value of the second term, so one solve with a zero MIP
    gap is exactly the lexicographic optimum (fewest preemptions, then fewest GPUs lost). Among
    equal optima the choice is HiGHS's (deterministic), not necessarily
    :func:`optimal_reclaim`'s smallest ids.

    Reductions: idle loaned servers are returned first without a solve (they cost nothing);
    dominance rows ``x_t <= x_s`` break symmetry when server ``s`` holds no more workers of any
    job than server ``t`` (returning ``s`` instead of ``t`` never costs more in either objective;
    equal servers are ordered by id); jobs with ``a_j <= slack_j`` can never be preempted and get
    no ``p_j``; a job with ``slack_j = 0`` loses all its loaned GPUs exactly when preempted, so
    its part of the second term is ``g_j a_j p_j`` and it needs no ``q_j``.

    Why scipy/HiGHS rather than OR-Tools CP-SAT: the problem is a small 0-1 program (a few
    hundred binaries at 200 servers) that HiGHS solves to proven optimality in about a second on
    typical states (the hardest we met, 200 full servers of inelastic jobs, 10-13 s of CPU);
    scipy is a common, stable dependency with wheels everywhere, while OR-Tools is a large
    native package that pins its own protobuf (a conflict risk next to TensorBoard).

    Args:
        secondary: also minimise the GPUs lost among the fewest-preemption choices.
        time_limit: seconds for HiGHS; ``RuntimeError`` when it stops before proving optimality.

    Raises:
        ImportError: when scipy (>= 1.9) is not installed.
        RuntimeError: when HiGHS does not return a proven optimum.
    """
    n = _check_n(inst, n)
    # Idle loaned servers cost nothing in either objective: they go first (lowest ids first).
    idle = sorted(s for s in inst.loaned if not inst.srv_jobs.get(s))
    if n <= len(idle):
        return idle[:n]
    servers = sorted(s for s in inst.loaned if inst.srv_jobs.get(s))
    n -= len(idle)
    L = len(servers)
    if n == L:
        return idle + servers
    try:
        # an optional dependency: its absence is handled here
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_array
    except ImportError as exc:  # pragma: no cover - scipy is a core dependency
        raise ImportError(
            "the exact reclaim optimum needs scipy >= 1.9 (scipy.optimize.milp): pip install scipy"
        ) from exc
    jobs = inst.jobs()
    row_of = {s: r for r, s in enumerate(servers)}
    # per job: [(server row, workers)], workers on loaned servers, slack
    on: dict[int, list[tuple[int, int]]] = {j: [] for j in jobs}
    for s in servers:
        for j, k in inst.srv_jobs.get(s, {}).items():
            on[j].append((row_of[s], int(k)))
    pre_jobs = []  # jobs that can be preempted
    for j in jobs:
        a = sum(k for _, k in on[j])
        slack = max(inst.workers[j] - inst.w_min[j], 0) if inst.elastic.get(j, False) else 0
        if a > slack:
            pre_jobs.append((j, a, slack))
    P = len(pre_jobs)
    # Jobs with slack 0 lose all their loaned GPUs exactly when preempted: their GPU loss is
    # g_j a_j p_j, with no q_j. The others (elastic with slack > 0) get q_j.
    qcol: dict[int, int] = {}
    if secondary:
        for i, (_, _, slack) in enumerate(pre_jobs):
            if slack > 0:
                qcol[i] = L + P + len(qcol)
    nvar = L + P + len(qcol)
    c = np.zeros(nvar)
    lost_max = 0
    p_lost = np.zeros(P)
    if secondary:
        pre_idx = {j: i for i, (j, _, _) in enumerate(pre_jobs)}
        for j in jobs:
            gj = inst.g.get(j, 1)
            a = sum(k for _, k in on[j])
            lost_max += gj * a
            pi = pre_idx.get(j)
            if pi is not None and pi not in qcol:
                p_lost[pi] = gj * a
                continue
            for r, k in on[j]:
                c[r] += gj * k
            if pi is not None:
                c[qcol[pi]] = gj
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []

    def add_row(coefs: list[tuple[int, float]], lb: float, ub: float) -> None:
        r = len(lo)
        for col, v in coefs:
            rows.append(r)
            cols.append(col)
            vals.append(v)
        lo.append(lb)
        hi.append(ub)

    add_row([(r, 1.0) for r in range(L)], n, n)
    # Dominance (symmetry breaking): when server s holds no more workers of any job than t
    # (componentwise), returning s instead of t never adds a preemption nor a lost GPU, so some
    # optimum returns s whenever it returns t: x_t <= x_s. Equal servers are ordered by id.
    comp = [inst.srv_jobs.get(s, {}) for s in servers]
    for r1 in range(L):
        c1 = comp[r1]
        for r2 in range(L):
            if r1 == r2:
                continue
            c2 = comp[r2]
            if len(c1) > len(c2) or (c1 == c2 and r1 > r2):
                continue
            if all(c2.get(j, 0) >= k for j, k in c1.items()):
                add_row([(r2, 1.0), (r1, -1.0)], -np.inf, 0.0)  # x_t - x_s <= 0 (s=r1, t=r2)
    for i, (j, a, slack) in enumerate(pre_jobs):
        pc = L + i
        weak = False
        for r, k in on[j]:
            if k > slack:
                add_row([(r, 1.0), (pc, -1.0)], -np.inf, 0.0)
            else:
                weak = True
        if weak:
            add_row([(r, float(k)) for r, k in on[j]] + [(pc, -float(a - slack))], -np.inf, slack)
        if i in qcol:
            add_row(
                [(r, -float(k)) for r, k in on[j]] + [(pc, float(a)), (qcol[i], -1.0)],
                -np.inf,
                0.0,
            )
    integrality = np.zeros(nvar)
    integrality[: L + P] = 1
    ub = np.ones(nvar)
    ub[L + P :] = np.inf
    bounds = Bounds(np.zeros(nvar), ub)
    tic = time.perf_counter()

    def solve(cost: np.ndarray) -> np.ndarray:
        options: dict[str, float | bool] = {"mip_rel_gap": 0.0, "disp": False}
        if time_limit is not None:
            options["time_limit"] = max(float(time_limit) - (time.perf_counter() - tic), 0.01)
        A = coo_array((vals, (rows, cols)), shape=(len(lo), nvar)).tocsr()
        res = milp(
            cost,
            constraints=LinearConstraint(A, np.array(lo), np.array(hi)),
            integrality=integrality,
            bounds=bounds,
            options=options,
        )
        if res.status != 0 or res.x is None:
            raise RuntimeError(
                f"HiGHS did not prove an optimal reclaim of {n} of {L} servers: {res.message}"
            )
        return np.asarray(res.x)

    c[L : L + P] = float(lost_max + 1) + p_lost if secondary else 1.0
    res_x = solve(c)
    pick = [servers[r] for r in range(L) if res_x[r] > 0.5]
    if len(pick) != n:  # pragma: no cover - guarded by the equality row
        raise RuntimeError(f"HiGHS returned {len(pick)} servers instead of {n}")
    return idle + pick


def reclaim_lost_gpus(inst: ReclaimInstance, servers: Iterable[int]) -> int:
    """GPUs training loses if ``servers`` are returned: scaled-in workers of surviving jobs plus
    the whole loaned allocation of preempted jobs (the optimum's secondary objective)."""
    removed: dict[int, int] = {}
    for s in servers:
        for j, k in inst.srv_jobs.get(int(s), {}).items():
            removed[j] = removed.get(j, 0) + k
    lost = 0
    for j, r in removed.items():
        if _preempted(inst, j, r):
            r = sum(inst.srv_jobs.get(s, {}).get(j, 0) for s in inst.loaned)
        lost += r * inst.g.get(j, 1)
    return lost


def _check_n(inst: ReclaimInstance, n: int) -> int:
    n = int(n)
    if n < 0 or n > len(inst.loaned):
        raise ValueError(f"cannot reclaim {n} of {len(inst.loaned)} loaned servers")
    return n


# ------------------------------------------------------------------------------------------------
# ClusterView adapters
# ------------------------------------------------------------------------------------------------
def aryl_reclaim_view(view: ClusterView, n: int) -> list[int]:
    return aryl_reclaim(instance_from_view(view), n)


def optimal_reclaim_view(view: ClusterView, n: int) -> list[int]:
    """The exact optimal reclaim on the live state (:func:`milp_reclaim`), at every size."""
    return milp_reclaim(instance_from_view(view), n)


def default_reclaim_view(view: ClusterView, n: int) -> list[int]:
    """The simulator's own default rule (:func:`aryl_gym.sim.engine.default_reclaim`)."""

    return default_reclaim(view, n)


RECLAIM_RULES = {
    "aryl": aryl_reclaim,
    "optimal": milp_reclaim,
    "exhaustive": optimal_reclaim,
    "default": default_reclaim_instance,
}


# ------------------------------------------------------------------------------------------------
# random instances for the study and tests
# ------------------------------------------------------------------------------------------------
def random_instance(
    rng: np.random.Generator,
    n_servers: int,
    gpus_per_server: int = 8,
    elastic_p: float = 0.5,
    fill: float = 0.8,
    group_flexible: bool = True,
) -> ReclaimInstance:
    """A random loaned-server state: jobs of 1-8 GPUs per worker, some elastic, some with
    workers on training servers too; elastic jobs' flexible workers on servers apart from their
    base when ``group_flexible`` (paper 5.3). Built by filling servers to about ``fill``."""
    free = {s: gpus_per_server for s in range(n_servers)}
    inst = ReclaimInstance(
        loaned=list(range(n_servers)),
        srv_jobs={s: {} for s in free},
        srv_flex={s: {} for s in free},
    )
    target = fill * gpus_per_server * n_servers
    used = 0
    j = 0
    tries = 0
    while used < target and tries < 50 * n_servers:
        tries += 1
        g = int(rng.choice([1, 1, 2, 4, 8]))
        g = min(g, gpus_per_server)
        elastic = bool(rng.random() < elastic_p)
        w = int(rng.integers(1, 5))
        w_min = int(rng.integers(1, w + 1)) if elastic else w
        elsewhere = int(rng.integers(0, w_min + 1)) if rng.random() < 0.3 else 0
        # base workers beyond `elsewhere` and all flexible workers go on loaned servers
        n_base = w_min - min(elsewhere, w_min)
        placed: dict[int, int] = {}
        flex: dict[int, int] = {}
        ok = True
        for _ in range(n_base):
            room = [s for s in free if free[s] >= g]
            if not room:
                ok = False
                break
            s = int(rng.choice(room))
            free[s] -= g
            placed[s] = placed.get(s, 0) + 1
        for _ in range(w - w_min):
            room = [s for s in free if free[s] >= g and not (group_flexible and s in placed)]
            if not room:
                ok = False
                break
            s = int(rng.choice(room))
            free[s] -= g
            flex[s] = flex.get(s, 0) + 1
        if not ok or not (placed or flex):
            for s, k in placed.items():
                free[s] += k * g
            for s, k in flex.items():
                free[s] += k * g
            continue
        total_loaned = sum(placed.values()) + sum(flex.values())
        for s in set(placed) | set(flex):
            inst.srv_jobs[s][j] = placed.get(s, 0) + flex.get(s, 0)
            if flex.get(s):
                inst.srv_flex[s][j] = flex[s]
        inst.workers[j] = w_min - n_base + total_loaned
        inst.w_min[j] = w_min
        inst.elastic[j] = elastic
        inst.g[j] = g
        inst.time_one[j] = float(rng.uniform(1e3, 1e5))
        used += total_loaned * g
        j += 1
    return inst


def overlap(a: Sequence[int], b: Sequence[int]) -> float:
    """|a & b| / |a| (1.0 for two empty choices)."""
    if not a:
        return 1.0
    return len(set(a) & set(b)) / len(a)


__all__ = [
    "RECLAIM_RULES",
    "ReclaimInstance",
    "aryl_reclaim",
    "aryl_reclaim_view",
    "default_reclaim_instance",
    "default_reclaim_view",
    "instance_from_view",
    "milp_reclaim",
    "optimal_reclaim",
    "optimal_reclaim_view",
    "overlap",
    "random_instance",
    "reclaim_lost_gpus",
    "reclaim_preemptions",
]
