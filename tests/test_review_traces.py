"""Regression tests from a hostile review of the trace loaders: malformed files and options must
give a clear error (file, line, column, fix), never a traceback or a silently wrong workload."""

from __future__ import annotations

import json

import numpy as np
import pytest

from aryl_gym.config import ConfigError
from aryl_gym.workload.paths import default_data_root
from aryl_gym.workload.traces import load_trace

ROOT = default_data_root()
PROFILES = ROOT / "traces" / "pollux-philly" / "traces" if ROOT is not None else None
HAVE_PROFILES = PROFILES is not None and PROFILES.is_dir()
needs_profiles = pytest.mark.skipif(not HAVE_PROFILES, reason="real traces absent: set ARYL_GYM_DATA to the "
                                    "folder holding traces/pollux-philly (Pollux profiles, read-only shared data)")

PHILLY_H = "timestamp,duration,num_gpus,gpu_time,cluster\n"
POLLUX_H = "name,time,application,num_replicas,batch_size\n"
CSV_MAP = {"columns": {"submit": "t", "gpus": "g", "duration": "d"}}
RESNET = "ResNet-50 (batch size 64)"


def _gavel_row(steps: str = "1000", t: str = "0", sf: str = "1") -> str:
    return "\t".join([RESNET, "cmd", "-n", "1", steps, t, sf]) + "\n"


def _tput(tmp_path, value: str = "4.0") -> str:
    p = tmp_path / "simulation_throughputs.json"
    key = f"('{RESNET}', 1)"
    p.write_text('{"v100": {' + json.dumps(key) + ': {"null": ' + value + "}}}")
    return str(p)


def test_header_without_line_break_is_no_data_rows(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d")  # was: "cannot be parsed as CSV (Could not skip initial 1 rows ...)"
    with pytest.raises(ConfigError, match="no data rows"):
        load_trace(p, "csv", map=CSV_MAP)


def test_cr_only_line_breaks_load_with_line_numbers(tmp_path):
    p = tmp_path / "philly.csv"
    rows = PHILLY_H + "2017-10-01 00:00:00,100,2,200,vc1\n2017-10-01 00:01:00,50,1,50,vc1\n"
    p.write_bytes(rows.replace("\n", "\r").encode())  # was: _csv.Error traceback
    jobs, _ = load_trace(p, "philly")
    assert [j.extra["trace_line"] for j in jobs] == [2, 3]
    p.write_bytes(rows.replace(",50,1,50", ",0,1,0").replace("\n", "\r").encode())
    with pytest.raises(ConfigError, match=r"philly.csv:3: column 'duration'"):
        load_trace(p, "philly")


@pytest.mark.parametrize("value", ["1e30", "9223372036854775807", "1e18"])
def test_huge_integer_gpu_count_is_a_bad_row(tmp_path, value):
    p = tmp_path / "t.csv"
    p.write_text(f"t,g,d\n0,{value},10\n")  # was: a job of 8 x 0 workers and work 0, silently
    with pytest.raises(ConfigError, match=r"t.csv:2: column 'g': .*too large"):
        load_trace(p, "csv", map=CSV_MAP)


def test_huge_milli_gpu_total_is_a_bad_row(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n0,1e30,10\n1,1000,10\n")  # 1e27 GPUs: was 8 x 0 workers, work 0
    with pytest.raises(ConfigError, match=r"t.csv:2: column 'g': 1e\+27 GPUs, more than"):
        load_trace(p, "csv", map=CSV_MAP, units={"gpus": "milli"})
    jobs, rep = load_trace(p, "csv", map=CSV_MAP, units={"gpus": "milli"}, skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped["huge-gpus"] == 1


def test_negative_gpu_share_is_not_made_positive(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,m,d\n0,-2,-1000,10\n")  # was: -2 x -1000 milli = 2 GPUs, silently
    m = {"columns": {"submit": "t", "gpus": "g", "gpu_milli": "m", "duration": "d"}}
    with pytest.raises(ConfigError, match=r"t.csv:2: column 'g': negative value -2"):
        load_trace(p, "csv", map=m)
    p.write_text("t,g,d\n0,-500,10\n")  # was: "0 GPUs"
    with pytest.raises(ConfigError, match=r"column 'g': negative value -500"):
        load_trace(p, "csv", map=CSV_MAP, units={"gpus": "milli"}, fractional_gpus="ceil")


@pytest.mark.parametrize("key", ["sort", "skip_bad_rows"])
def test_boolean_option_given_as_text_is_refused(tmp_path, key):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n5,1,10\n0,1,0\n")
    # was: "false" is true: the rows were sorted / the bad row skipped, silently
    with pytest.raises(ConfigError, match=f"{key} must be true or false, got 'false'"):
        load_trace(p, "csv", map=CSV_MAP, **{key: "false"})


def test_gavel_extrapolate_given_as_text_is_refused(tmp_path):
    p = tmp_path / "g.trace"
    p.write_text(_gavel_row(sf="16"))
    with pytest.raises(ConfigError, match="gavel_extrapolate must be true or false"):
        load_trace(p, "gavel", throughputs=_tput(tmp_path), gavel_extrapolate="false")


def test_scenario_style_skip_bad_rows_text_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n0,1,0\n1,1,10\n")
    with pytest.raises(ConfigError, match="skip_bad_rows must be true or false"):
        load_trace(p, "csv", map={**CSV_MAP, "options": {"skip_bad_rows": "no"}})


@pytest.mark.parametrize("value", [-4, 0, "four", 4.5])
def test_profile_gpus_per_node_must_be_a_positive_integer(tmp_path, value):
    # was: -4 hung the profile computation for ever, 'four' raised ValueError, 4.5 read as 4
    p = tmp_path / "workload-1.csv"
    p.write_text(POLLUX_H + "c,0,cifar10,1,128\n")
    with pytest.raises(ConfigError, match="profile_gpus_per_node must be an integer >= 1"):
        load_trace(p, "pollux", profiles=str(tmp_path), profile_gpus_per_node=value)


@needs_profiles
def test_pollux_huge_replicas_and_batch_are_bad_rows(tmp_path):
    p = tmp_path / "workload-1.csv"
    p.write_text(POLLUX_H + "c,0,cifar10,1e30,128\n")  # was: ZeroDivisionError
    with pytest.raises(ConfigError, match=r"workload-1.csv:2: column 'num_replicas': '1e30' is too large"):
        load_trace(p, "pollux", profiles=str(PROFILES))
    p.write_text(POLLUX_H + "c,0,cifar10,1,1e30\n")  # was: "batch -9223372036854775808 outside ..."
    with pytest.raises(ConfigError, match=r"column 'batch_size': '1e30' is too large"):
        load_trace(p, "pollux", profiles=str(PROFILES))


@needs_profiles
def test_pollux_unregistered_profile_gpu_names_the_option(tmp_path):
    p = tmp_path / "workload-1.csv"
    p.write_text(POLLUX_H + "c,0,cifar10,1,128\n")
    # was: "workload-1.csv:2: column 'gpu_type': GPU type 'K80' is not registered" (no such column)
    with pytest.raises(ConfigError, match="trace option profile_gpu 'K80' is not a registered GPU type"):
        load_trace(p, "pollux", profiles=str(PROFILES), profile_gpu="K80")


def test_csv_unregistered_default_gpu_type_names_the_map_key(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n0,1,10\n")
    with pytest.raises(ConfigError, match="units.gpu_type 'K80' is not a registered GPU type"):
        load_trace(p, "csv", map={**CSV_MAP, "units": {"gpu_type": "K80"}})


def test_gavel_huge_scale_factor_is_a_bad_row(tmp_path):
    p = tmp_path / "g.trace"
    p.write_text(_gavel_row(sf="1e30"))  # was: OverflowError traceback
    with pytest.raises(ConfigError, match=r"g.trace:1: column 'scale_factor': 1e\+30 GPUs, more than"):
        load_trace(p, "gavel", throughputs=_tput(tmp_path))


def test_gavel_huge_duration_is_a_bad_row(tmp_path, monkeypatch):
    monkeypatch.delenv("ARYL_GYM_ALLOW_HUGE", raising=False)
    p = tmp_path / "g.trace"
    p.write_text(_gavel_row(steps="1e300") + _gavel_row(t="5"))  # was: a job of 2.5e299 s
    with pytest.raises(ConfigError, match=r"g.trace:1: column 'total_steps': .*more than a year"):
        load_trace(p, "gavel", throughputs=_tput(tmp_path))
    jobs, rep = load_trace(p, "gavel", throughputs=_tput(tmp_path), skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped["huge-duration"] == 1


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_gavel_non_finite_throughput_is_refused(tmp_path, value):
    p = tmp_path / "g.trace"
    p.write_text(_gavel_row())  # was: a job of NaN work (NaN) or of 0 s (Infinity), silently
    with pytest.raises(ConfigError, match="simulation_throughputs.json: v100 throughput of .* not a finite"):
        load_trace(p, "gavel", throughputs=_tput(tmp_path, value))


def test_gavel_throughput_table_of_wrong_shape_is_refused(tmp_path):
    p = tmp_path / "g.trace"
    p.write_text(_gavel_row())
    tp = tmp_path / "tp.json"
    tp.write_text(json.dumps({"v100": []}))  # was: AttributeError traceback
    with pytest.raises(ConfigError, match="tp.json: 'v100' holds a list"):
        load_trace(p, "gavel", throughputs=str(tp))


def test_valid_files_still_load_the_same(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n0,1500,10\n5,2000,20\n")
    jobs, _ = load_trace(p, "csv", map=CSV_MAP, units={"gpus": "milli"}, fractional_gpus="ceil",
                         sort=True, skip_bad_rows=False, rng=np.random.default_rng(0))
    assert [(j.submit, j.g * j.w_req) for j in jobs] == [(0.0, 2), (5.0, 2)]


def test_time_format_with_zone_offset_loads(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n2020-01-01 00:00:00+0500,1,10\n2020-01-01 01:00:00+0500,1,10\n")
    # was: TypeError (can't subtract offset-naive and offset-aware datetimes)
    jobs, _ = load_trace(p, "csv", map=CSV_MAP, units={"time": "datetime", "time_format": "%Y-%m-%d %H:%M:%S%z"})
    assert [j.submit for j in jobs] == [0.0, 3600.0]


def test_mixed_zone_aware_and_naive_timestamps_are_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t,g,d\n2020-01-01 00:00:00,1,10\n2020-01-01 06:00:00+05:00,1,10\n")
    # was: loaded, the second job 1 h after the first (its offset applied, the first's zone unknown)
    with pytest.raises(ConfigError, match=r"t.csv:3: column 't': timestamp .* has a UTC offset, but the first"):
        load_trace(p, "csv", map=CSV_MAP, units={"time": "datetime"})


def test_unregistered_duration_gpu_names_the_rule(tmp_path):
    p = tmp_path / "philly.csv"
    p.write_text(PHILLY_H + "2017-10-01 00:00:00,100,2,200,vc1\n")
    # was: "philly.csv:2: column 'gpu_type': GPU type 'K80' is not registered" (no such column)
    with pytest.raises(ConfigError, match="rules.duration_gpu 'K80' is not a registered GPU type"):
        load_trace(p, "philly", map={"rules": {"duration_gpu": "K80"}})
