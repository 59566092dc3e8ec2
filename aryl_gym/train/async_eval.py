"""Periodic evaluation in a second process, so training does not wait for it.

An evaluation plays every held-out seed to the end (several thousand env steps per seed), as
many env steps as thousands of training steps. :class:`AsyncArylEvalCallback` snapshots the
model (``model.save`` to bytes) and hands it to one worker process, which plays the seeds with
its own envs (the direct masked argmax of :func:`aryl_gym.train.fast.fast_predictor`) while
training continues on the main process; results are logged when they arrive, under the step
count of the snapshot, and the snapshot itself becomes ``best_model.zip`` when it is the best.
At most one evaluation is in flight: when the next one is due before the last has finished,
it is postponed until the worker is free and then plays the model of that moment (training
never waits; the curve's points can be further apart than ``freq``). Runs with ``VecNormalize`` evaluate in the
main process (the worker would need the running statistics).

When the worker fails (killed by the out-of-memory killer, or an error in it), the run says so
on stderr, plays the snapshot that was in flight in the main process (its row of ``eval.csv``
is not lost) and evaluates in the main process from then on (training waits for them). Was: the
training run died with ``BrokenProcessPool``, losing the steps since its last checkpoint.

The figures are the same as the in-process :class:`~aryl_gym.train.callbacks.ArylEvalCallback`
(same episodes, same deterministic actions); only the wall-clock overlap changes.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aryl_gym.parallel import die_with_parent
from aryl_gym.train.callbacks import ArylEvalCallback
from aryl_gym.train.evaluation import run_agent_batch

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

_WORKER: dict[str, Any] = {}


def _init_worker(parent: int | None = None) -> None:
    # torch (the train extra): imported when used
    import torch

    torch.set_num_threads(1)
    # a killed training run cannot shut the pool down: the worker then exits by itself
    die_with_parent(parent if parent is not None else os.getppid())


def _play(data: bytes, algo_cls: type[BaseAlgorithm], makers: list[Any], seeds: list[int], deterministic: bool):
    """In the worker: load the snapshot, play ``seeds`` (episode ``i`` in an env of
    ``makers[i]``; envs kept between calls)."""

    # fast imports sb3_contrib: imported when used
    from aryl_gym.train.fast import fast_predictor

    tic = time.perf_counter()
    envs = _WORKER.get("envs")
    if envs is None or len(envs) != len(seeds):
        envs = _WORKER["envs"] = [mk() for mk in makers]
    model = algo_cls.load(io.BytesIO(data), device="cpu")
    out = run_agent_batch(fast_predictor(model), envs, seeds, deterministic)
    return out, time.perf_counter() - tic


class AsyncArylEvalCallback(ArylEvalCallback):
    """:class:`ArylEvalCallback` whose evaluations run in a worker process (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[Future, int, bytes]] = []
        #: why the worker failed (evaluations then run in this process), or None
        self.worker_error: BaseException | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                             initargs=(os.getpid(),))
        return self._pool

    def evaluate(self) -> dict[str, float]:
        if self.model.get_vec_normalize_env() is not None or self.worker_error is not None:
            return super().evaluate()
        self._poll(block=True)  # at most one in flight
        if self.worker_error is not None:  # found failed just now
            return super().evaluate()
        buf = io.BytesIO()
        self.model.save(buf)
        data = buf.getvalue()
        try:
            fut = self._executor().submit(
                _play, data, type(self.model), self._makers, self._episode_seeds, self.deterministic
            )
        except (BrokenProcessPool, RuntimeError) as exc:  # the worker died while idle
            self._worker_failed(exc, int(self.num_timesteps))
            return super().evaluate()
        self._pending.append((fut, int(self.num_timesteps), data))
        return {}

    def _worker_failed(self, exc: BaseException, steps: int) -> None:
        """Say so, drop the pool; evaluations run in this process from now on."""
        self.worker_error = exc
        print(f"eval: the background evaluation worker failed at the evaluation of step {steps:,} "
              f"({type(exc).__name__}: {exc}); evaluating in the training process from now on",
              file=sys.stderr, flush=True)
        if self._pool is not None:
            try:
                self._pool.shutdown(wait=False, cancel_futures=True)
            except Exception:  # noqa: BLE001 - a broken pool: nothing more to stop
                pass
            self._pool = None

    def _play_here(self, data: bytes) -> tuple[Any, float]:
        """Play a snapshot in this process (after the worker failed)."""
        # fast imports sb3_contrib: imported when used
        from aryl_gym.train.fast import fast_predictor

        tic = time.perf_counter()
        if self._envs is None:
            self._envs = [mk() for mk in self._makers]
        model = type(self.model).load(io.BytesIO(data), device="cpu")
        out = run_agent_batch(fast_predictor(model), self._envs, self._episode_seeds, self.deterministic)
        return out, time.perf_counter() - tic

    def _poll(self, block: bool, replay: bool = True) -> None:
        while self._pending and (block or self._pending[0][0].done()):
            fut, steps, data = self._pending.pop(0)
            try:
                out, wall = fut.result()
            except Exception as exc:  # noqa: BLE001 - any failure of the worker: reported, then replayed
                self._worker_failed(exc, steps)
                if not replay:
                    continue
                out, wall = self._play_here(data)  # the snapshot's row is not lost

            def save(path: Path, data: bytes = data) -> None:
                path.write_bytes(data)

            self._record(out, steps, wall, save)

    def _on_step(self) -> bool:
        if self._pending and self._pending[0][0].done():
            self._poll(block=False)
        # due while the worker is still busy: postponed until it is free (training never waits)
        if self.freq > 0 and self.num_timesteps - self._last_eval >= self.freq and not self._pending:
            self._last_eval = self.num_timesteps
            self.evaluate()
        return True

    def abandon(self) -> None:
        """An interrupted run: keep the evaluation in flight if it finishes, replay nothing."""
        self._poll(block=True, replay=False)
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def finish(self, shutdown: bool = True) -> None:
        self._poll(block=True)
        if shutdown and self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _on_training_end(self) -> None:
        self._poll(block=False)
