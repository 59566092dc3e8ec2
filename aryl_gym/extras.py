"""Optional extras: which ``pip install 'aryl-gym[EXTRA]'`` provides a missing module.

A command that needs an extra that is not installed ends with one line naming the extra and
exit status 2 (:func:`aryl_gym.cli.main` reads :func:`missing_extra` off the
``ModuleNotFoundError``), never a traceback.
"""

from __future__ import annotations

import importlib.util

#: top-level module -> the extra that installs it
EXTRA_OF = {
    "torch": "train",
    "stable_baselines3": "train",
    "sb3_contrib": "train",
    "tensorboard": "train",
    "tensorboardX": "train",
    "matplotlib": "plots",
    "rliable": "stats",
    "pandas": "stats",
    "rl_zoo3": "zoo",
    "optuna": "zoo",
    "ray": "ray",
    "pettingzoo": "multiagent",
    "mo_gymnasium": "mo",
    "minari": "offline",
}

#: the modules a learned (stable-baselines3) agent is loaded with
LEARNED_AGENT_MODULES = ("torch", "stable_baselines3", "sb3_contrib")


def install_hint(extra: str) -> str:
    return f"pip install 'aryl-gym[{extra}]'"


def missing_extra(exc: BaseException) -> str | None:
    """The user-facing line for a ``ModuleNotFoundError`` of an optional extra's module, or
    ``None`` when the missing module belongs to no extra (a real bug: let it raise)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.split(".")[0]
    extra = EXTRA_OF.get(top)
    if extra is None:
        return None
    return f"this needs {top}, from the optional '{extra}' extra: {install_hint(extra)}"


def missing_modules(modules: tuple[str, ...] = LEARNED_AGENT_MODULES) -> list[str]:
    """Which of ``modules`` cannot be imported here (no import is done)."""
    out = []
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(m)
    return out


def learned_agents_unavailable() -> str | None:
    """Why learned agents cannot run here (naming the extra), or ``None``."""
    miss = missing_modules()
    if not miss:
        return None
    return f"learned agents need {', '.join(miss)}: {install_hint('train')}"


def rllib_unavailable() -> str | None:
    """Why RLlib training or an RLlib agent cannot run here (naming the ``rllib`` extra), or
    ``None``. Unlike :func:`missing_modules` this imports torch and ``ray.rllib`` when they are
    installed (a half-installed ray[rllib] fails only on import); callers are about to use them."""
    import importlib  # only here: the modules are imported to see that they load

    for mod in ("torch", "ray.rllib"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            return (f"the RLlib backend needs {exc.name or mod} (ray[rllib] and torch): "
                    f"{install_hint('rllib')}")
    return None
