"""rl-baselines3-zoo with MaskablePPO: ``python -m aryl_gym.train.zoo ARGS``.

The zoo (``rl_zoo3``) trains and tunes SB3 agents from a hyperparameter YAML keyed by env id
(``configs/algos/rl_zoo3.yml`` here). Its algorithm table has no ``ppo_mask`` (sb3-contrib's
``MaskablePPO``), and it reads ``--gym-packages`` only after parsing ``--algo``, so a package cannot
add one itself. This module registers it and then runs ``rl_zoo3.train`` unchanged, with the
same arguments::

    python -m aryl_gym.train.zoo --algo ppo_mask --env aryl_gym/Aryl-v2 --gym-packages aryl_gym \\
        -conf configs/algos/rl_zoo3.yml -f logs/ --env-kwargs scenario:"'tiny'" \\
        action_mode:"'sequential'" -n 20000

What :func:`register_ppo_mask` adds to the zoo:

* ``ppo_mask`` in ``rl_zoo3.utils.ALGOS`` (MaskablePPO);
* for Optuna (``-optimize``): the zoo's PPO sampler and converter (``sample_ppo_params``,
  ``convert_onpolicy_params``), since MaskablePPO takes PPO's hyperparameters;
* for ``--algo ppo_mask`` only: evaluation with the action masks (sb3-contrib's
  ``MaskableEvalCallback`` in place of SB3's ``EvalCallback``, and the same for the Optuna
  trials' ``TrialEvalCallback``); without masks a deterministic policy may pick an invalid action.

The result is the zoo's usual folder ``LOG/ppo_mask/ENV_N/`` (``best_model.zip``, the final
``ENV.zip``, ``rl_model_*_steps.zip``, ``ENV/config.yml``, ``args.yml``, ``env_kwargs.yml``),
which ``aryl-gym leaderboard --agent NAME=LOG/ppo_mask/ENV_N`` loads
(:func:`aryl_gym.agents.learned.resolve_zoo_folder`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from aryl_gym.commands._zoo_args import peek_algo

ALGO = "ppo_mask"


def register_ppo_mask(masked_eval: bool = True) -> None:
    """Add ``ppo_mask`` to the zoo (idempotent); with ``masked_eval`` also make the zoo's
    evaluation callbacks use the action masks (only right when the algorithm is ``ppo_mask``)."""
    # rl-zoo3 (the zoo extra, torch): imported when used
    import rl_zoo3.exp_manager as zoo_exp
    from rl_zoo3 import hyperparams_opt, utils
    from rl_zoo3.callbacks import TrialEvalCallback

    # sb3-contrib (the train extra, torch): imported when used
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback

    utils.ALGOS[ALGO] = MaskablePPO
    hyperparams_opt.HYPERPARAMS_SAMPLER[ALGO] = hyperparams_opt.sample_ppo_params
    hyperparams_opt.HYPERPARAMS_CONVERTER[ALGO] = hyperparams_opt.convert_onpolicy_params
    if masked_eval:

        class MaskableTrialEvalCallback(TrialEvalCallback, MaskableEvalCallback):  # type: ignore[misc]
            """The zoo's Optuna trial callback over sb3-contrib's masked evaluation
            (``TrialEvalCallback``'s ``super()`` is ``MaskableEvalCallback`` in this order)."""

        zoo_exp.EvalCallback = MaskableEvalCallback  # type: ignore[misc]
        zoo_exp.TrialEvalCallback = MaskableTrialEvalCallback  # type: ignore[misc]


def main(argv: Sequence[str] | None = None) -> Any:
    """Run ``rl_zoo3.train`` with ``argv`` (default ``sys.argv[1:]``), ``ppo_mask`` registered."""
    args = list(sys.argv[1:] if argv is None else argv)

    register_ppo_mask(masked_eval=peek_algo(args) == ALGO)
    # rl-zoo3 (the zoo extra, torch): imported when used
    from rl_zoo3.train import train

    saved = sys.argv
    sys.argv = [f"{sys.executable} -m aryl_gym.train.zoo", *args]
    try:
        return train()
    finally:
        sys.argv = saved


if __name__ == "__main__":
    main()
