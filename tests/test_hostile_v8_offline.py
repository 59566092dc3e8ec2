"""Hostile-user pass (v8) over ``aryl-gym demos --format minari``, reading Minari datasets back
(:mod:`aryl_gym.offline`) and ``examples/ppo_mask.py``'s arguments: each case failed before its
fix (see the "was:" comments)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "ppo_mask.py"


def _script() -> ModuleType:
    pytest.importorskip("torch")
    pytest.importorskip("tensorboard")
    spec = importlib.util.spec_from_file_location("ppo_mask_example_v8", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SMALL = ["--scenario", "tiny", "--num-envs", "1", "--num-steps", "8", "--num-minibatches", "2",
         "--total-timesteps", "8"]


@pytest.mark.parametrize("extra, says", [
    # was: a minibatch of one step: NaN advantages, then a traceback of NaN logits
    (["--num-steps", "4", "--num-minibatches", "4", "--total-timesteps", "4"], "at least 2"),
    # was: ran a whole rollout of 8 steps when 4 were asked
    (["--total-timesteps", "4"], "less than one rollout"),
    (["--gamma", "-1"], "--gamma"),  # was: trained on it
    (["--clip-coef", "0"], "--clip-coef"),
    (["--seed", "-1"], "--seed"),  # was: numpy's traceback after the run folder was made
    (["--env-kwargs", '{"scenario": "basic"}'], "--scenario instead"),  # was: overridden silently
    (["--eval-only", "no-such.pt", "--eval-seeds", "1"], "no such file"),  # was: torch's traceback
])
def test_ppo_mask_bad_arguments_are_one_line_errors(extra: list[str], says: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    m = _script()
    with pytest.raises(SystemExit) as e:
        m.parse_args([*SMALL, *extra])
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_ppo_mask_good_small_arguments_parse() -> None:
    a = _script().parse_args(SMALL)
    assert a.num_iterations == 1 and a.minibatch_size == 4


@pytest.mark.parametrize("extra, says", [
    (["--scenario", "nope"], "unknown scenario 'nope'"),
    (["--env-kwargs", '{"bogus": 1}'], "unknown env option 'bogus'"),
])
def test_ppo_mask_unknown_scenario_fails_before_the_run_folder(extra: list[str], says: str,
                                                               tmp_path: Path) -> None:
    """was: a traceback, and an empty run folder left behind."""
    m = _script()
    with pytest.raises(SystemExit) as e:
        m.main([*SMALL, *extra, "--out-dir", str(tmp_path), "--run-name", "r"])
    assert says in str(e.value.code)
    assert not (tmp_path / "r").exists()


@pytest.fixture
def minari_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pytest.importorskip("minari")
    root = tmp_path / "minari"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root


def test_minari_overwrite_json_is_only_json(minari_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """was: minari's "Dataset ... deleted!" printed on stdout before the JSON."""
    argv = ["demos", "--scenario", "tiny", "--format", "minari", "--dataset-id", "tt/a-v0", "--json"]
    assert _run(argv, capsys)[0] == 0
    rc, out, _ = _run([*argv, "--overwrite"], capsys)
    assert rc == 0 and json.loads(out)["dataset_id"] == "tt/a-v0"


def test_minari_root_that_is_a_file_is_refused_before_recording(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """was: every episode recorded, then Minari's "File exists"."""
    pytest.importorskip("minari")
    import aryl_gym.offline as offline

    def no_record(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("episodes recorded")

    monkeypatch.setattr(offline, "record_episodes", no_record)
    (tmp_path / "afile").write_text("x")
    rc, _, err = _run(["demos", "--scenario", "tiny", "--format", "minari", "--dataset-id", "tt/a-v0",
                       "--minari-path", str(tmp_path / "afile")], capsys)
    assert rc == 2 and "is not a folder" in err and "--minari-path" in err


def test_damaged_minari_datasets_say_so(minari_root: Path) -> None:
    """was: "not found ... record one" for a broken metadata file, and a bare path or pyarrow's
    "Not an Arrow file" for a missing or cut episode."""
    from aryl_gym.offline import load_minari_demos, write_dataset

    write_dataset("tt/a-v0", "tiny", "aryl", 2, 0)
    good = minari_root / "tt" / "a-v0"
    for case in ("meta", "gone", "cut"):
        bad = minari_root / "tt" / f"{case}-v0"
        shutil.copytree(good, bad)
        md = bad / "data" / "metadata.json"
        md.write_text(md.read_text().replace("tt/a-v0", f"tt/{case}-v0"))
        if case == "meta":
            md.write_text('{"dataset_id": ')
        elif case == "gone":
            shutil.rmtree(bad / "data" / "1")
        else:
            arrow = next((bad / "data" / "0").glob("*.arrow"))
            arrow.write_bytes(arrow.read_bytes()[:100])
        with pytest.raises(ValueError, match=rf"Minari dataset tt/{case}-v0 .* is damaged.*record it again"):
            load_minari_demos(f"minari:tt/{case}-v0")
    assert len(load_minari_demos("minari:tt/a-v0")["actions"]) > 0
