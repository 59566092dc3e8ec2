"""The bulk JobSpec construction path used by the trace loaders."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.sim.jobs import JobSpec, JobSpecBuilder
from aryl_gym.workload.traces import load_trace


def _normal(spec: JobSpec) -> JobSpec:
    return JobSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(JobSpec)})


def test_builder_takes_every_field_in_order():
    params = list(inspect.signature(JobSpecBuilder.__init__).parameters)[1:]
    assert params == [f.name for f in dataclasses.fields(JobSpec)], (
        "JobSpecBuilder must take JobSpec's fields positionally, in order: update it with JobSpec")


def test_builder_equals_normal_construction_and_is_frozen():
    a = JobSpecBuilder(3, 12.5, "bert", 2, 1, 4, True, True, 100.0, 90.0, "j3", "bert", 64,
                       (1.0, 1.0, 0.9), {"k": 1}, 2, True)
    b = JobSpec(3, 12.5, "bert", 2, 1, 4, True, True, 100.0, 90.0, "j3", "bert", 64,
                (1.0, 1.0, 0.9), {"k": 1}, 2, True)
    assert type(a) is JobSpec
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert a.gpus_max == 8
    a.validate()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.w_max = 8  # type: ignore[misc]
    assert dataclasses.replace(a, w_req=1).w_req == 1


def test_loaded_trace_specs_equal_normal_construction(tmp_path: Path):
    rng = np.random.default_rng(0)
    n = 300
    rows = ["job_id,submitted,n_gpus,runtime_min,arch"]
    archs = ["resnet50", "bert", "vgg16", "lstm", "mystery"]
    for i in range(n):
        rows.append(f"j{i},{i * 7},{int(rng.choice([1, 2, 4, 8, 16]))},{1 + int(rng.integers(300))},"
                    f"{archs[int(rng.integers(len(archs)))]}")
    p = tmp_path / "jobs.csv"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    jobs, _ = load_trace(p, "csv", rng=np.random.default_rng(1),
                         columns={"submit": "submitted", "gpus": "n_gpus", "duration": "runtime_min",
                                  "model": "arch", "id": "job_id"},
                         units={"duration": "min"})
    assert len(jobs) == n
    assert any(j.elastic and j.w_max > j.w_req for j in jobs)
    for j in jobs:
        assert type(j) is JobSpec
        assert j == _normal(j)
        j.validate()
