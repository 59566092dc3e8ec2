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
:class:`~aryl_gym.train.fast.FastMaskableMixin`'s; to act on one observation,
:class:`NumpyActor` runs the actor in numpy (``MaskableSetPolicy.numpy_actor()``).

Config (``configs/algos/maskable_ppo_set.yaml``)::

    policy: MaskableSetPolicy
    policy_kwargs: {features_extractor_kwargs: {embed_dim: 64}, vf_hidden: 64}
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
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


def _np(t: Any) -> np.ndarray:
    """A numpy view of a parameter tensor (shares its memory: in-place updates show through;
    ``Any``: a layer of an ``nn.Sequential`` is typed as a tensor or a module)."""
    return cast(np.ndarray, t.detach().numpy())


class NumpyActor:
    """The actor's logits of a :class:`MaskableSetPolicy` for one observation, in numpy: the
    operations of :meth:`JobSetExtractor.forward` and :class:`SlotActionHead` on ``B = 1``, with
    the concatenations before the first layers of ``phi`` and ``psi`` split into one product
    per part (the same sums in another order), on numpy views of the policy's own parameters
    (an in-place update, as training's, reaches it). About 2x cheaper per call than the
    TorchScript trace for the shipped policy (no tensor dispatch; ``aryl-gym bench --only
    scale``); float32 like the policy, so its logits differ from torch's in the last bits
    (2.4e-6 at most over 5,000 ``basic`` states of ``ppo-v1``): callers that need torch's exact
    action compare the margin (:meth:`LearnedAgent._one_argmax`)."""

    def __init__(self, policy: MaskableSetPolicy):
        fe = policy._pi_extractor()
        sp = cast(spaces.Dict, policy.observation_space).spaces
        d, k = fe.d, int(_shape(sp["jobs"])[0])
        self.d, self.k = d, k
        self.slot_keys, self.global_keys = list(fe.slot_keys), list(fe.global_keys)
        w1, self.phi_b1 = _np(fe.phi[0].weight), _np(fe.phi[0].bias)
        self.phi_parts, off = [], 0
        for key in self.slot_keys:
            n = int(_shape(sp[key])[-1])
            self.phi_parts.append((key, w1[:, off:off + n].T))
            off += n
        self.phi_grant, self.phi_release = w1[:, off], w1[:, off + 1]
        self.phi_w2, self.phi_b2 = _np(fe.phi[2].weight).T, _np(fe.phi[2].bias)
        self.rho_w1, self.rho_b1 = _np(fe.rho[0].weight).T, _np(fe.rho[0].bias)
        self.rho_w2, self.rho_b2 = _np(fe.rho[2].weight).T, _np(fe.rho[2].bias)
        self.glob_widths = [(key, int(np.prod(_shape(sp[key])))) for key in self.global_keys]
        self.g_in = np.zeros(2 * d + sum(n for _, n in self.glob_widths) + 1, dtype=np.float32)
        psi1 = _np(fe.psi[0].weight)
        self.psi_x, self.psi_g, self.psi_b1 = psi1[:, :d].T, psi1[:, d:].T, _np(fe.psi[0].bias)
        self.psi_w2, self.psi_b2 = _np(fe.psi[2].weight).T, _np(fe.psi[2].bias)
        head = cast(SlotActionHead, policy.action_net)
        self.grant_w, self.grant_b = _np(head.grant.weight)[0], _np(head.grant.bias)
        self.rel = (_np(head.rel.weight)[0], _np(head.rel.bias)) if head.rel is not None else None
        self.commit_w, self.commit_b = _np(head.commit.weight)[0], _np(head.commit.bias)
        self.n_actions = 2 * k + 1 if self.rel is not None else k + 1

    @staticmethod
    def supports(policy: Any) -> bool:
        """The policy is a :class:`MaskableSetPolicy` whose extractor reads the action mask
        (the window's grant and release bits) with the layers this class mirrors."""
        if not isinstance(policy, MaskableSetPolicy):
            return False
        fe = policy._pi_extractor()
        layers = [fe.phi, fe.rho, fe.psi]
        on_cpu = all(p.device.type == "cpu" and p.dtype == th.float32 for p in policy.parameters())
        return on_cpu and fe.has_mask and all(
            len(s) == 4 and isinstance(s[0], nn.Linear) and isinstance(s[1], nn.ReLU)
            and isinstance(s[2], nn.Linear) and isinstance(s[3], nn.ReLU) for s in layers
        ) and isinstance(policy.action_net, SlotActionHead)

    def logits(self, obs: dict[str, np.ndarray], mask: np.ndarray) -> np.ndarray:
        """The ``n_actions`` logits for one observation (float32 arrays of the space's shapes;
        ``mask``: ``obs["action_mask"]`` as float32, as the extractor reads it)."""
        d, k = self.d, self.k
        jobs = obs["jobs"]
        h = self.phi_b1 + mask[:k, None] * self.phi_grant
        if self.rel is not None:
            h += mask[k:2 * k, None] * self.phi_release
        for key, w in self.phi_parts:
            h += obs[key].reshape(k, -1) @ w
        np.maximum(h, 0.0, out=h)
        x = h @ self.phi_w2
        x += self.phi_b2
        np.maximum(x, 0.0, out=x)
        valid = jobs[:, :1]
        xv = x * valid
        g_in = self.g_in
        np.sum(xv, axis=0, out=g_in[:d])
        g_in[:d] /= max(float(valid.sum()), 1.0)
        xv -= (1.0 - valid) * 1e4
        np.maximum(xv.max(axis=0), 0.0, out=g_in[d:2 * d])
        off = 2 * d
        for key, n in self.glob_widths:
            g_in[off:off + n] = obs[key].reshape(-1)
            off += n
        g_in[off] = mask[-1]
        g = g_in @ self.rho_w1
        g += self.rho_b1
        np.maximum(g, 0.0, out=g)
        g = g @ self.rho_w2
        g += self.rho_b2
        np.maximum(g, 0.0, out=g)
        y = x @ self.psi_x
        y += g @ self.psi_g + self.psi_b1
        np.maximum(y, 0.0, out=y)
        hh = y @ self.psi_w2
        hh += self.psi_b2
        np.maximum(hh, 0.0, out=hh)
        hh *= valid
        out = np.empty(self.n_actions, dtype=np.float32)
        out[:k] = hh @ self.grant_w
        out[:k] += self.grant_b
        if self.rel is not None:
            out[k:2 * k] = hh @ self.rel[0]
            out[k:2 * k] += self.rel[1]
        out[-1] = g @ self.commit_w + self.commit_b[0]
        return out


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

    def _pi_extractor(self) -> JobSetExtractor:
        """The actor's extractor (its own when the extractors are not shared)."""
        return cast(JobSetExtractor, self.pi_features_extractor)

    def numpy_actor(self) -> NumpyActor | None:
        """The actor in numpy for one observation (:class:`NumpyActor`; what
        ``LearnedAgent`` asks a policy for), or None when this policy's layers are not the ones
        it mirrors."""
        return NumpyActor(self) if NumpyActor.supports(self) else None

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
