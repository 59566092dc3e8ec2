"""How far a model is from its demonstrator on the model's own states, and what distillation does.

Collects one rollout of ``--model`` in the training envs of ``--config`` / ``--scenario`` with
teacher labels (``teacher.policy`` of the config), reports the model's argmax agreement with the
labels per kind of label (commit, grant, release) and the label NLL, then runs ``--passes``
distillation steps (``TeacherMaskablePPO._distill``, the config's ``teacher`` settings) and
reports again, with the accuracy on ``--demos`` (the demonstrator's own states) alongside.

    python experiments/03-teacher-in-the-loop/teacher_probe.py --model RUN/warm_start.zip --demos RUN/demos.npz --passes 3
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="a MaskablePPO .zip of the config's network")
    ap.add_argument("--config", default="maskable_ppo_set")
    ap.add_argument("--scenario", default="testbed")
    ap.add_argument("--demos", default=None, help="demonstrations .npz to mix in and to score on")
    ap.add_argument("--demo-share", type=float, default=None)
    ap.add_argument("--lr", type=float, default=None, help="distillation learning rate")
    ap.add_argument("--passes", type=int, default=3, help="distillation calls (each `epochs` passes)")
    a = ap.parse_args(argv)

    import torch as th
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.logger import configure

    from aryl_gym.train.config import load_train_config
    from aryl_gym.train.runner import build_model, make_vec_env

    th.set_num_threads(1)
    cfg = load_train_config(a.config, a.scenario, {"critic_warmup_steps": 0})
    if not cfg.teacher.policy:
        raise SystemExit(f"{a.config} ({a.scenario}) has no teacher.policy")
    model = build_model(cfg, make_vec_env(cfg))
    model.set_parameters(a.model, exact_match=True, device="cpu")
    model.set_logger(configure(None, []))
    model.teacher_kwargs["demos"] = a.demos
    if a.demo_share is not None:
        model.teacher_kwargs["demo_share"] = a.demo_share
    if a.lr is not None:
        model.teacher_kwargs["learning_rate"] = a.lr
    model._setup_learn(10**9, None)
    cb = CallbackList([])
    cb.init_callback(model)
    model.collect_rollouts(model.env, cb, model.rollout_buffer, model.n_steps)
    buf = model.rollout_buffer
    labels = model._teacher_labels.reshape(-1)
    obs = {k: v.reshape(-1, *v.shape[2:]).copy() for k, v in buf.observations.items()}
    masks = buf.action_masks.reshape(-1, buf.action_masks.shape[-1]).astype(bool).copy()
    k = (masks.shape[1] - 1) // 2
    kind = np.where(labels == 2 * k, 0, np.where(labels < k, 1, 2))
    demos = model._demos() if a.demos else None

    def report(tag: str) -> None:
        ot = model.policy.obs_to_tensor(obs)[0]
        with th.no_grad():
            act, _, _ = model.policy(ot, deterministic=True, action_masks=masks)
            _, logp, _ = model.policy.evaluate_actions(ot, th.as_tensor(labels), action_masks=masks)
        hit = act.numpy() == labels
        per = "  ".join(f"{n} {hit[kind == c].mean():.3f} (n={int((kind == c).sum())})"
                        for c, n in enumerate(("commit", "grant", "release")) if (kind == c).any())
        line = f"{tag:>10}: agreement {hit.mean():.3f}  nll {float(-logp.mean()):.3f}  {per}"
        if demos is not None:
            o, d_act, d_mask = demos
            n = min(4096, len(d_act))
            with th.no_grad():
                p, _, _ = model.policy(model.policy.obs_to_tensor({key: v[:n] for key, v in o.items()})[0],
                                       deterministic=True, action_masks=d_mask[:n])
            line += f"  demos {float((p.numpy() == d_act[:n]).mean()):.3f}"
        print(line, flush=True)

    report("before")
    for i in range(a.passes):
        model._distill()
        report(f"pass {i + 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
