"""The simulator: cluster, loaning, jobs, placement and the round kernel. Never imports gymnasium."""

from aryl_gym.sim.engine import RoundInfo, Simulator, default_reclaim
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
    "RoundInfo",
    "Simulator",
    "TRAIN",
    "default_reclaim",
]
