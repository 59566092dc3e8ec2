"""A permutation-invariant policy: the job window as a set (DeepSets with a global context).

:class:`JobSetExtractor` (an SB3 ``BaseFeaturesExtractor``) embeds every window slot with one
shared network ``phi`` (its ``jobs`` row, its ``jobs_v1`` row when the env has observation v1,
and its own two action-mask bits, grant and release), pools the valid slots (mean and max), and
mixes the pool with the cluster keys (``cluster``, ``cluster_v1``, ``outside``, the commit bit)
into a global context ``g``; each slot then gets a context-aware embedding
``h_i = psi(phi_i, g)``. Its output is ``[g, h_1, ..., h_K]``.

:class:`MaskableSetPolicy` (MaskablePPO, ``sequential`` action mode) scores each slot's grant and
release from ``h_i`` with shared heads and the commit from ``g``; the value is an MLP of ``g``.
No parameter depends on the window size K or on the cluster size: one set of weights serves any
window (``tests/test_setpolicy.py`` moves the weights between K = 8 and K = 24), permuting the
window permutes the slot scores the same way, and the value does not change. The forward pass is
:class:`~aryl_gym.train.fast.FastMaskableMixin`'s.

Config (``configs/algos/maskable_ppo_set.yaml``)::

    policy: MaskableSetPolicy
    policy_kwargs: {features_extractor_kwargs: {embed_dim: 64}, vf_hidden: 64}
"""

from __future__ import annotations

from typing import Any, cast

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from aryl_gym.train.fast import FastMaskableMixin

_SLOT_KEYS = ("jobs", "jobs_v1")
_GLOBAL_KEYS = ("cluster", "cluster_v1", "outside")


def _shape(space: spaces.Space[Any]) -> tuple[int, ...]:
    """The shape of a Box observation space (every space this policy reads has one)."""
    if space.shape is None:
        raise ValueError(f"MaskableSetPolicy: observation space {space} has no shape")
    return space.shape


def _mlp(i: int, o: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, hidden), nn.ReLU(), nn.Linear(hidden, o), nn.ReLU())


class JobSetExtractor(BaseFeaturesExtractor):
    """DeepSets over the window's slots plus a global context (module docstring)."""

    def __init__(self, observation_space: spaces.Dict, embed_dim: int = 64):
        sp = observation_space.spaces
        k = int(_shape(sp["jobs"])[0])
        super().__init__(observation_space, features_dim=embed_dim * (k + 1))
        self.d = int(embed_dim)
        self.slot_keys = [key for key in _SLOT_KEYS if key in sp]
        self.global_keys = [key for key in _GLOBAL_KEYS if key in sp]
        self.has_mask = "action_mask" in sp
        f_slot = sum(int(_shape(sp[key])[-1]) for key in self.slot_keys) + (2 if self.has_mask else 0)
        f_glob = sum(int(_shape(sp[key])[-1]) for key in self.global_keys) + (1 if self.has_mask else 0)
        d = self.d
        self.phi = _mlp(f_slot, d, d)
        self.rho = _mlp(2 * d + f_glob, d, d)
        self.psi = _mlp(2 * d, d, d)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        jobs = obs["jobs"]
        b, k = jobs.shape[0], jobs.shape[1]
        parts = [obs[key].reshape(b, k, -1) for key in self.slot_keys]
        glob = [obs[key].reshape(b, -1) for key in self.global_keys]
        if self.has_mask:
            m = obs["action_mask"].reshape(b, -1)
            n = m.shape[1]
            grant = m[:, :k]
            release = m[:, k : 2 * k] if n == 2 * k + 1 else th.zeros_like(grant)
            parts.append(th.stack([grant, release], dim=-1))
            glob.append(m[:, -1:])
        x = self.phi(th.cat(parts, dim=-1))  # (B, K, d)
        valid = jobs[..., :1]  # (B, K, 1): 1 for a real job
        cnt = valid.sum(dim=1).clamp(min=1.0)
        mean = (x * valid).sum(dim=1) / cnt
        mx = (x * valid - (1.0 - valid) * 1e4).max(dim=1).values.clamp(min=0.0)  # phi >= 0 (ReLU)
        g = self.rho(th.cat([mean, mx, *glob], dim=-1))  # (B, d)
        h = self.psi(th.cat([x, g.unsqueeze(1).expand(b, k, self.d)], dim=-1)) * valid
        return th.cat([g, h.reshape(b, k * self.d)], dim=1)


class _SetLatent(nn.Module):
    """``mlp_extractor``: the actor sees the features as they are; the critic an MLP of ``g``."""

    def __init__(self, d: int, features_dim: int, vf_hidden: int):
        super().__init__()
        self.d = d
        self.latent_dim_pi = features_dim
        self.latent_dim_vf = vf_hidden
        self.vf = nn.Sequential(nn.Linear(d, vf_hidden), nn.Tanh(), nn.Linear(vf_hidden, vf_hidden), nn.Tanh())

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return features

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.vf(features[:, : self.d])


class SlotActionHead(nn.Module):
    """Logits ``[grant_1..K, release_1..K, commit]`` (or without releases) from ``[g, h_1..K]``."""

    def __init__(self, d: int, release: bool):
        super().__init__()
        self.d = d
        self.release = release
        self.grant = nn.Linear(d, 1)
        self.rel = nn.Linear(d, 1) if release else None
        self.commit = nn.Linear(d, 1)

    def forward(self, latent: th.Tensor) -> th.Tensor:
        b = latent.shape[0]
        g = latent[:, : self.d]
        h = latent[:, self.d :].reshape(b, -1, self.d)
        out = [self.grant(h).squeeze(-1)]
        if self.rel is not None:
            out.append(self.rel(h).squeeze(-1))
        out.append(self.commit(g))
        return th.cat(out, dim=1)


class MaskableSetPolicy(FastMaskableMixin, MaskableMultiInputActorCriticPolicy):
    """MaskablePPO policy over the window as a set (module docstring); ``sequential`` mode."""

    def __init__(self, observation_space: spaces.Dict, action_space: spaces.Discrete, lr_schedule: Any,
                 *args: Any, vf_hidden: int = 64, **kwargs: Any):
        if not isinstance(action_space, spaces.Discrete) or "jobs" not in observation_space.spaces:
            raise ValueError("MaskableSetPolicy needs the allocation env's Dict observation and the "
                             "sequential action mode (Discrete(2K + 1) or Discrete(K + 1))")
        k = int(_shape(observation_space.spaces["jobs"])[0])
        if int(action_space.n) not in (2 * k + 1, k + 1):
            raise ValueError(f"MaskableSetPolicy: {action_space.n} actions for a window of {k}; "
                             "expected 2K + 1 (grant, release, commit) or K + 1")
        self._release = int(action_space.n) == 2 * k + 1
        self.vf_hidden = int(vf_hidden)
        kwargs.setdefault("features_extractor_class", JobSetExtractor)
        kwargs.pop("net_arch", None)
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _extractor(self) -> JobSetExtractor:
        return cast(JobSetExtractor, self.features_extractor)  # the default features_extractor_class

    def _build_mlp_extractor(self) -> None:
        # SB3 types mlp_extractor as its MlpExtractor; the policy needs only latent_dim_pi/vf
        # and forward/forward_actor/forward_critic, which _SetLatent has
        self.mlp_extractor = _SetLatent(  # type: ignore[assignment]
            self._extractor().d, self.features_dim, self.vf_hidden
        )

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = SlotActionHead(self._extractor().d, self._release)
        # the optimizer must hold the new head's parameters
        # optimizer_class is typed as torch's base Optimizer, whose __init__ has no lr (as in SB3)
        self.optimizer = self.optimizer_class(  # type: ignore[call-arg]
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["vf_hidden"] = self.vf_hidden
        data.pop("net_arch", None)
        return data
