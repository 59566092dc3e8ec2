"""PPO with invalid-action masking for aryl-gym, in one file (CleanRL style).

Everything the algorithm does is in this file: the vector env (``gymnasium.make_vec``), the
network, the rollout, GAE, the clipped PPO update and the TensorBoard logging. It needs torch,
gymnasium, numpy and tensorboard (``pip install 'aryl-gym[train]'``) and imports nothing from
aryl-gym but the package itself, which registers the environments.

Invalid-action masking (Huang and Ontañón, "A Closer Look at Invalid Action Masking in Policy
Gradient Algorithms", FLAIRS 2022): the logits of the actions the env's mask forbids
(``obs["action_mask"] == 0``) are set to a large negative number before the softmax, in the
rollout and in the update, so the policy never samples them and gets no gradient through them.

    python examples/ppo_mask.py --scenario testbed --total-timesteps 200000 --seed 1
    tensorboard --logdir runs/

Writes ``runs/{env}__ppo_mask__{seed}__{unix time}/`` (``--run-name`` sets the last part; as
``aryl-gym train``, it never writes into an earlier run: an existing non-empty run folder is
refused unless ``--overwrite``, which deletes that earlier run's files first):
TensorBoard events (``charts/``, ``losses/``, ``eval/``; the hyperparameters as text),
``model.pt`` (weights and the arguments that made them) and, with ``--eval-seeds``,
``eval.json``: the deterministic policy (masked argmax) on each held-out episode seed
(``reset(options={"episode_seed": s})``, the episode ``aryl-gym evaluate`` plays for that
seed). ``--eval-only MODEL`` evaluates a saved model without training. Same seed, same result:
the run seeds Python, numpy and torch, and torch runs on one thread (``--torch-threads``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

import aryl_gym  # registers the environments; aryl_gym.ConfigError below

#: the logit given to masked actions (exp() of it is 0 in float32)
MASKED_LOGIT = -1e8


def parse_seeds(text: str) -> list[int]:
    """``"2000-2009"`` or ``"1,5,7"`` -> a list of seeds."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        a, sep, b = part.partition("-")
        try:
            lo = int(a)
            hi = int(b) if sep else lo
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad seed list {text!r}: use 2000-2009 or 1,5,7") from None
        if hi < lo or lo < 0:
            raise argparse.ArgumentTypeError(f"bad seed range {part!r}: non-negative, low-high")
        out.extend(range(lo, hi + 1))
    if not out:
        raise argparse.ArgumentTypeError(f"bad seed list {text!r}: no seeds")
    return out


def env_kwargs_arg(text: str) -> dict:
    """``--env-kwargs '{"window": 32}'``: a JSON object of env keyword arguments."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--env-kwargs must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"--env-kwargs must be a JSON object, got {text!r}")
    return value


def positive(kind: type):
    def check(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a {kind.__name__}, got {text!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
        return v
    return check


def in_range(lo: float, hi: float, lo_open: bool = False):
    """A float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); was: ``--gamma -1`` or
    ``--clip-coef 0`` trained without a word on a discount or a clip that makes no sense."""
    def check(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (lo < v if lo_open else lo <= v) or not v <= hi:
            raise argparse.ArgumentTypeError(f"expected a number in {'(' if lo_open else '['}{lo:g}, {hi:g}], "
                                             f"got {text!r}")
        return v
    return check


def seed_arg(text: str) -> int:
    """A seed numpy takes (``np.random.seed``: 0 to 2**32 - 1); was: ``--seed -1`` made the run
    folder, then failed with numpy's traceback."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= v < 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {text!r}")
    return v


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--env-id", default="aryl_gym/Aryl-v2", help="a registered env id")
    p.add_argument("--scenario", default="testbed", help="scenario name or YAML path (env kwarg)")
    p.add_argument("--env-kwargs", type=env_kwargs_arg, default={},
                   help='further env keyword arguments as JSON, e.g. \'{"window": 32, "allow_preempt": true}\'')
    p.add_argument("--total-timesteps", type=positive(int), default=200_000, help="env steps, all envs together")
    p.add_argument("--num-envs", type=positive(int), default=8)
    p.add_argument("--num-steps", type=positive(int), default=256, help="steps per env per rollout")
    p.add_argument("--seed", type=seed_arg, default=1)
    p.add_argument("--learning-rate", type=positive(float), default=3e-4)
    p.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--gamma", type=in_range(0, 1), default=0.995)
    p.add_argument("--gae-lambda", type=in_range(0, 1), default=0.95)
    p.add_argument("--num-minibatches", type=positive(int), default=4)
    p.add_argument("--update-epochs", type=positive(int), default=4)
    p.add_argument("--clip-coef", type=positive(float), default=0.2)
    p.add_argument("--ent-coef", type=in_range(0, float("inf")), default=0.01)
    p.add_argument("--vf-coef", type=in_range(0, float("inf")), default=0.5)
    p.add_argument("--max-grad-norm", type=positive(float), default=0.5)
    p.add_argument("--target-kl", type=positive(float), default=None)
    p.add_argument("--hidden", type=positive(int), default=128, help="width of the two hidden layers")
    p.add_argument("--torch-threads", type=positive(int), default=1)
    p.add_argument("--out-dir", default="runs", help="the run folder goes here")
    p.add_argument("--run-name", default=None, help="default: {env}__ppo_mask__{seed}__{unix time}")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the earlier run in an existing --run-name folder (its events, model.pt "
                        "and eval.json); without it a non-empty run folder is refused")
    p.add_argument("--eval-seeds", type=parse_seeds, default=None,
                   help="after training, play the masked argmax on these episode seeds (e.g. 2000-2009)")
    p.add_argument("--eval-only", default=None, metavar="MODEL",
                   help="evaluate this model.pt on --eval-seeds (its own env arguments) and exit")
    a = p.parse_args(argv)
    a.batch_size = a.num_envs * a.num_steps
    if a.batch_size % a.num_minibatches:
        p.error(f"num_envs x num_steps = {a.batch_size} must divide into --num-minibatches {a.num_minibatches}")
    a.minibatch_size = a.batch_size // a.num_minibatches
    # was: a minibatch of one step normalised its advantage by a std of NaN, and the run died
    # with a traceback of NaN logits after its first update
    if a.minibatch_size < 2:
        p.error(f"num_envs x num_steps / --num-minibatches = {a.batch_size} / {a.num_minibatches} = "
                f"{a.minibatch_size} step per minibatch; the advantage normalisation needs at least 2: "
                "lower --num-minibatches")
    # was: max(1, ...) ran a whole rollout of batch_size steps when fewer were asked
    if a.total_timesteps < a.batch_size and not a.eval_only:
        p.error(f"--total-timesteps {a.total_timesteps} is less than one rollout (num_envs x num_steps = "
                f"{a.batch_size}); raise it, or lower --num-envs / --num-steps")
    a.num_iterations = a.total_timesteps // a.batch_size
    if a.eval_only and not a.eval_seeds:
        p.error("--eval-only needs --eval-seeds")
    if a.eval_only and not Path(a.eval_only).is_file():  # was: torch.load's FileNotFoundError traceback
        p.error(f"--eval-only {a.eval_only}: no such file; give a model.pt that this script saved")
    # was: overridden by --scenario without a word
    if "scenario" in a.env_kwargs:
        p.error("--env-kwargs sets 'scenario'; give the scenario with --scenario instead")
    if a.run_name is not None and not a.eval_only:
        why = check_run_folder(Path(a.out_dir) / a.run_name, a.overwrite)
        if why:
            p.error(f"--run-name {a.run_name}: {why}")
    return a


#: what a run of this script writes in its folder (``--overwrite`` deletes these, nothing else)
RUN_FILES = ("events.out.tfevents.*", "model.pt", "eval.json")


def run_files(run_dir: Path) -> list[Path]:
    """The files of an earlier run of this script in ``run_dir``."""
    return sorted(f for pat in RUN_FILES for f in run_dir.glob(pat) if f.is_file())


def check_run_folder(run_dir: Path, overwrite: bool) -> str | None:
    """Why ``run_dir`` cannot take a new run, or ``None``. As ``aryl-gym train``, which never
    writes into an earlier run's folder: an existing non-empty folder is refused unless
    ``--overwrite``, which replaces an earlier run of this script only (was: the new run's events
    were added to the old run's, and its model.pt and eval.json replaced, without a word)."""
    if run_dir.exists() and not run_dir.is_dir():
        return f"{run_dir} is a file; give another --run-name"
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return None
    if not overwrite:
        return (f"{run_dir} exists and is not empty (an earlier run?); give another --run-name, or pass "
                "--overwrite to replace that run")
    other = sorted({p.name for p in run_dir.iterdir()} - {f.name for f in run_files(run_dir)})
    if other:
        return (f"{run_dir} holds files that are not a run of this script ({', '.join(other[:5])}); "
                "--overwrite replaces only those (events, model.pt, eval.json): give another --run-name")
    return None


# ---------------------------------------------------------------------------------------------
# observations: the Dict observation flattened, keys in sorted order
# ---------------------------------------------------------------------------------------------
def obs_keys(space: gym.spaces.Dict) -> list[str]:
    return sorted(space.spaces)


def flat_obs(obs: dict, keys: list[str], n: int) -> np.ndarray:
    """``(n, features)`` float32 from a batch of Dict observations."""
    return np.concatenate([np.asarray(obs[k], dtype=np.float32).reshape(n, -1) for k in keys], axis=1)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def masked_logits(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, self.actor(x), torch.tensor(MASKED_LOGIT, dtype=torch.float32))

    def get_action_and_value(self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.masked_logits(x, mask))
        if action is None:
            action = probs.sample()
        # masked actions have probability 0 and add nothing to the entropy
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


# ---------------------------------------------------------------------------------------------
# evaluation: the masked argmax on fixed episode seeds
# ---------------------------------------------------------------------------------------------
def evaluate(agent: Agent, env_id: str, env_kwargs: dict, keys: list[str], seeds: list[int]) -> list[dict]:
    env = gym.make(env_id, **env_kwargs)
    rows = []
    for s in seeds:
        obs, _ = env.reset(seed=s, options={"episode_seed": s})
        done = False
        ret, steps, info = 0.0, 0, {}
        while not done:
            x = torch.as_tensor(flat_obs(obs, keys, 1))
            m = torch.as_tensor(np.asarray(obs["action_mask"]).reshape(1, -1) > 0.5)
            with torch.no_grad():
                a = int(agent.masked_logits(x, m).argmax(dim=1)[0])
            obs, r, term, trunc, info = env.step(a)
            ret += float(r)
            steps += 1
            done = term or trunc
        metrics = {k: (None if v is None else float(v)) for k, v in info.get("episode_metrics", {}).items()
                   if v is None or isinstance(v, (int, float, np.integer, np.floating))}
        rows.append({**metrics, "seed": s, "return": ret, "steps": steps})
    env.close()
    return rows


def save_eval(rows: list[dict], path: Path, writer: SummaryWriter | None, step: int) -> None:
    path.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    jct = [r["avg_jct"] for r in rows if r.get("avg_jct") is not None]
    if jct:
        print(f"eval: mean avg JCT (unfinished jobs counted to the end) {np.mean(jct):,.1f} s "
              f"over {len(jct)} seeds -> {path}")
        if writer is not None:
            writer.add_scalar("eval/avg_jct", float(np.mean(jct)), step)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.torch_threads)

    if args.eval_only:
        try:
            ck = torch.load(args.eval_only, map_location="cpu", weights_only=False)
        except Exception as exc:  # was: torch's unpickling traceback for a file that is no model
            raise SystemExit(f"--eval-only {args.eval_only}: not a model.pt this script saved ({exc})") from None
        agent = Agent(ck["obs_dim"], ck["n_actions"], ck["args"]["hidden"])
        agent.load_state_dict(ck["state_dict"])
        rows = evaluate(agent, ck["env_id"], ck["env_kwargs"], ck["obs_keys"], args.eval_seeds)
        save_eval(rows, Path(args.eval_only).with_name("eval.json"), None, 0)
        return 0

    env_kwargs = {"action_mode": "sequential", **args.env_kwargs, "scenario": args.scenario}
    run_name = args.run_name or f"{args.env_id.replace('/', '-')}__ppo_mask__{args.seed}__{int(time.time())}"
    run_dir = Path(args.out_dir) / run_name
    if args.run_name is None:  # two runs in the same second: the second gets NAME-1
        i = 1
        while run_dir.exists():
            run_dir = Path(args.out_dir) / f"{run_name}-{i}"
            i += 1

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    # the envs are made before the run folder: was: an unknown --scenario, --env-id or env keyword
    # left an empty run folder and a traceback
    try:
        # same_step autoreset: the step that ends an episode returns the next episode's first obs
        envs = gym.make_vec(args.env_id, num_envs=args.num_envs, autoreset_mode="same_step", **env_kwargs)
    except (aryl_gym.ConfigError, gym.error.Error, TypeError, ValueError) as exc:
        raise SystemExit(f"cannot make {args.env_id} with {env_kwargs} (--env-id, --scenario, --env-kwargs): "
                         f"{exc}") from None
    space = envs.single_observation_space
    act_space = envs.single_action_space
    if not isinstance(space, gym.spaces.Dict) or "action_mask" not in space.spaces:
        raise SystemExit(f"{args.env_id}: needs a Dict observation with an 'action_mask' key")
    if not isinstance(act_space, gym.spaces.Discrete):
        raise SystemExit(f"{args.env_id}: needs a Discrete action space (action_mode sequential), got {act_space}")
    why = check_run_folder(run_dir, args.overwrite)  # again: another run may have taken it since
    if why:
        envs.close()
        raise SystemExit(f"--run-name {run_name}: {why}")
    for f in run_files(run_dir):  # --overwrite: the earlier run's files go, its folder stays
        f.unlink()
    writer = SummaryWriter(str(run_dir))
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(
        f"|{k}|{v}|" for k, v in sorted(vars(args).items())))
    keys = obs_keys(space)
    n_actions = int(act_space.n)
    next_obs_d, _ = envs.reset(seed=args.seed)
    obs_dim = flat_obs(next_obs_d, keys, args.num_envs).shape[1]
    agent = Agent(obs_dim, n_actions, args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    n, t = args.num_envs, args.num_steps
    obs = torch.zeros((t, n, obs_dim))
    masks = torch.zeros((t, n, n_actions), dtype=torch.bool)
    actions = torch.zeros((t, n), dtype=torch.long)
    logprobs = torch.zeros((t, n))
    rewards = torch.zeros((t, n))
    dones = torch.zeros((t, n))
    values = torch.zeros((t, n))

    global_step = 0
    start = time.time()
    next_obs = torch.as_tensor(flat_obs(next_obs_d, keys, n))
    next_mask = torch.as_tensor(np.asarray(next_obs_d["action_mask"]) > 0.5)
    next_done = torch.zeros(n)
    episodes = 0
    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(t):
            global_step += n
            obs[step], masks[step], dones[step] = next_obs, next_mask, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs, next_mask)
            values[step] = value.flatten()
            actions[step], logprobs[step] = action, logprob
            next_obs_d, reward, term, trunc, info = envs.step(action.numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(flat_obs(next_obs_d, keys, n))
            next_mask = torch.as_tensor(np.asarray(next_obs_d["action_mask"]) > 0.5)
            next_done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32)
            final = info.get("final_info")
            if final is not None and "episode_metrics" in final:  # Gymnasium's vector info layout
                m = final["episode_metrics"]
                for i in np.flatnonzero(final["_episode_metrics"]):
                    episodes += 1
                    for k in ("avg_jct", "avg_queue_time", "combined_usage", "jobs_unfinished"):
                        if k in m and m[k][i] is not None:  # None: no job finished
                            writer.add_scalar(f"charts/{k}", float(m[k][i]), global_step)
                    writer.add_scalar("charts/episodes", episodes, global_step)

        # GAE (an episode end cuts the bootstrap; truncations are treated as ends)
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = torch.zeros(n)
            for s in reversed(range(t)):
                if s == t - 1:
                    nextnonterminal, nextvalues = 1.0 - next_done, next_value
                else:
                    nextnonterminal, nextvalues = 1.0 - dones[s + 1], values[s + 1]
                delta = rewards[s] + args.gamma * nextvalues * nextnonterminal - values[s]
                lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
                advantages[s] = lastgaelam
            returns = advantages + values

        b_obs = obs.reshape(-1, obs_dim)
        b_masks = masks.reshape(-1, n_actions)
        b_actions, b_logprobs = actions.reshape(-1), logprobs.reshape(-1)
        b_adv, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)

        # a generator seeded per iteration: the minibatch order does not depend on torch's state
        order_rng = np.random.default_rng([args.seed, iteration])
        clipfracs = []
        for _epoch in range(args.update_epochs):
            b_inds = order_rng.permutation(args.batch_size)
            for lo in range(0, args.batch_size, args.minibatch_size):
                mb = torch.as_tensor(b_inds[lo:lo + args.minibatch_size])
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_masks[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())
                mb_adv = b_adv[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
                entropy_loss = entropy.mean()
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", float(np.mean(clipfracs)), global_step)
        writer.add_scalar("losses/explained_variance", float(explained_var), global_step)
        sps = int(global_step / max(time.time() - start, 1e-9))
        writer.add_scalar("charts/SPS", sps, global_step)
        print(f"iteration {iteration}/{args.num_iterations}: {global_step} steps, {episodes} episodes, {sps} steps/s",
              flush=True)

    envs.close()
    model_path = run_dir / "model.pt"
    torch.save({"state_dict": agent.state_dict(), "obs_dim": obs_dim, "n_actions": n_actions,
                "obs_keys": keys, "env_id": args.env_id, "env_kwargs": env_kwargs,
                "args": {k: v for k, v in vars(args).items()}, "global_step": global_step}, model_path)
    print(f"saved {model_path}")
    if args.eval_seeds:
        rows = evaluate(agent, args.env_id, env_kwargs, keys, args.eval_seeds)
        save_eval(rows, run_dir / "eval.json", writer, global_step)
    writer.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
