"""Checks from a review of the docs' examples (README.md, docs/*.md), run as a newcomer would run
them. Each one failed on the text or code before the review's fix. Fast: no Ray, no training."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


class _Refused(Exception):
    pass


class _FakeRLlib:
    """Records the paths handed to RLlib's checkpoint calls; refuses a relative one, as pyarrow's
    filesystem does ("URI has empty scheme")."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path: str) -> None:
        self.paths.append(path)
        if not Path(path).is_absolute():
            raise _Refused(f"URI has empty scheme: {path!r}")


def test_rllib_checkpoint_paths_are_absolute(tmp_path, monkeypatch):
    """training.md's `aryl-gym train --backend rllib --config maskable_ppo --scenario tiny` uses
    the default `--out runs/`, a relative folder: every RLlib save/restore got that relative path
    and the run failed at its end with `URI has empty scheme`."""
    from aryl_gym.train import rllib_backend

    monkeypatch.chdir(tmp_path)
    rec = _FakeRLlib()
    assert Path(rllib_backend._rllib_path(Path("runs") / "x" / "checkpoints")).is_absolute()
    rec(rllib_backend._rllib_path(Path("runs/x/checkpoints/rllib_512_steps")))

    class Module:
        def save_to_path(self, path: str) -> None:
            rec(path)
            Path(path).mkdir(parents=True)

    rllib_backend._save_module(Module(), Path("runs/x/module"))
    assert (tmp_path / "runs/x/module").is_dir()
    assert all(Path(p).is_absolute() for p in rec.paths)


def test_rllib_agent_loads_from_a_relative_run_folder(tmp_path, monkeypatch):
    """`--agent NAME=runs/RUN` (docs/leaderboard.md, "Adding an agent"; an RLlib run folder) was
    refused with `ArrowInvalid: URI has empty scheme` when the folder was given relative."""
    from aryl_gym.agents import learned

    import aryl_gym.extras

    run = tmp_path / "runs" / "tiny__rllib_ppo__0__T"
    (run / "module").mkdir(parents=True)
    (run / learned.RLLIB_MARKER).write_text("{}")
    (run / "module" / "class_and_ctor_args.pkl").write_bytes(b"")
    (run / "module" / "module_state.pt").write_bytes(b"")
    monkeypatch.chdir(tmp_path)

    rec = _FakeRLlib()

    class RLModule:
        @staticmethod
        def from_checkpoint(path: str):
            rec(path)
            raise _Refused("stop here: the path is what this test checks")

    fake = types.ModuleType("ray.rllib.core.rl_module.rl_module")
    fake.RLModule = RLModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray.rllib.core.rl_module.rl_module", fake)
    monkeypatch.setattr(aryl_gym.extras, "rllib_unavailable", lambda: None)
    monkeypatch.setattr(learned, "one_torch_thread", lambda: None)
    with pytest.raises(_Refused, match="stop here"):
        learned.load_rllib_agent("runs/tiny__rllib_ppo__0__T")
    assert rec.paths == [str((run / "module").resolve())]


def _text(page: str) -> str:
    return " ".join((ROOT / page).read_text().split())  # line breaks as spaces


def test_training_md_best_model_needs_every_job_finished():
    """training.md's run folder said `best_model.zip` (lowest eval avg JCT); an evaluation that
    left jobs unfinished never makes one, so a short run can have none."""
    from aryl_gym.train.evaluation import is_new_best

    text = _text("docs/training.md")
    assert ("`best_model.zip` (lowest eval avg JCT among the evaluations that finished every job; "
            "absent when none did)") in text
    assert not is_new_best({"avg_jct": 1.0, "jobs_unfinished": 2.0}, float("inf"))
    assert is_new_best({"avg_jct": 1.0, "jobs_unfinished": 0.0}, float("inf"))
    # so `evaluate --agent runs/RUN` falls back to model.zip, as the text now says
    assert "a run folder (its `best_model.zip`, else its `model.zip`)" in text
    src = (ROOT / "agents" / "learned.py").read_text()
    assert 'p / "best_model.zip" if (p / "best_model.zip").exists() else p / "model.zip"' in src


def test_training_md_eval_reference_tags_come_from_shipped_configs():
    """training.md named `eval/baseline_avg_jct` as a tag; the references are `eval.references`,
    and no shipped algorithm config lists `baseline`."""
    import re

    import yaml

    text = _text("docs/training.md")
    i = text.index("* `eval/`: every `eval.freq` steps")
    bullet = text[i:text.index("* `eval/LABEL/`", i)]
    named = set(re.findall(r"`eval/([\w-]+)_avg_jct`", bullet))
    refs: set[str] = set()
    for f in (ROOT / "configs" / "algos").glob("*.yaml"):
        for section in (yaml.safe_load(f.read_text()) or {}).values():
            if isinstance(section, dict) and isinstance(section.get("eval"), dict):
                refs.update(section["eval"].get("references") or [])
    assert named and named <= refs, named - refs


def test_model_md_relevance_default_policies():
    """model.md said `calibrate --relevance` runs by default fifo, fifo-backfill, sjf, aryl, afs,
    gandiva: World v1's list; today's default is `aryl_gym.relevance.DEFAULT_POLICIES`."""
    import re

    from aryl_gym.relevance import DEFAULT_POLICIES

    text = _text("docs/model.md")
    m = re.search(r"today's default is ([\w, -]+?), `--policies`", text)
    assert m is not None
    assert tuple(p.strip() for p in m.group(1).split(",")) == DEFAULT_POLICIES


@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_readme_sb3_vec_env_needs_same_step_autoreset():
    """README's "Using the environment" named `sb3_vec_env` as the adapter of
    `gym.make_vec(...)`; with make_vec's default autoreset mode it is refused."""
    import gymnasium as gym

    import aryl_gym  # noqa: F401
    from aryl_gym.envs.vector import sb3_vec_env

    text = _text("README.md")
    i = text.index("`aryl_gym.envs.vector.sb3_vec_env`")
    assert 'autoreset_mode="same_step"' in text[i:i + 200]
    venv = gym.make_vec("aryl_gym/Aryl-v2", num_envs=2, scenario="tiny")
    with pytest.raises(ValueError, match="same_step"):
        sb3_vec_env(venv)
    venv.close()
    venv = gym.make_vec("aryl_gym/Aryl-v2", num_envs=2, scenario="tiny", autoreset_mode="same_step")
    assert sb3_vec_env(venv).num_envs == 2
    venv.close()
