"""Regression tests of a hostile review of the ecosystem integrations (Minari datasets,
TensorBoard logs of the leaderboard). Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

DSID = "aryl_gym/tiny/aryl-v0"


# ---------------------------------------------------------------------------------------------
# Minari datasets (aryl_gym.offline)
# ---------------------------------------------------------------------------------------------
def test_minari_second_writer_of_one_id_leaves_the_first_writers_dataset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two writers of one id: the second found the first one's dataset in its place when it
    wrote, and its clean-up deleted that dataset (both runs' work lost)."""
    minari = pytest.importorskip("minari")
    from aryl_gym import offline

    original = offline.record_episodes
    calls = {"n": 0}

    def record_while_another_writes(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:  # writer B is recording: writer A finishes first
            offline.write_dataset(DSID, "tiny", "aryl", episodes=1, seed=3, author="writer-a")
        return original(*args, **kwargs)

    monkeypatch.setattr(offline, "record_episodes", record_while_another_writes)
    with offline.datasets_path(tmp_path):
        with pytest.raises(ValueError, match="another writer"):
            offline.write_dataset(DSID, "tiny", "aryl", episodes=1, seed=5, author="writer-b")
        ds = minari.load_dataset(DSID)
        assert ds.storage.metadata["author"] == {"writer-a"}
        assert ds.storage.metadata[offline.NAMESPACE]["episode_seeds"] == [3]
        assert ds.total_episodes == 1
    # nothing else is left in the datasets folder (no half-written copy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aryl_gym"]


def test_minari_overwrite_interrupted_keeps_the_old_dataset_and_leaves_no_half_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write stopped after Minari's own files but before the aryl_gym metadata left a dataset
    that read as complete (without its scenario hash, so never checked), and an ``overwrite``
    had already deleted the old one."""
    minari = pytest.importorskip("minari")
    from aryl_gym import offline, provenance

    with offline.datasets_path(tmp_path):
        offline.write_dataset(DSID, "tiny", "aryl", episodes=1, seed=3, author="old")

        def killed(*args: object, **kwargs: object) -> str:
            raise KeyboardInterrupt

        monkeypatch.setattr(provenance, "git_commit", killed)
        with pytest.raises(KeyboardInterrupt):
            offline.write_dataset(DSID, "tiny", "aryl", episodes=2, seed=3, author="new", overwrite=True)
        ds = minari.load_dataset(DSID)
        assert ds.storage.metadata["author"] == {"old"}
        assert ds.total_episodes == 1
        assert ds.storage.metadata[offline.NAMESPACE]["config_hash"]
        assert list(minari.list_local_datasets()) == [DSID]
        # a fresh id interrupted the same way: no dataset at all
        with pytest.raises(KeyboardInterrupt):
            offline.write_dataset("aryl_gym/tiny/aryl-v1", "tiny", "aryl", episodes=1, seed=3)
        assert not offline.dataset_folder("aryl_gym/tiny/aryl-v1").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aryl_gym"]


def test_minari_empty_datasets_path_is_refused_before_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """``MINARI_DATASETS_PATH=''``: taken as unset here (checks on ``~/.minari/datasets``) but as
    set by Minari, which failed on the empty path after every episode was recorded."""
    pytest.importorskip("minari")
    from aryl_gym import offline

    def no_recording(*args: object, **kwargs: object) -> None:
        raise AssertionError("recorded before the datasets folder was checked")

    monkeypatch.setattr(offline, "record_episodes", no_recording)
    monkeypatch.setenv("MINARI_DATASETS_PATH", "")
    with pytest.raises(ValueError, match="MINARI_DATASETS_PATH is set but empty"):
        offline.write_dataset(DSID, "tiny", "aryl", episodes=1, seed=3)


# ---------------------------------------------------------------------------------------------
# the leaderboard's TensorBoard logs (aryl_gym.leaderboard.tb)
# ---------------------------------------------------------------------------------------------
def _tb_setup() -> tuple[object, object]:
    pytest.importorskip("tensorboardX")
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from aryl_gym.leaderboard import Entrant, Suite
    from aryl_gym.leaderboard.results import METRIC_TYPES

    def suite(names: tuple[str, ...]) -> Suite:
        return Suite(name="s", description="", scenarios=("tiny",), seeds=(0,),
                     entrants=tuple(Entrant(name=n) for n in names), baseline=names[0])

    def row(policy: str, **metrics: object) -> dict[str, object]:
        r: dict[str, object] = {k: (0 if t is int else (False if t is bool else 1.0))
                                for k, t in METRIC_TYPES.items()}
        r.update(suite="s", scenario="tiny", scenario_name="tiny", seed=0, policy=policy, avg_jct=1000.0)
        r.update(metrics)
        return r

    return ea, (suite, row)


def _final(ea: object, run: Path, tag: str = "tiny/final/avg_jct") -> list[tuple[int, float]]:
    acc = ea.EventAccumulator(str(run))  # type: ignore[attr-defined]
    acc.Reload()
    if tag not in acc.Tags()["scalars"]:
        return []
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_tensorboard_entrants_whose_names_slug_alike_get_their_own_runs(tmp_path: Path) -> None:
    """Entrants ``fifo`` and ``fifo_`` (both valid names) both wrote into ``tensorboard/fifo``:
    TensorBoard showed one run with two values at one step, and no ``fifo_``."""
    ea, (suite, row) = _tb_setup()  # type: ignore[misc]
    from aryl_gym.leaderboard.tb import write_tensorboard

    root = write_tensorboard(tmp_path, suite(("fifo_", "fifo")),
                             [row("fifo", avg_jct=1000.0), row("fifo_", avg_jct=5.0)], {})
    runs = sorted(p.name for p in root.iterdir())
    assert runs == ["fifo", "fifo-2"]
    assert _final(ea, root / "fifo") == [(0, 1000.0)]
    assert _final(ea, root / "fifo-2") == [(0, 5.0)]


def test_tensorboard_does_not_log_nan_or_infinite_final_figures(tmp_path: Path) -> None:
    """A NaN or infinite figure (no value in the report's tables) was logged as a scalar."""
    ea, (suite, row) = _tb_setup()  # type: ignore[misc]
    from aryl_gym.leaderboard.tb import write_tensorboard

    root = write_tensorboard(tmp_path, suite(("fifo", "aryl")),
                             [row("fifo", avg_jct=float("nan")), row("aryl", avg_jct=float("inf"))], {})
    assert _final(ea, root / "fifo") == []
    assert _final(ea, root / "aryl") == []
    assert _final(ea, root / "fifo", "tiny/final/avg_queue_time") == [(0, 1.0)]
