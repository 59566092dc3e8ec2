"""The simulator's API as a hostile user drives it (fourth pass): a pool for a job that is not
in the trace, rates a policy declares itself, and scenario values a fuzz over the scenario knobs
found accepted and then failing deep inside."""

from __future__ import annotations

import re

import numpy as np
import pytest

from aryl_gym.sim.placement import INFER, TRAIN
from aryl_gym.sim.view import Decision
from tests.test_hostile_v3 import _open_tiny_round as _open_first_round


def _open_tiny_round():  # type: ignore[no-untyped-def]
    """``tiny`` seed 0 under FIFO, at the first open round with a queued job."""
    sim, pol = _open_first_round()
    while not (sim.state == 1).any():
        sim.close_round(pol, None)
        while not sim.open_round(pol):
            sim.close_round(pol, None)
    return sim, pol


def test_a_pool_for_a_job_outside_the_trace_is_reported() -> None:
    sim, pol = _open_tiny_round()
    n = sim.n_jobs
    for key in (n, 999, -1, 2.0, "0", True):
        sim, pol = _open_tiny_round()
        rep = sim.close_round(pol, Decision(pools={key: TRAIN})).report  # type: ignore[dict-item]
        # was: ignored without a word (and 2.0 used as job 2's pool)
        assert any("not a job id of the trace" in str(v) for v in rep.invalid.values()), key


def test_a_float_pool_key_is_not_used_as_a_job_s_pool(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the preferred pool each growing job is placed with, as the engine hands it on
    import aryl_gym.sim.placement as placement

    seen: dict[int, object] = {}
    real = placement.grow_job

    def spy(st, j, t, opts, pref, *rest):  # type: ignore[no-untyped-def]
        seen[j] = pref
        return real(st, j, t, opts, pref, *rest)

    monkeypatch.setattr(placement, "grow_job", spy)
    sim, pol = _open_tiny_round()
    j = int(np.flatnonzero(sim.state == 1)[0])
    sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={float(j): INFER}))  # type: ignore[dict-item]
    assert seen == {j: None}  # was: INFER (2.0 read as job 2)
    sim, pol = _open_tiny_round()
    sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={j: INFER}))
    assert seen == {j: INFER}


def test_a_valid_pool_is_still_quiet() -> None:
    sim, pol = _open_tiny_round()
    j = int(np.flatnonzero(sim.state == 1)[0])
    rep = sim.close_round(pol, Decision(targets={j: int(sim.w_min_list[j])}, pools={j: TRAIN})).report
    assert not rep.invalid


def test_declared_rates_leave_a_trace_in_the_result() -> None:
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode
    from aryl_gym.sim.view import ClusterView

    base = make_episode("tiny", 0).simulator().run(make_policy("sjf"))
    assert base.declared_rate_jobs == 0

    class Boast:
        """SJF that declares every job it starts 3x faster."""

        name = "boast"

        def __init__(self) -> None:
            self.inner = make_policy("sjf")

        def reset(self, seed: int | None = None) -> None:
            self.inner.reset(seed)

        def __getattr__(self, k: str):  # type: ignore[no-untyped-def]
            return getattr(self.inner, k)

        def decide(self, view: ClusterView) -> Decision:
            d = self.inner.decide(view)
            d.speedup = {int(j): [3.0] for j in d.targets}
            return d

    res = make_episode("tiny", 0).simulator().run(Boast())
    assert res.declared_rate_jobs > 0
    assert res.to_dict()["declared_rate_jobs"] == res.declared_rate_jobs
    assert res.avg_jct < base.avg_jct  # the declared rate was run: nothing bounds it


# -- scenario values that were accepted and then failed deep inside (a fuzz over scenario knobs) --
def _yaml(tmp_path, name: str, body: dict):  # type: ignore[no-untyped-def]
    import yaml

    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump({"name": name, **body}))
    return p



@pytest.mark.parametrize("section, key, value, says", [
    ("sim", "max_rounds", 0, "sim.max_rounds must be >= 1"),  # was: the env crashed on its first commit
    ("sim", "horizon_hours", 0, "sim.horizon_hours must be > 0"),
    ("inference", "sample_seconds", 0, "inference.sample_seconds must be > 0"),  # was: ZeroDivisionError
    ("workload", "diurnal_arrivals", 1.01, "workload.diurnal_arrivals must be in [0, 1]"),  # was: numpy's error
    ("workload", "duration_median_s", 0, "workload.duration_median_s must be > 0"),  # was: "job 0 ... work"
    ("workload", "elastic_mean_hours", 0, "workload.elastic_mean_hours must be > 0"),
])
def test_values_that_failed_deep_inside_are_refused_on_load(tmp_path, section, key, value, says) -> None:  # type: ignore[no-untyped-def]
    from aryl_gym.config import ConfigError, load_scenario

    p = _yaml(tmp_path, "x", {section: {key: value}})
    with pytest.raises(ConfigError, match=re.escape(says)):
        load_scenario(p)


@pytest.mark.parametrize("gpus_per_server", [1, 2])
def test_generated_workers_fit_small_training_servers(tmp_path, gpus_per_server: int) -> None:  # type: ignore[no-untyped-def]
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    p = _yaml(tmp_path, "small", {"cluster": {"train_servers": 2, "train_gpus_per_server": gpus_per_server,
                                              "inf_servers": 0},
                                  "workload": {"num_jobs": 40, "elastic_fraction": 0.5}})
    for seed in range(4):  # was: "job 29: a worker of 4 GPUs does not fit a training server of 2 GPUs"
        sim = make_episode(str(p), seed).simulator()
        assert max(j.g for j in sim.jobs) <= gpus_per_server
        assert any(j.elastic for j in sim.jobs)
        res = sim.run(make_policy("aryl"))
        assert res.jobs_completed == res.jobs_total


def test_an_empty_generated_workload_says_which_knob(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aryl_gym.config import ConfigError
    from aryl_gym.scenario import make_episode

    p = _yaml(tmp_path, "empty", {"cluster": {"train_servers": 1, "train_gpus_per_server": 1},
                                  "workload": {"duration_hours": 0.25, "load": 0.05}})
    with pytest.raises(ConfigError, match="the generated workload has no job for seed 0.*workload.num_jobs"):
        make_episode(str(p), 0)  # was: "check the trace file" (there is none)
