"""TensorBoard callbacks for training on aryl-gym (SPEC 7).

* :class:`ClusterMetricsCallback`: scheduling figures of every finished training episode, read
  from the final ``info``'s :class:`~aryl_gym.metrics.EpisodeResult`, logged under ``cluster/``
  (means over the episodes that ended since the last dump), besides SB3's own ``rollout/`` and
  ``train/`` tags.
* :class:`ArylEvalCallback`: every ``freq`` environment steps, the agent plays the fixed held-out
  seeds (all at once, one batched forward pass per step) with action masks (like sb3-contrib's ``MaskableEvalCallback``); its figures go under
  ``eval/`` next to the reference heuristics' figures on the same seeds (``eval/aryl_avg_jct``,
  ``eval/fifo_avg_jct``, ...), computed once natively, so the gap to Aryl is a curve. The curve is
  also written to ``eval.csv`` in the run folder.
* :class:`HParamsTextCallback`: the resolved configuration as a Markdown table under the text tag
  ``hyperparameters`` (CleanRL style).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback
from torch import nn

from aryl_gym.metrics import EpisodeResult
from aryl_gym.train.evaluation import (
    CLUSTER_TAGS,
    eval_row,
    invalid_from_info,
    is_new_best,
    mean_metrics,
    result_from_info,
    run_agent_batch,
    run_reference,
)


def _finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


class ClusterMetricsCallback(BaseCallback):
    """Log the scheduling metrics of finished training episodes under ``cluster/``."""

    def __init__(self, verbose: int = 0):
        super().__init__(verbose)
        self.episodes = 0
        self.thrashing = 0
        self.last_results: list[EpisodeResult] = []

    def _on_step(self) -> bool:
        infos: Sequence[Mapping[str, Any]] = self.locals.get("infos", ())
        dones = self.locals.get("dones", ())
        for done, info in zip(dones, infos):
            if not done:
                continue
            res = result_from_info(info)
            if res is None:
                continue
            self.episodes += 1
            self.last_results = (self.last_results + [res])[-16:]
            for field, tag in CLUSTER_TAGS.items():
                v = getattr(res, field)
                if _finite(v):
                    self.logger.record_mean(f"cluster/{tag}", float(v))
            inv = invalid_from_info(info)
            if inv is None:
                inv = float(res.invalid_decisions)
            self.logger.record_mean("cluster/invalid_actions", inv)
            self.logger.record_mean("cluster/jobs_completed_frac", res.jobs_completed / max(res.jobs_total, 1))
            self.thrashing += int(res.thrashing)
            self.logger.record("cluster/thrashing_episodes", self.thrashing)  # ended by the thrash rule, so far
            self.logger.record("cluster/episodes", self.episodes)
        return True


class ArylEvalCallback(BaseCallback):
    """Periodic masked evaluation on fixed seeds, logged with the references' figures.

    Args:
        make_env: builds a fresh single (non-vector) evaluation env.
        scenario: the scenario (name, path or config) the references run on natively.
        seeds: held-out evaluation seeds (``reset(seed=s)`` = ``make_episode(scenario, s)``).
        references: reference policy names run natively once on the same seeds.
        freq: environment steps (summed over the vector envs) between evaluations.
        run_dir: where ``eval.csv`` and ``best_model.zip`` go (``None``: nowhere).
        fast: act through :func:`aryl_gym.train.fast.fast_predictor` (same actions as
            ``model.predict``, fewer Python hops).
        extra: more evaluation sets, each ``(label, make_env, scenario, seeds)`` (a training
            config's ``eval.scenarios``). Each set's figures go under ``eval/LABEL/`` and into
            ``eval.csv`` as ``LABEL_...`` columns; the best model is then the one with the lowest
            ``score``, the geometric mean over all sets (the main one included) of the agent's
            mean average JCT over the first reference's on the same seeds, with every job of
            every episode finished. Without extra sets the best is the lowest ``avg_jct``.
    """

    def __init__(
        self,
        make_env: Callable[[], Any],
        scenario: Any,
        seeds: Sequence[int],
        references: Sequence[str] = ("aryl", "baseline"),
        freq: int = 20_000,
        deterministic: bool = True,
        run_dir: str | Path | None = None,
        save_best: bool = True,
        data_root: str | None = None,
        eval_at_start: bool = True,
        verbose: int = 0,
        fast: bool = True,
        extra: Sequence[tuple[str, Callable[[], Any], Any, Sequence[int]]] = (),
    ):
        super().__init__(verbose)
        self.fast = fast  # direct masked argmax (aryl_gym.train.fast.fast_predictor)
        self.make_env = make_env
        self.scenario = scenario
        self.seeds = [int(s) for s in seeds]
        self.reference_names = list(references)
        self.freq = int(freq)
        self.deterministic = deterministic
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.save_best = save_best
        self.data_root = data_root
        self.eval_at_start = eval_at_start
        self.references: dict[str, dict[str, float]] = {}
        self.extra = [(str(label), mk, scen, [int(x) for x in seeds]) for label, mk, scen, seeds in extra]
        if self.extra and not self.reference_names:
            raise ValueError("extra evaluation sets need a reference policy: their score divides by "
                             "the first reference's average JCT")
        # each extra set's reference figures: label -> reference -> mean figures
        self.extra_references: dict[str, dict[str, dict[str, float]]] = {}
        # one env maker and seed per evaluation episode: the main set's, then each extra set's
        self._makers: list[Callable[[], Any]] = [make_env] * len(self.seeds)
        self._episode_seeds: list[int] = list(self.seeds)
        for _, mk, _, seeds_ in self.extra:
            self._makers += [mk] * len(seeds_)
            self._episode_seeds += seeds_
        self.history: list[dict[str, float]] = []
        self.best_avg_jct = math.inf
        self._last_eval = -1
        self._envs: list[Any] | None = None

    # -- references ---------------------------------------------------------------------------
    def _init_callback(self) -> None:
        for name in self.reference_names:
            if name in self.references:
                continue
            try:
                rs = [run_reference(name, self.scenario, s, self.data_root) for s in self.seeds]
            except ValueError as exc:  # an unknown policy (e.g. aryl not installed yet)
                if self.verbose:
                    print(f"eval: reference {name!r} skipped: {exc}")
                continue
            self.references[name] = mean_metrics(rs)
        for label, _, scen, seeds in self.extra:
            refs = self.extra_references.setdefault(label, {})
            for name in self.reference_names:
                if name not in refs:
                    refs[name] = mean_metrics([run_reference(name, scen, s, self.data_root) for s in seeds])
        if self.run_dir is not None and self.history == [] and (self.run_dir / "eval.csv").exists():
            # resumed run: keep the best figure seen so far, among the evaluations that could
            # be best (every job of every set finished)
            column = "score" if self.extra else "avg_jct"
            with open(self.run_dir / "eval.csv", newline="") as fh:
                for row in csv.DictReader(fh):
                    try:
                        if any(float(v or 0.0) > 0 for k, v in row.items() if k.endswith("jobs_unfinished")):
                            continue
                        self.best_avg_jct = min(self.best_avg_jct, float(row[column]))
                    except (KeyError, ValueError):
                        pass

    def _obs_transform(self) -> Callable[[Any], Any] | None:
        vn = self.model.get_vec_normalize_env()
        return vn.normalize_obs if vn is not None else None

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Play every seed once; return the mean figures (and log them)."""
        if self._envs is None:
            self._envs = [mk() for mk in self._makers]
        # fast imports sb3_contrib: imported when used
        from aryl_gym.train.fast import fast_predictor

        tic = time.perf_counter()
        agent = fast_predictor(self.model) if self.fast else self.model
        out = run_agent_batch(agent, self._envs, self._episode_seeds, self.deterministic,
                              obs_transform=self._obs_transform())
        return self._record(out, self.num_timesteps, time.perf_counter() - tic, self._save_current)

    def _save_current(self, path: Path) -> None:
        self.model.save(path)
        vn = self.model.get_vec_normalize_env()
        if vn is not None:
            vn.save(str(path.parent / "best_vecnormalize.pkl"))

    def finish(self, shutdown: bool = True) -> None:
        """Wait for evaluations still running (see :mod:`aryl_gym.train.async_eval`)."""

    def _record(
        self,
        out: Sequence[tuple[EpisodeResult, float, int]],
        timesteps: int,
        wall_s: float,
        save_best: Callable[[Path], None],
    ) -> dict[str, float]:
        """Log one evaluation's episodes (played by the model of step ``timesteps``)."""
        n = len(self.seeds)
        row, m = eval_row(out[:n], timesteps, self.references, self.logger.record)
        if self.extra:
            m = self._record_extra(out[n:], row, m)
        row["eval_wall_s"] = wall_s
        self.logger.record("eval/wall_s", row["eval_wall_s"])
        self.logger.dump(int(timesteps))
        self.history.append(row)
        self._write_row(row)
        if self.save_best and self.run_dir is not None and is_new_best(m, self.best_avg_jct):
            self.best_avg_jct = m["avg_jct"]  # the score, with extra sets
            save_best(self.run_dir / "best_model.zip")
        if self.verbose:
            refs = "  ".join(f"{k} {v.get('avg_jct', float('nan')):,.0f}" for k, v in self.references.items())
            sets = ""
            if self.extra:  # m["avg_jct"] is the score then; the main set's figure is in the row
                key = self.reference_names[0].replace("-", "_")
                sets = "".join(f"  {label} {row[f'{label}_jct_ratio_to_{key}']:.3f}x {key}"
                               for label, *_ in self.extra) + f"  score {row['score']:.3f}"
            print(
                f"eval @ {int(timesteps):,} steps: avg JCT {row['avg_jct']:,.0f} s  ({refs}){sets}"
                f"  [{row['eval_wall_s']:.1f} s]",
                flush=True,
            )
        return row

    def _record_extra(
        self, out: Sequence[tuple[EpisodeResult, float, int]], row: dict[str, float], m: Mapping[str, float]
    ) -> dict[str, float]:
        """The extra sets' figures (into ``row`` and the logger) and the selection figures: the
        ``score`` as ``avg_jct`` and the unfinished jobs of every set."""
        first = self.reference_names[0]
        key = first.replace("-", "_")
        logs = [row.get(f"jct_ratio_to_{key}", math.nan)]
        unfinished = [m.get("jobs_unfinished", 0.0) * len(self.seeds)]
        i = 0
        for label, _, _, seeds in self.extra:
            res = [r for r, _, _ in out[i:i + len(seeds)]]
            i += len(seeds)
            sm = mean_metrics(res)
            for field in ("avg_jct", "p95_jct", "avg_queue_time", "jobs_unfinished"):
                v = sm.get(field, math.nan)
                row[f"{label}_{field}"] = v
                if math.isfinite(v):
                    self.logger.record(f"eval/{label}/{field}", v)
            unfinished.append(sm.get("jobs_unfinished", 0.0) * len(seeds))
            ref = self.extra_references.get(label, {}).get(first, {}).get("avg_jct", math.nan)
            row[f"{label}_{key}_avg_jct"] = ref
            ratio = sm["avg_jct"] / ref if math.isfinite(ref) and ref > 0 else math.nan
            row[f"{label}_jct_ratio_to_{key}"] = ratio
            if math.isfinite(ratio):
                self.logger.record(f"eval/{label}/jct_ratio_to_{key}", ratio)
            logs.append(ratio)
        ok = all(math.isfinite(r) and r > 0 for r in logs)
        row["score"] = float(math.exp(sum(math.log(r) for r in logs) / len(logs))) if ok else math.nan
        if ok:
            self.logger.record("eval/score", row["score"])
        return {"avg_jct": row["score"], "jobs_unfinished": sum(unfinished) / len(self._episode_seeds)}

    def _write_row(self, row: Mapping[str, float]) -> None:
        if self.run_dir is None:
            return
        path = self.run_dir / "eval.csv"
        fields = list(row)
        if path.exists() and path.stat().st_size > 0:
            with open(path, newline="") as fh:
                reader = csv.DictReader(fh)
                header = list(reader.fieldnames or [])
                rows = list(reader)
            if header and set(fields) != set(header):
                # a resumed run (or a new phase) with other columns: one header for all rows,
                # earlier rows get empty cells for the new columns
                merged = header + [f for f in fields if f not in header]
                tmp = path.with_name(path.name + ".tmp")
                with open(tmp, "w", newline="") as fh:  # written aside, then renamed: a crash
                    w = csv.DictWriter(fh, fieldnames=merged, restval="")  # never loses rows
                    w.writeheader()
                    w.writerows(rows)
                    w.writerow(row)
                os.replace(tmp, path)
                return
            fields = header or fields
        new = not path.exists() or path.stat().st_size == 0
        with open(path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=fields, restval="")
            if new:
                w.writeheader()
            w.writerow(row)

    def _on_training_start(self) -> None:
        if self.eval_at_start and self.freq > 0 and not self.history:
            self._last_eval = self.num_timesteps
            self.evaluate()
        else:
            self._last_eval = self.num_timesteps

    def _on_step(self) -> bool:
        if self.freq > 0 and self.num_timesteps - self._last_eval >= self.freq:
            self._last_eval = self.num_timesteps
            self.evaluate()
        return True


class WallClockLimit(BaseCallback):
    """Stop training (gracefully: the run still saves its model and summary) after
    ``minutes`` of wall time from the start of ``learn``."""

    def __init__(self, minutes: float, verbose: int = 0):
        super().__init__(verbose)
        self.seconds = float(minutes) * 60.0
        self._t0 = 0.0
        self.stopped = False

    def _on_training_start(self) -> None:
        self._t0 = time.perf_counter()

    def _on_step(self) -> bool:
        if time.perf_counter() - self._t0 >= self.seconds:
            self.stopped = True
            return False
        return True


class CriticWarmup(BaseCallback):
    """Train only the value function for the first ``steps`` env steps (the actor's parameters,
    the shared features extractor included, are frozen), then everything. After a behaviour-
    cloning warm start the critic does not know the RL reward yet; its first, noisy advantages
    would otherwise move the imitated policy."""

    def __init__(self, steps: int, verbose: int = 0):
        super().__init__(verbose)
        self.steps = int(steps)
        self._frozen: list[Any] = []

    def _actor_params(self) -> list[Any]:
        pol = self.model.policy
        mlp = pol.mlp_extractor
        critic_mods = [pol.value_net, getattr(mlp, "value_net", None), getattr(mlp, "vf", None)]
        if not pol.share_features_extractor:
            critic_mods.append(pol.vf_features_extractor)
        critic = {id(p) for m in critic_mods if isinstance(m, nn.Module) for p in m.parameters()}
        return [p for p in pol.parameters() if id(p) not in critic]

    def _on_training_start(self) -> None:
        if self.steps > 0 and self.num_timesteps < self.steps:
            self._frozen = [p for p in self._actor_params() if p.requires_grad]
            for p in self._frozen:
                p.requires_grad_(False)

    def _on_rollout_start(self) -> None:
        if self._frozen and self.num_timesteps >= self.steps:
            for p in self._frozen:
                p.requires_grad_(True)
            self._frozen = []

    def _on_step(self) -> bool:
        return True


class HParamsTextCallback(BaseCallback):
    """Write the resolved configuration as text (``hyperparameters``) once at the start."""

    def __init__(self, params: Mapping[str, Any], verbose: int = 0):
        super().__init__(verbose)
        self.params = dict(params)

    def _on_training_start(self) -> None:
        rows = "\n".join(f"|{k}|{_fmt(v)}|" for k, v in _flatten(self.params).items())
        self.logger.record(
            "hyperparameters", "|param|value|\n|-|-|\n" + rows, exclude=("stdout", "log", "json", "csv")
        )
        self.logger.dump(self.num_timesteps)

    def _on_step(self) -> bool:
        return True


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _fmt(v: Any) -> str:
    return str(v).replace("|", "\\|")
