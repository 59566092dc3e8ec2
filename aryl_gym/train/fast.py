"""Training throughput: a lighter vector env and a masked policy without distribution objects.

Profiling MaskablePPO on ``testbed`` (``aryl-gym bench``, section ``train``) showed where the
time outside the env goes, per env step: the policy's forward pass through sb3-contrib's masked
``Categorical`` (three distribution objects per call, their argument checks and ``logsumexp``),
``DummyVecEnv``'s ``deepcopy`` of every info dict, and the action masks fetched again through
``env_method`` although the observation already carries them. This module removes those hops
without changing what is computed:

* :class:`ArylVecEnv` -- a ``DummyVecEnv`` that hands out the infos without a deep copy (the env
  builds a fresh info dict each step) and answers ``env_method("action_masks")`` from the
  observation buffer's ``action_mask`` (the env's own mask at that state). It also resets
  *paired groups* (:class:`PairedSeeds`): envs of one group play the same episode seeds, so a
  batch holds several rollouts of one arrival sequence (input-driven variance reduction,
  :mod:`aryl_gym.train.paired`). With ``teacher=`` it labels every state with a reference
  policy's action there (``info["teacher_action"]``, :mod:`aryl_gym.train.teacher`).
* :class:`FastMaskableMixin` / :class:`FastMaskablePolicy` -- ``forward`` computes the masked
  log-softmax once, samples with ``torch.multinomial`` (or the argmax when deterministic) and
  gathers the log-probability: the same distribution as sb3-contrib's (masked logits at -1e8,
  normalised), a fraction of the Python overhead. Training updates (``evaluate_actions``) are
  sb3-contrib's own.
* :func:`fast_predictor` -- an SB3-style ``predict`` for evaluation that uses the direct masked
  argmax of :class:`aryl_gym.agents.learned.LearnedAgent`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import (
    MaskableActorCriticPolicy,
    MaskableMultiInputActorCriticPolicy,
)
from stable_baselines3.common.vec_env import DummyVecEnv

from aryl_gym.agents.learned import LearnedAgent
from aryl_gym.train.teacher import TeacherLabeler

HUGE_NEG = -1e8  # sb3-contrib's masked logit


class PairedSeeds:
    """Episode seeds for paired groups: env ``i`` is in group ``i // group_size``; the ``n``-th
    episode of every env of group ``g`` uses the same seed, drawn once per ``(g, n // repeats)``
    from a generator seeded with ``seed`` (so the whole schedule is reproducible). With
    ``repeats`` > 1 each member plays every trace that many times in a row, so later runs on a
    trace find the group's earlier runs in their baseline (:mod:`aryl_gym.train.paired`)."""

    def __init__(self, n_envs: int, group_size: int, seed: int = 0, repeats: int = 1):
        if group_size < 1 or n_envs % group_size:
            raise ValueError(
                f"paired groups: n_envs ({n_envs}) must be a multiple of the group size ({group_size})"
            )
        if repeats < 1:
            raise ValueError(f"paired groups: repeats must be >= 1, got {repeats}")
        self.n_envs = n_envs
        self.repeats = int(repeats)
        self.group_size = group_size
        self.seed = int(seed)
        self._seeds: dict[tuple[int, int], int] = {}
        self.episode = [0] * n_envs

    def group(self, env_idx: int) -> int:
        return env_idx // self.group_size

    def seed_for(self, group: int, n: int) -> int:
        key = (group, n)
        s = self._seeds.get(key)
        if s is None:
            ss = np.random.SeedSequence([self.seed, 0x5EED, group, n])
            s = self._seeds[key] = int(ss.generate_state(1, np.uint64)[0] >> np.uint64(2))
            if len(self._seeds) > 4 * self.n_envs + 64:  # forget the oldest entries
                for k in sorted(self._seeds, key=lambda k: k[1])[: len(self._seeds) // 2]:
                    if k != key:
                        del self._seeds[k]
        return s

    def next_seed(self, env_idx: int) -> int:
        """The seed of the next episode of ``env_idx`` (advances its episode counter)."""
        n = self.episode[env_idx]
        self.episode[env_idx] = n + 1
        return self.seed_for(self.group(env_idx), n // self.repeats)


class ArylVecEnv(DummyVecEnv):
    """``DummyVecEnv`` with fewer copies, masks from the observation and paired-group resets."""

    def __init__(self, env_fns: Sequence[Any], paired: PairedSeeds | None = None, teacher: str | None = None):
        super().__init__(list(env_fns))
        self.paired = paired
        self.labelers: list[Any] | None = None
        if teacher:  # info["teacher_action"]: the demonstrator's action at each step's state

            self.labelers = [TeacherLabeler(teacher, e) for e in self.envs]
        self._has_mask = isinstance(self.buf_obs, dict) and "action_mask" in self.buf_obs

    def _reset_one(self, env_idx: int, seed: int | None = None) -> Any:
        opts = dict(self._options[env_idx] or {})
        if self.paired is not None:
            opts["episode_seed"] = self.paired.next_seed(env_idx)
        kw: dict[str, Any] = {}
        if seed is not None:
            kw["seed"] = seed
        if opts:
            kw["options"] = opts
        obs, self.reset_infos[env_idx] = self.envs[env_idx].reset(**kw)
        return obs

    def step_wait(self):
        labelers = self.labelers
        for env_idx in range(self.num_envs):
            label = labelers[env_idx].label() if labelers is not None else None
            obs, self.buf_rews[env_idx], terminated, truncated, info = self.envs[env_idx].step(
                self.actions[env_idx]
            )
            if label is not None:
                info["teacher_action"] = label
            self.buf_dones[env_idx] = terminated or truncated
            info["TimeLimit.truncated"] = truncated and not terminated
            if self.buf_dones[env_idx]:
                info["terminal_observation"] = obs
                obs = self._reset_one(env_idx)
            self.buf_infos[env_idx] = info
            self._save_obs(env_idx, obs)
        # a fresh list of the envs' own (fresh) info dicts: no deep copy needed
        return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), list(self.buf_infos)

    def reset(self):
        for env_idx in range(self.num_envs):
            obs = self._reset_one(env_idx, self._seeds[env_idx])
            self._save_obs(env_idx, obs)
        self._reset_seeds()
        self._reset_options()
        return self._obs_from_buf()

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any):
        if method_name == "action_masks" and self._has_mask and not method_args and not method_kwargs:
            idx = list(self._get_indices(indices))
            return list(self.buf_obs["action_mask"][idx] > 0.5)
        return super().env_method(method_name, *method_args, indices=indices, **method_kwargs)


class FastMaskableMixin:
    """A ``forward`` for masked categorical policies over ``Discrete`` actions (see the module
    docstring); any other action space falls back to sb3-contrib's."""

    def forward(self, obs: th.Tensor, deterministic: bool = False, action_masks: np.ndarray | None = None):
        if not isinstance(self.action_space, spaces.Discrete):  # type: ignore[attr-defined]
            return super().forward(obs, deterministic, action_masks)  # type: ignore[misc]
        features = self.extract_features(obs)  # type: ignore[attr-defined]
        if self.share_features_extractor:  # type: ignore[attr-defined]
            latent_pi, latent_vf = self.mlp_extractor(features)  # type: ignore[attr-defined]
        else:
            pi_features, vf_features = features
            latent_pi = self.mlp_extractor.forward_actor(pi_features)  # type: ignore[attr-defined]
            latent_vf = self.mlp_extractor.forward_critic(vf_features)  # type: ignore[attr-defined]
        values = self.value_net(latent_vf)  # type: ignore[attr-defined]
        logits = self.action_net(latent_pi)  # type: ignore[attr-defined]
        logp = logits - logits.logsumexp(dim=-1, keepdim=True)
        if action_masks is not None:
            m = th.as_tensor(np.asarray(action_masks), dtype=th.bool, device=logits.device)
            logp = th.where(m.reshape(logp.shape), logp, th.tensor(HUGE_NEG, dtype=logp.dtype))
            logp = logp - logp.logsumexp(dim=-1, keepdim=True)
        if deterministic:
            actions = th.argmax(logp, dim=1)
        else:
            actions = th.multinomial(logp.exp(), 1).squeeze(1)
        log_prob = logp.gather(1, actions.unsqueeze(1)).squeeze(1)
        return actions, values, log_prob


class FastMaskablePolicy(FastMaskableMixin, MaskableActorCriticPolicy):
    """``MaskableActorCriticPolicy`` with :class:`FastMaskableMixin`'s forward (Box observations)."""


class FastMaskableMultiInputPolicy(FastMaskableMixin, MaskableMultiInputActorCriticPolicy):
    """``MaskableMultiInputActorCriticPolicy`` (Dict observations) with the fast forward."""


class _FastPredict:
    """``predict(obs, action_masks=..., deterministic=True)`` through a direct masked argmax."""

    def __init__(self, model: Any):
        self.model = model
        self._agent = LearnedAgent(name="eval", model=model, config={}, masked=True)
        # any masked actor-critic over Discrete actions (also this module's policy classes)
        self._agent._fast = isinstance(model.policy, MaskableActorCriticPolicy) and isinstance(
            model.action_space, spaces.Discrete
        )

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True, action_masks: np.ndarray | None = None):
        if deterministic and action_masks is not None and self._agent._fast_ok():
            return self._agent.masked_argmax(observation, action_masks), state
        return self.model.predict(observation, state=state, episode_start=episode_start,
                                  deterministic=deterministic, action_masks=action_masks)


def fast_predictor(model: Any) -> Any:
    """An object with ``predict`` for :func:`aryl_gym.train.evaluation.run_agent_batch`: the
    direct masked argmax for masked Discrete policies, else the model itself."""
    # sb3-contrib (the train extra, torch): imported when used
    from sb3_contrib import MaskablePPO

    return _FastPredict(model) if isinstance(model, MaskablePPO) else model
