"""The experiment's estimator reproduces the generator's calibration on its own sample."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))

import share_bias  # noqa: E402

from aryl_gym.config import load_scenario  # noqa: E402
from aryl_gym.workload import generator as gen  # noqa: E402


@pytest.mark.parametrize("scenario", ["basic", "production"])
def test_calibration_sample_gives_the_target(scenario: str) -> None:
    cfg = load_scenario(scenario)
    w = cfg.workload
    max_gpus, max_g = gen._max_gpus(cfg), min(8, cfg.cluster.train_gpus_per_server)
    scale = gen.elastic_size_scale(w, max_gpus, max_g)
    d = gen._draw_jobs(dataclasses.replace(w, elastic_gpu_share=None), max_gpus, max_g, 100_000,
                       np.random.default_rng(20221202))
    # the bisection stops within 1e-3 in log scale: the share is within a few 1e-4 of the target
    assert share_bias._share(d, scale, max_gpus) == pytest.approx(w.elastic_gpu_share, abs=2e-3)
    # a scale of 1 gives the unscaled shapes' share, lower than the target (elastic jobs grow)
    assert share_bias._share(d, 1.0, max_gpus) < share_bias._share(d, scale, max_gpus)


def test_trace_shares_are_shares() -> None:
    r = share_bias.measure("basic", 2)
    assert len(r["trace_per_seed"]) == 2
    assert all(0.0 < s < 1.0 for s in r["trace_per_seed"])
    assert min(r["trace_per_seed"]) <= r["trace_pooled"] <= max(r["trace_per_seed"])
