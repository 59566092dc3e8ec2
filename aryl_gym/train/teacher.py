"""A demonstrator in the loop: on-policy distillation alongside PPO (kickstarting).

Behaviour cloning trains the student on the *demonstrator's* states; once the student acts, it
visits states the demonstrator never produced and its small errors compound (the DAgger argument,
Ross et al., AISTATS '11). Kickstarting (Schmitt et al., 2018, "Kickstarting Deep Reinforcement
Learning") keeps the demonstrator in the loop during RL: every state the *student* visits is
labelled with the demonstrator's action there, and the RL loss gets an auxiliary cross-entropy
towards those labels whose weight decays, so the student first closes its imitation gap on its own
state distribution and the reward then takes over.

Here:

* :class:`TeacherLabeler` -- the demonstrator's next action in the ``sequential`` action mode at
  the env's *current* sub-step, whatever the student granted or released before it in this round:
  the reference policy decides once per decision point on the simulator's full state (as in
  :class:`~aryl_gym.envs.predict.HeuristicPredictor`), and the label is the first step still
  missing towards that decision (releases in job order first, then grants in the engine's
  placement order), or commit. Played on its own it reproduces the policy's native episode.
* :class:`ArylVecEnv <aryl_gym.train.fast.ArylVecEnv>` with ``teacher=`` writes each state's label
  into ``info["teacher_action"]`` of the step taken from it.
* :class:`TeacherMaskablePPO` -- ``MaskablePPO`` that stores those labels next to the rollout
  buffer and, after each PPO update, takes ``epochs`` passes of masked cross-entropy towards them
  with its own Adam optimiser, step size ``learning_rate * coef``; the weight ``coef`` decays
  linearly to 0 over ``decay_steps`` env steps when that is > 0 (Adam ignores a loss's scale, so
  the weight scales the step). Saved models are plain ``MaskablePPO`` zips.

Configured by the ``teacher:`` section of a training config (:class:`~aryl_gym.train.config.
TeacherConfig`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO

from aryl_gym.envs.predict import HeuristicPredictor
from aryl_gym.sim.jobs import JobState
from aryl_gym.train.bc import load_demos

NO_LABEL = -1


class TeacherLabeler(HeuristicPredictor):
    """The reference policy ``policy``'s next ``sequential`` action at ``env``'s current state.

    The env keeps its own reclaim rule (only the allocation is labelled)."""

    def __init__(self, policy: Any, env: Any):
        super().__init__(policy, env, use_policy_reclaim=False)
        if getattr(self.env, "action_mode", "sequential") != "sequential":
            raise ValueError(
                f"teacher labels need action_mode: sequential (the env has {self.env.action_mode!r})"
            )
        self._targets: dict[int, int] = {}
        self._grow_key: dict[int, tuple[int, int, int]] = {}

    def _plan(self) -> None:
        sim = self.env.sim
        eff, order = self._decide()
        cur = sim.workers
        self._targets = {int(j): int(t) for j, t in eff.items()}
        prio = {int(j): i for i, j in enumerate(order)}
        self._grow_key = {
            j: (-int(sim.g[j]), prio.get(j, len(prio)), j) for j, t in self._targets.items() if t > int(cur[j])
        }

    def label(self) -> int:
        """The demonstrator's action at this sub-step (an index of the env's action space)."""
        self._sync()
        env = self.env
        if env.decision_point != self._point:
            self._point = env.decision_point
            self._plan()
        sim = env.sim
        codec = env.codec
        tent = codec.tent
        mask = env.action_masks()
        k = env.k
        targets = self._targets
        slots = [(int(j), i) for i, j in enumerate(env.window)]
        # releases (and preemptions) first, in job order
        for j, i in sorted(slots) if codec.release else ():
            t = targets.get(j)
            if t is not None and int(tent[i]) > t and mask[k + i]:
                return k + i
        # then grants, in the engine's placement order
        grow = sorted((self._grow_key[j], i) for j, i in slots if j in self._grow_key)
        for _key, i in grow:
            j = int(env.window[i])
            t = targets[j]
            have = int(tent[i])
            if sim.state[j] == JobState.QUEUED and have == 0 and t > 0 and mask[i]:
                return i
            if 0 < have < t and mask[i]:
                return i
        return int(codec.commit)


class TeacherMaskablePPO(MaskablePPO):
    """``MaskablePPO`` plus on-policy distillation towards ``info["teacher_action"]`` labels
    (see the module docstring). ``teacher_kwargs``: ``coef``, ``epochs``, ``learning_rate``,
    ``batch_size``, ``decay_steps``, ``demos`` (an ``.npz`` path), ``demo_share``."""

    def __init__(self, *args: Any, teacher_kwargs: dict[str, Any] | None = None, **kwargs: Any):
        self.teacher_kwargs = dict(teacher_kwargs or {})
        self._teacher_labels: np.ndarray | None = None
        self._teacher_opt: th.optim.Optimizer | None = None
        self._teacher_demos: tuple[Any, np.ndarray, np.ndarray] | None = None
        super().__init__(*args, **kwargs)

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_teacher_labels", "_teacher_opt", "_teacher_demos"]

    # -- labels ------------------------------------------------------------------------------
    def _update_info_buffer(self, infos: list[dict[str, Any]], dones: np.ndarray | None = None) -> None:
        # called by collect_rollouts right after env.step and before rollout_buffer.add, so the
        # buffer's ``pos`` is the row of the states these labels belong to
        super()._update_info_buffer(infos, dones)
        buf = getattr(self, "rollout_buffer", None)
        if buf is None or buf.full:
            return
        if self._teacher_labels is None or self._teacher_labels.shape != (buf.buffer_size, buf.n_envs):
            self._teacher_labels = np.full((buf.buffer_size, buf.n_envs), NO_LABEL, dtype=np.int64)
        if buf.pos == 0:
            self._teacher_labels.fill(NO_LABEL)
        self._teacher_labels[buf.pos] = [int(i.get("teacher_action", NO_LABEL)) for i in infos]

    def teacher_coef(self) -> float:
        """The distillation weight now (linear decay over ``decay_steps`` env steps)."""
        coef = float(self.teacher_kwargs.get("coef", 1.0))
        decay = int(self.teacher_kwargs.get("decay_steps", 0))
        if decay > 0:
            coef *= max(0.0, 1.0 - self.num_timesteps / decay)
        return coef

    # -- updates -----------------------------------------------------------------------------
    def train(self) -> None:
        super().train()
        self._distill()

    def _distill(self) -> None:
        coef = self.teacher_coef()
        self.logger.record("teacher/coef", coef)
        labels = self._teacher_labels
        if coef <= 0 and int(self.teacher_kwargs.get("decay_steps", 0)) > 0:
            self._stop_labelling()  # the weight stays 0 from here on: labels would go unused
        if coef <= 0 or labels is None:
            return
        buf = self.rollout_buffer
        if buf.generator_ready:  # PPO's update flattened the buffer env-major (swap_and_flatten)
            flat = labels.swapaxes(0, 1).reshape(-1)
        else:
            flat = labels.reshape(-1)
        idx = np.flatnonzero(flat != NO_LABEL)
        if not len(idx):
            return
        # Adam is invariant to the loss's scale, so the weight scales the step size instead
        lr = float(self.teacher_kwargs.get("learning_rate", 1e-4)) * coef
        if self._teacher_opt is None:
            self._teacher_opt = th.optim.Adam(self.policy.parameters(), lr=lr)
        for group in self._teacher_opt.param_groups:
            group["lr"] = lr

        def rows(a: np.ndarray) -> np.ndarray:
            if buf.generator_ready:
                return a
            return a.reshape(-1, *a.shape[2:])  # (step, env) order, as ``flat``

        obs = {k: rows(v) for k, v in buf.observations.items()} if isinstance(buf.observations, dict) else rows(buf.observations)
        masks = rows(buf.action_masks).astype(bool)
        rng = np.random.default_rng(self.num_timesteps)
        # a critic warm-up freezes the actor against the RL loss only: distillation trains it
        frozen = [p for p in self.policy.parameters() if not p.requires_grad]
        for p in frozen:
            p.requires_grad_(True)
        try:
            self._distill_passes(obs, masks, flat, idx, rng)
        finally:
            for p in frozen:
                p.requires_grad_(False)

    def _stop_labelling(self) -> None:
        """Switch off the vector env's labellers (each label costs a reference decision)."""
        venv = self.env
        while venv is not None and not hasattr(venv, "labelers"):
            venv = getattr(venv, "venv", None)  # through VecEnv wrappers
        if venv is not None and venv.labelers is not None:
            venv.labelers = None
            self.logger.record("teacher/labelling", 0)

    def _demos(self) -> tuple[Any, np.ndarray, np.ndarray] | None:
        """The demonstrations mixed into distillation batches (``demos`` path, loaded once)."""
        path = self.teacher_kwargs.get("demos")
        if not path or float(self.teacher_kwargs.get("demo_share", 0.0)) <= 0:
            return None
        if self._teacher_demos is None:
            obs, actions, masks = load_demos(path)
            if masks is None:
                raise ValueError(f"teacher demos {path}: the file has no action masks")
            keys = getattr(self.observation_space, "spaces", None)
            if isinstance(obs, dict) and keys is not None:
                obs = {k: obs[k] for k in keys}
            self._teacher_demos = (obs, np.asarray(actions).reshape(-1).astype(np.int64), masks)
        return self._teacher_demos

    def _distill_passes(self, obs: Any, masks: np.ndarray, flat: np.ndarray, idx: np.ndarray,
                        rng: np.random.Generator) -> None:
        assert self._teacher_opt is not None
        bs = int(self.teacher_kwargs.get("batch_size") or self.batch_size or 64)
        epochs = int(self.teacher_kwargs.get("epochs", 1))
        demos = self._demos()
        n_demo = int(round(bs * float(self.teacher_kwargs.get("demo_share", 0.0)))) if demos else 0
        n_demo = min(n_demo, bs - 1) if bs > 1 else 0  # at least one of the agent's states per batch
        self.policy.set_training_mode(True)
        losses: list[float] = []
        agree: list[float] = []
        for _ in range(epochs):
            order = idx[rng.permutation(len(idx))]
            for s in range(0, len(order), bs - n_demo):
                b = order[s : s + bs - n_demo]
                o = {k: v[b] for k, v in obs.items()} if isinstance(obs, dict) else obs[b]
                act, m = flat[b], masks[b]
                if demos is not None and n_demo > 0:
                    # DAgger's aggregate: part of each batch from the demonstrator's own states
                    d = rng.integers(0, len(demos[1]), n_demo)
                    do, da, dm = demos
                    if isinstance(o, dict):
                        o = {k: np.concatenate([v, do[k][d]]) for k, v in o.items()}
                    else:
                        o = np.concatenate([o, do[d]])
                    act = np.concatenate([act, da[d]])
                    m = np.concatenate([m, dm[d]])
                ot = self.policy.obs_to_tensor(o)[0]
                at = th.as_tensor(act, device=self.device)
                _, logp, _ = self.policy.evaluate_actions(ot, at, action_masks=m)  # type: ignore[arg-type]
                loss = -logp.mean()
                self._teacher_opt.zero_grad()
                loss.backward()
                th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self._teacher_opt.step()
                losses.append(float(loss.detach()))
                agree.append(float((logp.detach() > np.log(0.5)).float().mean()))
        self.policy.set_training_mode(False)
        self.logger.record("teacher/nll", float(np.mean(losses)) if losses else float("nan"))
        self.logger.record("teacher/p_label_gt_half", float(np.mean(agree)) if agree else float("nan"))
        self.logger.record("teacher/labels", len(idx))
        self.logger.record("teacher/demo_rows", n_demo)  # per batch, from the demonstrations
