"""Review of the v11 hostile passes: regressions found in the new checks. Each test failed on the
code before its fix (see the "was:" notes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aryl_gym.config import ConfigError
from aryl_gym.fileio import OWNER_FILE, check_out_folder, claim_folder


def _ppo_mask_run(runs: Path, name: str = "aryl_gym-Aryl-v2__ppo_mask__0__1765150000") -> Path:
    """What ``python examples/ppo_mask.py`` leaves in its default ``--out-dir runs``: a run folder
    with TensorBoard events, model.pt and eval.json, and no owner marker anywhere."""
    run = runs / name
    run.mkdir(parents=True)
    (run / "events.out.tfevents.1765150000.host.1.0").write_bytes(b"\x00")
    (run / "model.pt").write_bytes(b"\x00")
    (run / "eval.json").write_text('{"rows": []}\n')
    return run


def test_train_accepts_runs_holding_a_single_file_ppo_run(tmp_path: Path) -> None:
    # was: `python examples/ppo_mask.py` (docs/training.md), then `aryl-gym train` into the same
    # default runs/ was refused: "--out runs: the folder is not empty (aryl_gym-Aryl-v2__ppo_mask__...)
    # and holds no results of `aryl-gym train`"
    runs = tmp_path / "runs"
    _ppo_mask_run(runs)
    check_out_folder(runs, "train")
    claim_folder(runs, "train")  # what `aryl-gym train --out runs` does before its run folder
    assert (runs / OWNER_FILE).read_text() == "train\n"
    # a run given its own --run-name (experiments/13-single-file-ppo: seed0) and only model.pt
    other = tmp_path / "other"
    (other / "seed0").mkdir(parents=True)
    (other / "seed0" / "model.pt").write_bytes(b"\x00")
    check_out_folder(other, "train")


def test_a_users_folder_is_still_refused_to_train(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "photos").mkdir(parents=True)
    (home / "photos" / "a.jpg").write_bytes(b"\x00")
    (home / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError, match="the folder is not empty"):
        check_out_folder(home, "train")
    # a ppo_mask run is a training run to `train` only: other commands still refuse the folder
    _ppo_mask_run(tmp_path / "runs")
    with pytest.raises(ConfigError, match="the folder is not empty"):
        check_out_folder(tmp_path / "runs", "leaderboard")


@pytest.mark.parametrize("command", ["train", "leaderboard", "reproduce", "seed-study", "calibrate"])
def test_a_folder_holding_only_placeholders_counts_as_empty(tmp_path: Path, command: str) -> None:
    # was: `--out runs` of a project scaffold holding only runs/.gitkeep (or a .gitignore keeping
    # results out of git, a Finder .DS_Store) was refused: "the folder is not empty (.gitkeep)"
    out = tmp_path / "out"
    out.mkdir()
    for name in (".gitkeep", ".gitignore", ".DS_Store"):
        (out / name).write_text("*\n" if name == ".gitignore" else "")
    check_out_folder(out, command)
    (out / "notes.txt").write_text("mine\n")  # a file of the user's beside them: still refused
    with pytest.raises(ConfigError, match=r"the folder is not empty \(notes.txt\)"):
        check_out_folder(out, command)
    (out / "notes.txt").unlink()
    (out / ".gitkeep").unlink()
    (out / ".gitkeep").mkdir()  # a folder of that name is no placeholder
    with pytest.raises(ConfigError, match="not empty"):
        check_out_folder(out, command)


def test_stable_set_text_keeps_int_sets_as_they_were() -> None:
    # int sets iterate by value, so their text (and the config hashes made from it) was already
    # reproducible: sorting them by their text ("10" < "9") changed those hashes once for nothing
    from aryl_gym.provenance import _stable_str

    for s in ({9, 10}, {3, 1, 2}, {0, 5, 7}, {1, 2.5}):
        assert _stable_str(s) == str(s)
    assert _stable_str({"b", "a", "c"}) == "{'a', 'b', 'c'}"  # strings: sorted, whatever the hash seed
    assert _stable_str({1, "a"}) == "{'a', 1}"  # mixed: by text


def test_a_users_own_results_csv_does_not_make_their_folder_a_leaderboards(tmp_path: Path) -> None:
    from aryl_gym.config import ConfigError
    from aryl_gym.fileio import check_out_folder

    user = tmp_path / "mine"
    user.mkdir()
    (user / "results.csv").write_text("experiment,score\na,1\n")
    with pytest.raises(ConfigError, match="holds no results of `aryl-gym leaderboard`"):
        check_out_folder(user, "leaderboard")
    assert (user / "results.csv").read_text() == "experiment,score\na,1\n"
    ours = tmp_path / "old-run"  # a leaderboard folder of a version before owner markers
    ours.mkdir()
    (ours / "results.csv").write_text("suite,scenario,scenario_name\n")
    check_out_folder(ours, "leaderboard")
    killed = tmp_path / "killed"  # a run killed before its header was written
    killed.mkdir()
    (killed / "results.csv").write_text("")
    check_out_folder(killed, "seed-study")
