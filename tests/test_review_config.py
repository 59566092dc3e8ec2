"""Review of scenario and suite files read as a hostile user would write them: each test failed
before its fix (a traceback, a misleading message, or a silently different scenario)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.fileio import load_yaml_value
from aryl_gym.leaderboard.suites import load_suite
from aryl_gym.scenario import make_episode


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- YAML 1.1 numbers that read unlike what was written --------------------------------------


@pytest.mark.parametrize(
    "line, key, found",
    [
        ("cluster: {train_servers: 010}", "'010' is an octal number", "read as 8"),  # was: 8 servers
        ("workload: {duration_hours: 1:30}", "'1:30' is a base-60 number", "read as 90"),  # was: 90 h
        ("sim: {interval: 1:30.0}", "'1:30.0' is a base-60 number", "read as 90"),
    ],
)
def test_yaml11_octal_and_base60_numbers_are_refused(tmp_path: Path, line: str, key: str, found: str) -> None:
    p = _write(tmp_path / "s.yaml", f"name: x\n{line}\n")
    with pytest.raises(ConfigError) as exc:
        load_scenario(p)
    msg = str(exc.value)
    assert key in msg and found in msg and "quote it" in msg
    assert f'in "{p}", line 2' in msg  # was: in "<unicode string>", line 2


def test_numbers_yaml_reads_as_written_still_load(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.yaml", "name: '010'\ncluster: {train_servers: 07, inf_servers: 0x10}\n"
                                    "workload: {duration_hours: 010.5, num_jobs: 1_000}\n")
    cfg = load_scenario(p)
    assert (cfg.name, cfg.cluster.train_servers, cfg.cluster.inf_servers) == ("010", 7, 16)
    assert (cfg.workload.duration_hours, cfg.workload.num_jobs) == (10.5, 1000)
    with pytest.raises(ConfigError, match="octal"):
        load_yaml_value("010")  # --set KEY=010 (was: 8)


def test_suite_octal_seed_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "suite.yaml", "name: s\nscenarios: [tiny]\nseeds: [010]\npolicies: [baseline]\n")
    with pytest.raises(ConfigError, match=r"'010' is an octal number .*read as 8"):
        load_suite(p)  # was: seed 8


# --- huge values -----------------------------------------------------------------------------


def test_huge_integer_server_count_is_config_error(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.yaml", f"name: x\ncluster: {{train_servers: {10**400}}}\n")
    with pytest.raises(ConfigError, match=r"train_servers .* is a 401-digit number, above the limit"):
        load_scenario(p)  # was: OverflowError (int too large to convert to float)


def test_huge_integer_for_a_number_says_too_large(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.yaml", f"name: x\nworkload: {{load: {10**400}}}\n")
    with pytest.raises(ConfigError, match=r"workload.load is too large to be a number \(an integer of 401"):
        load_scenario(p)  # was: "workload.load must be a number, got 1000..."


@pytest.mark.parametrize(
    "section, change, match",
    [
        ("inference", {"sample_seconds": 1e300}, "inference.sample_seconds 1e.300 is too long"),  # IndexError
        ("inference", {"sample_seconds": 1e-300}, "samples of inference.sample_seconds"),  # numpy ValueError
        ("workload", {"burst_gap_s": 1e300}, "arrivals span .* check workload.burst_gap_s"),  # numpy ValueError
    ],
)
def test_inference_series_too_long_is_config_error(section: str, change: dict, match: str) -> None:
    cfg = load_scenario("tiny").replace(**{section: change})
    with pytest.raises(ConfigError, match=match):
        make_episode(cfg, 0)


def test_prediction_sigma_that_overflows_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"workload.prediction_sigma 1000 is above 100"):
        # was: "job 0 (cnn): work and pred_work must be finite and positive" from the generator
        load_scenario("tiny").replace(workload={"prediction_sigma": 1000.0})


# --- gpu_types -------------------------------------------------------------------------------


def test_partial_override_of_a_builtin_gpu_type_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.yaml", "name: x\ngpu_types: {T4: {memory_gb: 24}}\n")
    with pytest.raises(ConfigError) as exc:
        load_scenario(p)  # was: T4 at default_speed 1.0 (a V100's pace), no per-family speeds
    msg = str(exc.value)
    assert "gpu_types.T4 replaces the built-in GPU type T4" in msg
    assert "default_speed (would be 1.0, the built-in T4's is 0.35)" in msg and "speed (would be {}" in msg
    # a complete entry, or one whose left-out fields equal the built-in's, still loads
    full = _write(tmp_path / "f.yaml", "name: x\ngpu_types: {T4: {memory_gb: 24, default_speed: 0.35, "
                                       "speed: {bert: 0.3}}, V100: {memory_gb: 32}}\n")
    cfg = load_scenario(full)
    assert cfg.gpu_types["T4"].memory_gb == 24.0 and cfg.gpu_types["V100"].default_speed == 1.0


def test_gpu_speed_for_an_unknown_family_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path / "s.yaml", "name: x\ngpu_types: {X: {memory_gb: 16, speed: {bret: 0.3}}}\n")
    with pytest.raises(ConfigError, match=r"gpu_types.X.speed: unknown job family 'bret'"):
        load_scenario(p)  # was: ignored, bert ran at default_speed


# --- suites ----------------------------------------------------------------------------------


def test_optional_scenario_that_exists_but_is_invalid_is_an_error(tmp_path: Path) -> None:
    bad = _write(tmp_path / "broken.yaml", "name: b\ncluster: {train_servrs: 3}\n")
    p = _write(tmp_path / "suite.yaml", f"name: s\nscenarios: [tiny, {{name: '{bad}', optional: true}}, "
                                        "{name: no-such-scenario, optional: true}]\nseeds: [0]\npolicies: [baseline]\n")
    with pytest.raises(ConfigError, match=r"unknown key 'train_servrs' in cluster"):
        load_suite(p)  # was: skipped as "scenario not defined in this checkout"
    ok = _write(tmp_path / "ok.yaml", "name: s\nscenarios: [tiny, {name: no-such-scenario, optional: true}]\n"
                                      "seeds: [0]\npolicies: [baseline]\n")
    assert load_suite(ok).missing_scenarios == ("no-such-scenario",)


# --- relative paths --------------------------------------------------------------------------


def test_inference_csv_beside_the_scenario_gets_a_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    _write(folder / "util.csv", "time,utilization\n0,0.5\n300,0.6\n")
    scen = _write(folder / "s.yaml", "name: x\ninference: {mode: csv, csv: util.csv}\nworkload: {num_jobs: 5}\n")
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("ARYL_GYM_DATA", str(root))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as exc:
        make_episode(str(scen), 0)
    msg = str(exc.value)  # was: only "<data root>/util.csv: not found"
    assert "not from the scenario file's folder" in msg and str((folder / "util.csv").resolve()) in msg
    monkeypatch.chdir(folder)  # from the scenario's folder the same file runs, as before
    assert len(make_episode("s.yaml", 0).utilization) >= 1
