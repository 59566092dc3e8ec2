"""Training the learned reclaim agent (``aryl-gym train-reclaim``): imitation of the exact
optimum with DAgger.

The agent (:class:`aryl_gym.agents.reclaim_learned.ReclaimSetAgent`) picks the ``n`` servers of
a reclaim event one at a time. Its teacher knows the best answer of every state: after any picks
the rest of the event is again a reclaim problem (the live jobs with the workers they have left,
the servers not taken), which :func:`~aryl_gym.agents.reclaim.milp_reclaim` solves exactly. The
servers of that optimal completion are all optimal next picks (order does not matter), so the
loss of a state is the cross-entropy of the masked softmax toward that *set*:
``-log sum_{s in S*} p(s)``.

* **Round 0** plays the teacher (a random member of ``S*`` each step) on every training event.
* **Rounds 1..** (DAgger, Ross et al. 2011) play the current student's argmax, so the states are
  the ones the deployed agent meets, each labelled by the teacher. The optimum is solved again
  only when the student leaves the current optimal set; when that new solve shows the student's
  pick was optimal too (same total), the pick joins that state's label set.
* After each round the network trains for ``epochs`` passes over all states so far (the last
  round: ``final_epochs``), and is scored on the **validation** events; the round with the lowest
  validation gap is the one written (selection on validation events only).

Events: reclaim events of World v2 episodes under Aryl (``scenarios``: by default basic seeds
100-119 and production seeds 100-103; those of the ``reclaim`` leaderboard suite are basic 0-2
and production 0) and synthetic states (600 of 20-200 loaned servers from seed 1; the
suite's are seed 0). Validation: basic 300-302, production 300, 80 synthetic from seed 5000.
Trivial events (at least ``n`` idle loaned servers) are left out, as in the suite.

torch is imported here (the ``train`` extra); the shipped agent runs on numpy alone.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import platform
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.agents.reclaim import (
    ReclaimInstance,
    aryl_reclaim,
    milp_reclaim,
    reclaim_preemptions,
)
from aryl_gym.agents.reclaim_learned import V0_COLUMNS, ReclaimSetAgent, save_weights
from aryl_gym.config import ConfigError, list_scenarios, load_scenario
from aryl_gym.progress import progress_bar
from aryl_gym.provenance import config_hash, git_commit
from aryl_gym.reclaim_features import (
    CONTEXT_FEATURES_V1,
    SERVER_FEATURES_V1,
    ReclaimState,
)
from aryl_gym.reclaim_snapshots import (
    Snapshot,
    load_snapshots,
    record_snapshots,
    save_snapshots,
    synthetic_snapshots,
)

#: the suite's events (never trained on): scenario -> seeds, and the synthetic seed
SUITE_SEEDS: dict[str, tuple[int, ...]] = {"basic": (0, 1, 2), "production": (0,)}


def suite_scenario(sc: str) -> str | None:
    """The suite scenario (a key of :data:`SUITE_SEEDS`) that ``sc`` (a name or a YAML path) is:
    the same name, or the same configuration under another name or path (was: a path to
    basic.yaml passed the held-out check). None for any other scenario, or one that does not load
    (its own error comes when its events are recorded)."""
    if sc in SUITE_SEEDS:
        return sc
    try:
        cfg = load_scenario(sc)
    except (ConfigError, OSError):
        return None
    for name in SUITE_SEEDS:
        ref = load_scenario(name)
        if cfg.name == name or dataclasses.replace(cfg, name=ref.name, description=ref.description,
                                                   source=ref.source) == ref:
            return name
    return None
SUITE_SYNTHETIC_SEED = 0
#: size bins of the report (loaned servers): the issue's target splits at 60
BIG = 60


@dataclass(frozen=True)
class ReclaimTrainConfig:
    """What ``aryl-gym train-reclaim`` trains with (module docstring); every field is an option
    of the command."""

    seed: int = 0
    synthetic: int = 600
    synthetic_seed: int = 1
    synthetic_servers: tuple[int, int] = (20, 200)
    elastic: float = 0.5
    scenarios: tuple[tuple[str, tuple[int, ...]], ...] = (
        ("basic", tuple(range(100, 120))),
        ("production", tuple(range(100, 104))),
    )
    val_synthetic: int = 80
    val_synthetic_seed: int = 5000
    val_scenarios: tuple[tuple[str, tuple[int, ...]], ...] = (
        ("basic", (300, 301, 302)),
        ("production", (300,)),
    )
    rounds: int = 6
    epochs: int = 4
    final_epochs: int = 8
    hidden: int = 64
    lr: float = 1e-3
    batch: int = 64
    states_per_event: int = 12
    milp_time_limit: float = 120.0
    threads: int = 1

    def check(self) -> ReclaimTrainConfig:
        """Raise ValueError naming the first bad field."""
        ints = {
            "synthetic": (self.synthetic, 0), "val_synthetic": (self.val_synthetic, 0),
            "rounds": (self.rounds, 1), "epochs": (self.epochs, 1), "final_epochs": (self.final_epochs, 1),
            "hidden": (self.hidden, 1), "batch": (self.batch, 1), "states_per_event": (self.states_per_event, 1),
            "threads": (self.threads, 1), "seed": (self.seed, 0), "synthetic_seed": (self.synthetic_seed, 0),
            "val_synthetic_seed": (self.val_synthetic_seed, 0),
        }
        for name, (v, lo) in ints.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        lo_s, hi_s = self.synthetic_servers
        if not 2 <= lo_s <= hi_s <= 400:
            raise ValueError(f"synthetic servers must be MIN-MAX with 2 <= MIN <= MAX <= 400, got {lo_s}-{hi_s}")
        if not 0.0 <= self.elastic <= 1.0:
            raise ValueError(f"elastic must be a share in [0, 1], got {self.elastic}")
        if not (self.lr > 0 and np.isfinite(self.lr)):
            raise ValueError(f"lr must be a number > 0, got {self.lr}")
        if not (self.milp_time_limit > 0):
            raise ValueError(f"milp_time_limit must be > 0 seconds, got {self.milp_time_limit}")
        if self.synthetic == 0 and not any(seeds for _, seeds in self.scenarios):
            raise ValueError("no training events: give synthetic > 0 or scenario seeds")
        for sc, seeds in self.scenarios:
            clash = sorted(set(seeds) & set(SUITE_SEEDS.get(suite_scenario(sc) or sc, ())))
            if clash:
                raise ValueError(
                    f"{sc} seed(s) {clash} are the reclaim suite's evaluation events; train on other "
                    "seeds (e.g. 100 and up)"
                )
        if self.synthetic and self.synthetic_seed == SUITE_SYNTHETIC_SEED:
            raise ValueError(
                f"synthetic seed {SUITE_SYNTHETIC_SEED} draws the reclaim suite's synthetic events; use another"
            )
        if self.val_synthetic == 0 and not any(seeds for _, seeds in self.val_scenarios):
            # was: accepted; every round's validation gap was NaN, so round 0 (the teacher's states
            # only) was written as the selected agent whatever the later rounds learned
            raise ValueError("no validation events: the round written is chosen on them; give val_synthetic > 0 "
                             "(--val-synthetic) or validation scenario seeds (--val-events)")
        if self.val_synthetic and self.val_synthetic_seed in (SUITE_SYNTHETIC_SEED, self.synthetic_seed):
            raise ValueError("the validation synthetic seed must differ from the training and suite seeds")
        for sc, seeds in self.val_scenarios:
            train = dict(self.scenarios).get(sc, ())
            clash = sorted(set(seeds) & (set(train) | set(SUITE_SEEDS.get(suite_scenario(sc) or sc, ()))))
            if clash:
                raise ValueError(f"validation {sc} seed(s) {clash} are also training or suite seeds")
        return self


# ------------------------------------------------------------------------------------------------
# events
# ------------------------------------------------------------------------------------------------
def _nontrivial(snaps: Sequence[Snapshot]) -> list[Snapshot]:
    out = []
    for sn in snaps:
        idle = sum(1 for s in sn.inst.loaned if not sn.inst.srv_jobs.get(s))
        if sn.n > 0 and idle < sn.n:
            out.append(sn)
    return out


def _cache_stem(sc: str) -> str:
    """A scenario's name in the event cache: a shipped scenario's own (the suite's layout), a YAML
    path's stem with the hash of its configuration (was: the stem alone, so another file of the
    same stem read this one's events)."""
    if sc in list_scenarios():
        return sc
    return f"{Path(sc).stem}-{config_hash(load_scenario(sc))[:8]}"


def build_events(
    scenarios: Sequence[tuple[str, Sequence[int]]],
    synthetic: int,
    synthetic_seed: int,
    servers: tuple[int, int],
    elastic: float,
    cache_dir: Path | None = None,
    data_root: str | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Snapshot]:
    """The non-trivial reclaim events of the scenarios' episodes (recorded under Aryl, cached in
    ``cache_dir`` as ``SCENARIO-seedN.npz``, the suite's layout) and ``synthetic`` random ones."""
    out: list[Snapshot] = []
    for sc, seeds in scenarios:
        for seed in seeds:
            cache = cache_dir / f"{_cache_stem(sc)}-seed{seed}.npz" if cache_dir is not None else None
            if cache is not None and cache.is_file():
                snaps = load_snapshots(cache)
            else:
                if log:
                    log(f"recording the reclaim events of {sc} seed {seed} under Aryl")
                snaps = record_snapshots(sc, [seed], data_root=data_root)
                if cache is not None:
                    save_snapshots(cache, snaps)
            out.extend(_nontrivial(snaps))
    if synthetic:
        out.extend(_nontrivial(synthetic_snapshots(synthetic, servers[0], servers[1], synthetic_seed, elastic)))
    return out


# ------------------------------------------------------------------------------------------------
# the teacher
# ------------------------------------------------------------------------------------------------
def residual_instance(state: ReclaimState) -> ReclaimInstance:
    """The rest of the event after ``state``'s picks: the servers not taken, the live jobs with
    the workers they have left (preempted jobs are gone: their servers cost nothing more)."""
    inst = state.inst
    dead = {state.jobs[c] for c in np.flatnonzero(state.dead)}
    removed = {state.jobs[c]: int(state.removed[c]) for c in range(state.J)}
    loaned = [state.servers[i] for i in np.flatnonzero(~state.picked)]
    srv_jobs = {s: {j: k for j, k in inst.srv_jobs.get(s, {}).items() if j not in dead} for s in loaned}
    jobs = {j for s in loaned for j in srv_jobs[s]}
    return ReclaimInstance(
        loaned=loaned,
        srv_jobs=srv_jobs,
        workers={j: inst.workers[j] - removed[j] for j in jobs},
        w_min={j: inst.w_min[j] for j in jobs},
        elastic={j: bool(inst.elastic.get(j, False)) for j in jobs},
        g={j: inst.g.get(j, 1) for j in jobs},
    )


def optimal_completion(state: ReclaimState, time_limit: float | None = None) -> tuple[set[int], int]:
    """The slots of an optimal completion of ``state`` (the exact optimum of the rest) and the
    event's total preemptions with it."""
    res = residual_instance(state)
    pick = milp_reclaim(res, state.to_pick, time_limit=time_limit)
    slot = {s: i for i, s in enumerate(state.servers)}
    return {slot[s] for s in pick}, state.preempted + reclaim_preemptions(res, pick)


# ------------------------------------------------------------------------------------------------
# the network (torch) and its numpy twin
# ------------------------------------------------------------------------------------------------
def n_features() -> int:
    return len(V0_COLUMNS) + len(SERVER_FEATURES_V1) + len(CONTEXT_FEATURES_V1)


def make_model(hidden: int) -> Any:
    """The torch scorer, the same function as :meth:`ReclaimSetAgent.scores` over a padded batch."""
    # torch: the train extra (the module imports without it)
    import torch as th
    from torch import nn

    class SetScorer(nn.Module):
        def __init__(self, f: int, h: int):
            super().__init__()
            self.l1 = nn.Linear(f, h)
            self.l2 = nn.Linear(3 * h, h)
            self.l3 = nn.Linear(h, 1)

        def forward(self, x: th.Tensor, m: th.Tensor) -> th.Tensor:  # (B, L, F), (B, L) bool
            h = th.relu(self.l1(x))
            mf = m.unsqueeze(-1).to(h.dtype)
            mean = (h * mf).sum(1) / mf.sum(1).clamp(min=1.0)
            mx = h.masked_fill(~m.unsqueeze(-1), -1e9).max(1).values
            pooled = th.cat([mean, mx], -1).unsqueeze(1).expand(-1, h.shape[1], -1)
            h2 = th.relu(self.l2(th.cat([h, pooled], -1)))
            return self.l3(h2).squeeze(-1)

        def numpy_weights(self) -> dict[str, np.ndarray]:
            return {
                "W1": self.l1.weight.detach().numpy().T.copy(),
                "b1": self.l1.bias.detach().numpy().copy(),
                "W2": self.l2.weight.detach().numpy().T.copy(),
                "b2": self.l2.bias.detach().numpy().copy(),
                "w3": self.l3.weight.detach().numpy()[0].copy(),
                "b3": self.l3.bias.detach().numpy().copy(),
            }

    return SetScorer(n_features(), hidden)


def state_inputs(state: ReclaimState) -> tuple[np.ndarray, np.ndarray]:
    """(candidate slots, network input rows) of a state, as the env's ``observation="v1"``
    gives them to the agent."""
    rows = np.flatnonzero(~state.picked)
    v1, ctx = state.features_v1()
    return rows, ReclaimSetAgent.inputs(state.features_v0(), v1, ctx, rows)


def play_state(agent: ReclaimSetAgent, snap: Snapshot) -> ReclaimState:
    """``agent``'s argmax picks on ``snap`` without an env (the same picks as through one)."""
    st = ReclaimState.from_snapshot(snap)
    while not st.done:
        rows, x = state_inputs(st)
        st.pick(int(rows[int(np.argmax(agent.scores(x)))]) if len(rows) > 1 else int(rows[0]))
    return st


# ------------------------------------------------------------------------------------------------
# data collection and fitting
# ------------------------------------------------------------------------------------------------
@dataclass
class Sample:
    x: np.ndarray  # (m, F) candidate rows
    labels: list[int]  # optimal next picks, as row indices of x


def collect(
    snap: Snapshot,
    student: ReclaimSetAgent | None,
    rng: np.random.Generator,
    keep: int,
    time_limit: float | None,
) -> tuple[list[Sample], dict[str, int]]:
    """One event played by the teacher (``student=None``) or the student's argmax, every
    non-forced state labelled with the teacher's optimal next picks; at most ``keep`` states
    (drawn with ``rng``) are returned."""
    st = ReclaimState.from_snapshot(snap)
    opt, total = optimal_completion(st, time_limit)
    stats = {"solves": 1, "steps": 0, "agree": 0, "relabelled": 0}
    samples: list[Sample] = []
    while not st.done:
        rows, x = state_inputs(st)
        if len(rows) <= st.to_pick:  # forced: every candidate goes
            st.pick(int(rows[0]))
            opt.discard(int(rows[0]))
            continue
        labels = [i for i, r in enumerate(rows) if int(r) in opt]
        samples.append(Sample(x, labels))
        if student is None:
            a = int(rng.choice(sorted(opt)))
        else:
            a = int(rows[int(np.argmax(student.scores(x)))])
        stats["steps"] += 1
        if a in opt:
            stats["agree"] += 1
            opt.discard(a)
            st.pick(a)
            continue
        st.pick(a)
        opt, new_total = optimal_completion(st, time_limit)
        stats["solves"] += 1
        if new_total <= total:  # the student's pick was optimal as well
            samples[-1].labels.append(int(np.flatnonzero(rows == a)[0]))
            stats["relabelled"] += 1
        total = new_total
    if len(samples) > keep:
        idx = rng.choice(len(samples), size=keep, replace=False)
        samples = [samples[i] for i in sorted(idx)]
    return samples, stats


def fit(model: Any, data: Sequence[Sample], epochs: int, rng: np.random.Generator, lr: float,
        batch: int, opt: Any = None) -> tuple[float, Any]:
    """``epochs`` passes of the set cross-entropy over ``data`` (padded batches); returns the
    last pass's mean loss and the optimiser (kept across rounds)."""
    # torch: the train extra (the module imports without it)
    import torch as th

    if opt is None:
        opt = th.optim.Adam(model.parameters(), lr=lr)
    f = n_features()
    last = float("nan")
    for _ in range(epochs):
        order = rng.permutation(len(data))
        tot, nb = 0.0, 0
        for k in range(0, len(order), batch):
            idx = order[k : k + batch]
            width = max(len(data[i].x) for i in idx)
            x = np.zeros((len(idx), width, f), dtype=np.float32)
            m = np.zeros((len(idx), width), dtype=bool)
            y = np.zeros((len(idx), width), dtype=bool)
            for r, i in enumerate(idx):
                s = data[i]
                x[r, : len(s.x)] = s.x
                m[r, : len(s.x)] = True
                y[r, s.labels] = True
            xt, mt, yt = th.from_numpy(x), th.from_numpy(m), th.from_numpy(y)
            scores = model(xt, mt)
            loss = (th.logsumexp(scores.masked_fill(~mt, -1e9), 1)
                    - th.logsumexp(scores.masked_fill(~yt, -1e9), 1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            tot += float(loss.item())
            nb += 1
        last = tot / max(nb, 1)
    return last, opt


# ------------------------------------------------------------------------------------------------
# evaluation
# ------------------------------------------------------------------------------------------------
@dataclass
class Reference:
    optimum: int
    aryl: int


def references(snaps: Sequence[Snapshot], time_limit: float | None = None) -> list[Reference]:
    return [
        Reference(
            reclaim_preemptions(sn.inst, milp_reclaim(sn.inst, sn.n, time_limit=time_limit)),
            reclaim_preemptions(sn.inst, aryl_reclaim(sn.inst, sn.n)),
        )
        for sn in snaps
    ]


def gap_table(snaps: Sequence[Snapshot], refs: Sequence[Reference], picks: Sequence[int]) -> dict[str, Any]:
    """Gaps to the optimum (total preemptions / the optimum's - 1) of the agent (``picks``: its
    preemptions per event) and of Aryl's rule, overall and below / from :data:`BIG` servers."""
    out: dict[str, Any] = {}
    for name, sel in (("all", lambda s: True), (f"<{BIG}", lambda s: s.servers < BIG),
                      (f">={BIG}", lambda s: s.servers >= BIG)):
        idx = [i for i, sn in enumerate(snaps) if sel(sn)]
        opt = sum(refs[i].optimum for i in idx)
        agent = sum(picks[i] for i in idx)
        aryl = sum(refs[i].aryl for i in idx)
        out[name] = {
            "events": len(idx),
            "optimum": opt,
            "agent": agent,
            "aryl": aryl,
            "agent_gap": _gap(agent, opt, len(idx)),
            "aryl_gap": _gap(aryl, opt, len(idx)),
        }
    return out


def _gap(total: int, opt: int, events: int) -> float:
    """``total / opt - 1``; where the optimum preempts nothing, 0 for no preemption and inf for
    any (was 0: a policy preempting where none was needed read as perfect); NaN without events."""
    if events == 0:
        return math.nan
    if opt == 0:
        return 0.0 if total == 0 else math.inf
    return total / opt - 1


def _pct(x: float) -> str:
    """A gap for the training log: '+12.3%', '+inf%', or '-' (no events)."""
    return "-" if math.isnan(x) else f"{100 * x:+.1f}%"


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    out_dir: Path
    weights: Path
    best_round: int
    curve: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def train_reclaim_agent(
    cfg: ReclaimTrainConfig,
    out_dir: str | Path,
    cache_dir: str | Path | None = None,
    data_root: str | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    plot: bool = True,
) -> TrainResult:
    """Train (module docstring); writes ``OUT/reclaim-agent.npz`` (the selected round),
    ``OUT/curve.csv``, ``OUT/config.json`` and, with matplotlib and ``plot``, ``OUT/curve.png``."""
    # torch: the train extra (the module imports without it)
    import torch as th

    cfg.check()
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    wall0, cpu0 = time.perf_counter(), _cpu_s()
    commit = git_commit(dirty=True)  # the code the run starts from
    th.set_num_threads(cfg.threads)
    th.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir is not None else out / "snapshots"
    train_ev = build_events(cfg.scenarios, cfg.synthetic, cfg.synthetic_seed, cfg.synthetic_servers,
                            cfg.elastic, cache, data_root, say)
    val_ev = build_events(cfg.val_scenarios, cfg.val_synthetic, cfg.val_synthetic_seed,
                          cfg.synthetic_servers, cfg.elastic, cache, data_root, say)
    if not train_ev:
        raise ValueError("no non-trivial training events: add synthetic events or scenario seeds")
    if not val_ev:  # all trivial: no gap to select a round on (was: round 0 written, gap NaN)
        raise ValueError("no non-trivial validation events: add validation synthetic events or scenario seeds")
    say(f"{len(train_ev)} training events, {len(val_ev)} validation events")
    val_refs = references(val_ev, cfg.milp_time_limit)
    model = make_model(cfg.hidden)
    data: list[Sample] = []
    opt = None
    curve: list[dict[str, Any]] = []
    best: tuple[float, int] | None = None
    best_table: dict[str, Any] = {}
    best_weights: dict[str, np.ndarray] | None = None
    meta_base = {
        "name": "reclaim",
        "features": {
            "servers": ["busy", "base", "flex", "jobs", "preempt_cost", "flex_only"],
            "servers_v1": list(SERVER_FEATURES_V1),
            "reclaim_v1": list(CONTEXT_FEATURES_V1),
        },
        "env_kwargs": dict(ReclaimSetAgent.reclaim_env_kwargs),
        "config": _config_record(cfg),
    }
    for rnd in range(cfg.rounds):
        t0 = time.perf_counter()
        student = None if rnd == 0 else ReclaimSetAgent(model.numpy_weights())
        bar = progress_bar(len(train_ev), f"round {rnd} ({'teacher' if rnd == 0 else 'DAgger'})",
                           unit="event", enabled=progress)
        tot = {"solves": 0, "steps": 0, "agree": 0, "relabelled": 0, "skipped": 0}
        for i in rng.permutation(len(train_ev)):  # mixed sizes: a steady pace for the progress bar
            try:
                samples, st = collect(train_ev[i], student, rng, cfg.states_per_event, cfg.milp_time_limit)
            except RuntimeError as exc:  # HiGHS did not prove an optimum within the time limit
                say(f"skipped training event {train_ev[i].source} ({train_ev[i].servers} servers): {exc}")
                tot["skipped"] += 1
                continue
            data.extend(samples)
            for k in st:
                tot[k] += st[k]
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        t1 = time.perf_counter()
        epochs = cfg.final_epochs if rnd == cfg.rounds - 1 else cfg.epochs
        model.train()
        loss, opt = fit(model, data, epochs, rng, cfg.lr, cfg.batch, opt)
        t2 = time.perf_counter()
        agent = ReclaimSetAgent(model.numpy_weights())
        pre = [play_state(agent, sn).preempted for sn in val_ev]
        table = gap_table(val_ev, val_refs, pre)
        row = {
            "round": rnd,
            "states": len(data),
            "solves": tot["solves"],
            "student_agree": tot["agree"] / tot["steps"] if (student is not None and tot["steps"]) else float("nan"),
            "relabelled": tot["relabelled"],
            "skipped": tot["skipped"],
            "loss": loss,
            "val_gap": table["all"]["agent_gap"],
            f"val_gap_lt{BIG}": table[f"<{BIG}"]["agent_gap"],
            f"val_gap_ge{BIG}": table[f">={BIG}"]["agent_gap"],
            "val_aryl_gap": table["all"]["aryl_gap"],
            "collect_s": t1 - t0,
            "fit_s": t2 - t1,
            "wall_s": time.perf_counter() - wall0,
        }
        curve.append(row)
        say(
            f"round {rnd}: {len(data)} states, loss {loss:.3f}, validation gap {_pct(row['val_gap'])} "
            f"(<{BIG}: {_pct(row[f'val_gap_lt{BIG}'])}, >={BIG}: {_pct(row[f'val_gap_ge{BIG}'])}; "
            f"Aryl {_pct(row['val_aryl_gap'])}), {row['collect_s']:.0f} s collecting, {row['fit_s']:.0f} s fitting"
        )
        key = (row["val_gap"], -rnd)
        if best is None or key < (best[0], -best[1]):
            best = (row["val_gap"], rnd)
            best_weights = model.numpy_weights()
            best_table = table
    assert best is not None and best_weights is not None
    wall, cpu = time.perf_counter() - wall0, _cpu_s() - cpu0
    meta = {
        **meta_base,
        "selected_round": best[1],
        "validation": best_table,
        "curve": curve,
        "train_wall_s": wall,
        "train_cpu_s": cpu,
        "events": {"train": len(train_ev), "validation": len(val_ev)},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "torch": th.__version__},
        "commit": commit,
    }
    weights = save_weights(out / "reclaim-agent.npz", best_weights, meta)
    _write_curve(out, curve, plot)
    (out / "config.json").write_text(json.dumps(meta["config"], indent=1) + "\n")
    say(f"selected round {best[1]} (validation gap {_pct(best[0])}); wrote {weights}")
    return TrainResult(out, weights, best[1], curve, wall, cpu)


def _config_record(cfg: ReclaimTrainConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["scenarios"] = {sc: list(seeds) for sc, seeds in cfg.scenarios}
    d["val_scenarios"] = {sc: list(seeds) for sc, seeds in cfg.val_scenarios}
    d["synthetic_servers"] = list(cfg.synthetic_servers)
    return d


def _write_curve(out: Path, curve: Sequence[dict[str, Any]], plot: bool = True) -> None:
    if not curve:
        return
    with open(out / "curve.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(curve[0]))
        w.writeheader()
        w.writerows(curve)
    if not plot:
        return
    try:
        # matplotlib: the plots extra, optional
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # after the backend is chosen
    except ImportError:  # the plots extra is missing: the CSV is enough
        return
    r = [c["round"] for c in curve]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot(r, [100 * c["val_gap"] for c in curve], "o-", label="agent, all")
    ax.plot(r, [100 * c[f"val_gap_ge{BIG}"] for c in curve], "s--", label=f"agent, >= {BIG} servers")
    ax.axhline(100 * curve[0]["val_aryl_gap"], color="grey", ls=":", label="Aryl's rule, all")
    ax.set_xlabel("round (0: teacher's states; then DAgger)")
    ax.set_ylabel("validation gap to the optimum (%)")
    ax.set_xticks(r)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)
    plt.close(fig)


__all__ = [
    "ReclaimTrainConfig",
    "TrainResult",
    "build_events",
    "collect",
    "fit",
    "gap_table",
    "make_model",
    "optimal_completion",
    "play_state",
    "residual_instance",
    "train_reclaim_agent",
]
