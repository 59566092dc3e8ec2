"""aryl-gym: a Gymnasium environment and fast simulator for GPU-cluster scheduling with capacity
loaning between an inference and a training cluster, and elastic jobs; built around the Aryl
scheduler (arXiv 2202.07896, EuroSys '23 as Lyra).

``import aryl_gym`` registers the environments and does not import torch.
"""

from aryl_gym.config import ConfigError, ScenarioConfig, load_scenario
from aryl_gym.metrics import EpisodeResult
from aryl_gym.scenario import make_episode, make_simulator
from aryl_gym.sim import Decision, JobSpec
from aryl_gym.sim.engine import Simulator

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Decision",
    "EpisodeResult",
    "JobSpec",
    "ScenarioConfig",
    "Simulator",
    "__version__",
    "load_scenario",
    "make_episode",
    "make_simulator",
]

try:  # environment registration (gymnasium is a core dependency)
    from aryl_gym.envs import register_envs as _register_envs

    _register_envs()
except ModuleNotFoundError as _exc:  # pragma: no cover - envs package not present yet
    if _exc.name not in ("aryl_gym.envs",):
        raise
