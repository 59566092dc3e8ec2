"""The RLlib pieces that run inside Ray's processes (RLlib's new API stack): the masked
actor-critic :class:`MaskedPPOTorchModule` (an ``RLModule``) and :class:`ClusterMetrics` (an
``RLlibCallback`` that logs every finished training episode's scheduling figures).

This module imports ray and torch at the top: it is imported only by
:mod:`aryl_gym.train.rllib_backend` when RLlib is used, and by Ray's workers when they rebuild
the module from its spec or checkpoint (the class path is stored in every checkpoint, so it
must stay importable under this name). ``import aryl_gym`` never imports it.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from aryl_gym.rollout import invalid_from_info, result_from_info
from aryl_gym.train.evaluation import CLUSTER_TAGS

#: the observation key holding the action mask (1 = allowed), as MaskablePPO reads it
MASK_KEY = "action_mask"
#: the logit a masked-out action gets: far below any real logit, so its probability is 0 in
#: float32 after the softmax, but finite (entropy and log-softmax stay finite, no 0 * inf)
MASKED_LOGIT = -1.0e8

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU,
                "gelu": nn.GELU}


def apply_mask(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``logits`` where ``mask`` allows the action (``mask > 0.5``), :data:`MASKED_LOGIT`
    elsewhere; shapes ``(B, n)`` both."""
    return torch.where(mask > 0.5, logits, torch.full_like(logits, MASKED_LOGIT))


def _size(space: gym.Space[Any]) -> int:
    """Entries of one observation key once flattened."""
    return int(np.prod(space.shape or ()))


def _mlp(n_in: int, hiddens: list[int], n_out: int, act: type[nn.Module], out_gain: float) -> nn.Sequential:
    """An MLP initialised as SB3's ``ActorCriticPolicy`` does (``ortho_init``): orthogonal
    weights, gain sqrt(2) in the hidden layers and ``out_gain`` in the last one (0.01 for the
    policy, so its first actions are close to uniform over the allowed ones; 1 for the value),
    zero biases."""
    layers: list[nn.Module] = []
    for h in hiddens:
        layers += [nn.Linear(n_in, h), act()]
        n_in = h
    layers.append(nn.Linear(n_in, n_out))
    linears = [m for m in layers if isinstance(m, nn.Linear)]
    for i, lin in enumerate(linears):
        nn.init.orthogonal_(lin.weight, gain=out_gain if i == len(linears) - 1 else math.sqrt(2))
        nn.init.zeros_(lin.bias)
    return nn.Sequential(*layers)


class MaskedPPOTorchModule(TorchRLModule, ValueFunctionAPI):
    """PPO's actor-critic for a ``Dict`` observation with an ``action_mask`` key over a
    ``Discrete`` action space, as sb3-contrib's ``MaskablePPO`` with ``MultiInputPolicy`` builds
    it: every key of the observation (the mask included) flattened and concatenated in the
    space's key order, then separate policy and value networks, initialised as SB3 does
    (``model_config``:
    ``hiddens``, default ``[64, 64]``; ``activation``, default ``tanh``). The policy's logits
    of actions the mask refuses are set to :data:`MASKED_LOGIT` in every forward pass
    (inference, exploration and training), so such an action is never sampled and its
    probability in the PPO loss is 0."""

    def setup(self) -> None:
        space = self.observation_space
        if not isinstance(space, gym.spaces.Dict) or MASK_KEY not in space.spaces:
            raise ValueError(f"{type(self).__name__} needs a Dict observation space with an "
                             f"{MASK_KEY!r} key; got {space}")
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError(f"{type(self).__name__} needs a Discrete action space (the env's "
                             f"'sequential' action mode); got {self.action_space}")
        n_mask = _size(space.spaces[MASK_KEY])
        if n_mask != int(self.action_space.n):
            raise ValueError(f"the {MASK_KEY!r} has {n_mask} entries for {self.action_space.n} actions")
        cfg: dict[str, Any] = dict(self.model_config or {})  # type: ignore[arg-type]
        hiddens = [int(h) for h in cfg.get("hiddens", [64, 64])]
        act_name = str(cfg.get("activation", "tanh")).lower()
        if act_name not in _ACTIVATIONS:
            raise ValueError(f"activation {act_name!r} unknown; choose one of {', '.join(_ACTIVATIONS)}")
        act = _ACTIVATIONS[act_name]
        self.obs_keys = list(space.spaces)
        n_in = sum(_size(space.spaces[k]) for k in self.obs_keys)
        self.pi = _mlp(n_in, hiddens, int(self.action_space.n), act, 0.01)
        if not self.inference_only:
            self.vf = _mlp(n_in, hiddens, 1, act, 1.0)

    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(B, sum of key sizes)``: every key flattened, in the space's key order."""
        return torch.cat([obs[k].reshape(obs[k].shape[0], -1).float() for k in self.obs_keys], dim=-1)

    def masked_logits(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """``(masked logits (B, n), features)`` of a batch of observations."""
        feats = self.features(obs)
        return apply_mask(self.pi(feats), obs[MASK_KEY].reshape(feats.shape[0], -1)), feats

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # inference and exploration (on the env runners): the action distribution's inputs only
        logits, _ = self.masked_logits(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        # the learner: the features too, so compute_values does not flatten the batch again
        logits, feats = self.masked_logits(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: feats}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        feats = embeddings if embeddings is not None else self.features(batch[Columns.OBS])
        return self.vf(feats).squeeze(-1)


class ClusterMetrics(RLlibCallback):
    """On every env runner, the final ``info``'s :class:`~aryl_gym.metrics.EpisodeResult` of each
    training episode that ends, logged as sums and counts (``("cluster_sum", tag)``,
    ``("cluster_n", tag)``, reduced by summing over episodes and env runners), so the driver
    divides them into the exact mean over the episodes that ended in the iteration (a mean of
    per-runner means would weigh a runner with one episode like one with ten)."""

    def on_episode_end(self, *, episode: Any, metrics_logger: Any = None, **kwargs: Any) -> None:
        if metrics_logger is None:
            return
        info = episode.get_infos(-1)
        res = result_from_info(info)
        if res is None:
            return
        values: dict[str, float] = {}
        for field, tag in CLUSTER_TAGS.items():
            v = getattr(res, field)
            if v is not None and math.isfinite(float(v)):
                values[tag] = float(v)
        inv = invalid_from_info(info)
        values["invalid_actions"] = float(res.invalid_decisions) if inv is None else inv
        values["jobs_completed_frac"] = res.jobs_completed / max(res.jobs_total, 1)
        for tag, v in values.items():
            metrics_logger.log_value(("cluster_sum", tag), v, reduce="sum")
            metrics_logger.log_value(("cluster_n", tag), 1, reduce="sum")
        metrics_logger.log_value(("cluster_sum", "episodes"), 1, reduce="sum")
        metrics_logger.log_value(("cluster_sum", "thrashing_episodes"), int(bool(res.thrashing)),
                                 reduce="sum")
