"""The simulator: cluster, loaning, jobs, placement and the round kernel. Never imports gymnasium.

This package's ``__init__`` holds the data types (jobs, the policies' view and decision); the
kernel is :mod:`aryl_gym.sim.engine` (``Simulator``, also ``aryl_gym.Simulator``). It does not
import the engine, so a module that needs only the job types (``aryl_gym.metrics``) does not load
the kernel, which itself uses ``aryl_gym.metrics``.
"""

from aryl_gym.sim.jobs import ELASTIC_FAMILIES, JobSpec, JobState
from aryl_gym.sim.view import (
    INFER,
    TRAIN,
    ClusterView,
    Decision,
    PlacementOptions,
    PlacementReport,
    Policy,
    Pool,
)

__all__ = [
    "ClusterView",
    "Decision",
    "ELASTIC_FAMILIES",
    "INFER",
    "JobSpec",
    "JobState",
    "PlacementOptions",
    "PlacementReport",
    "Policy",
    "Pool",
    "TRAIN",
]
