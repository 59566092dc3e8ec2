"""Training learned agents on aryl-gym with stable-baselines3 (SPEC 7).

* :mod:`aryl_gym.train.config`: hyperparameter YAML keyed by scenario (``configs/algos/``);
* :mod:`aryl_gym.train.runner`: vector envs, model, run folder, checkpoints, resume;
* :mod:`aryl_gym.train.callbacks`: ``cluster/`` and ``eval/`` TensorBoard scalars;
* :mod:`aryl_gym.train.bc`: behaviour-cloning warm start from demonstrations;
* :mod:`aryl_gym.train.evaluation`: agents through the env, heuristics natively, same seeds.

Importing this package imports neither torch nor stable-baselines3; the submodules that need them
(runner's functions, callbacks, bc) import them when used. Install with ``pip install -e .[train]``.
"""

from aryl_gym.train.config import ALGOS, TrainConfig, load_train_config

__all__ = ["ALGOS", "TrainConfig", "load_train_config"]
