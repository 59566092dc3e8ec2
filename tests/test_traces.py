"""Trace loaders, validation and the trace-to-JobSpec mapping (issue 6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.config import ClusterConfig, ConfigError, load_scenario, scenario_from_dict
from aryl_gym.workload.paths import default_data_root
from aryl_gym.workload.traces import (
    MappingRules,
    TraceError,
    load_map,
    load_scenario_trace,
    load_trace,
    trace_stats,
)
from aryl_gym.workload.traces_pollux import PolluxApplication, packed_placement

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
NO_ELASTIC = {"rules": {"elastic_family_share": 0.0, "type_agnostic_fraction": 0.0}}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def philly(tmp_path: Path, rows: list[str], name: str = "philly.csv") -> Path:
    return write(tmp_path / name, PHILLY_HEADER + "".join(r + "\n" for r in rows))


GOOD_PHILLY = [
    "2017-10-01 00:10:00,100.0,1,100.0,vcA",
    "2017-10-01 00:00:00,50.0,8,400.0,vcA",  # earlier: the file is unsorted, as upstream
    "2017-10-01 01:00:00,30.0,12,360.0,vcA",
    "2017-10-01 00:05:00,70.0,2,140.0,vcB",
]


# ------------------------------------------------------------------------------------------------
# Philly
# ------------------------------------------------------------------------------------------------
def test_philly_hand_computed(tmp_path):
    p = philly(tmp_path, GOOD_PHILLY)
    jobs, rep = load_trace(p, "philly", map=NO_ELASTIC, vc="vcA")
    assert rep.rows == 4 and rep.jobs == 3 and rep.filtered["other virtual cluster"] == 1
    assert any("sorted" in n for n in rep.notes)
    # sorted by time, submit relative to the first job (absolute-time trace)
    assert [j.submit for j in jobs] == [0.0, 600.0, 3600.0]
    assert [j.id for j in jobs] == [0, 1, 2]
    # 8 GPUs -> one 8-GPU worker; 12 GPUs -> 3 workers of 4 (largest divisor <= server size 8)
    assert [(j.g, j.w_max) for j in jobs] == [(8, 1), (1, 1), (4, 3)]
    # work = duration x w_max (V100 seconds, inelastic)
    assert [j.work for j in jobs] == [50.0, 100.0, 90.0]
    assert all(not j.elastic and j.w_min == j.w_max for j in jobs)
    assert sum(j.g * j.w_max for j in jobs) == 8 + 1 + 12  # GPU counts kept exactly


def test_philly_time_window_compression_max_jobs(tmp_path):
    p = philly(tmp_path, GOOD_PHILLY)
    jobs, rep = load_trace(p, "philly", map=NO_ELASTIC, vc="vcA", time_window="5min,2h")
    assert len(jobs) == 2 and rep.filtered["outside time window"] == 1
    assert [j.submit for j in jobs] == [300.0, 3300.0]  # origin = window start (00:05)
    jobs, _ = load_trace(p, "philly", map=NO_ELASTIC, vc="vcA",
                         time_window="2017-10-01 00:00:00,2017-10-01 00:30:00")
    assert [j.submit for j in jobs] == [0.0, 600.0]
    jobs, _ = load_trace(p, "philly", map=NO_ELASTIC, vc="vcA", time_compression=4.0)
    assert [j.submit for j in jobs] == [0.0, 150.0, 900.0]
    assert [j.work for j in jobs] == [50.0, 100.0, 90.0]  # durations unchanged
    jobs, rep = load_trace(p, "philly", map=NO_ELASTIC, vc="vcA", max_jobs=2)
    assert len(jobs) == 2 and rep.filtered["beyond max_jobs"] == 1
    with pytest.raises(ConfigError, match="time_window"):
        load_trace(p, "philly", vc="vcA", time_window="2h,1h")


def test_philly_unknown_vc_lists_known(tmp_path):
    p = philly(tmp_path, GOOD_PHILLY)
    with pytest.raises(TraceError, match=r"vcZ.*vcA \(3\)"):
        load_trace(p, "philly", vc="vcZ")


def test_mapping_rules_elastic_and_seeded(tmp_path):
    rows = [f"2017-10-01 00:{i:02d}:00,600.0,8,4800.0,v" for i in range(40)]
    p = philly(tmp_path, rows)
    m = {"rules": {"elastic_family_share": 1.0, "elastic_range": 4, "type_agnostic_fraction": 0.5}}
    jobs, _ = load_trace(p, "philly", map=m, rng=np.random.default_rng(3))
    # every job draws an elastic family -> data-parallel 1-GPU workers; World v1: it requests
    # its 8 GPUs as base demand and may grow to 16 or 32 (r in {2, 4}, both drawn)
    assert all(j.elastic and j.family in ("resnet50", "vgg16", "bert", "gnmt16") for j in jobs)
    assert all((j.g, j.w_min, j.w_req) == (1, 8, 8) for j in jobs)
    assert {j.w_max for j in jobs} == {16, 32}
    assert all(j.work == 600.0 * 8 for j in jobs)  # 600 s at the request
    m1 = {"rules": {"elastic_family_share": 1.0, "elastic_range": 1}}
    flat, _ = load_trace(p, "philly", map=m1, rng=np.random.default_rng(3))
    assert all(j.w_max == 8 for j in flat)  # elastic_range 1: no growth
    ta = sum(j.type_agnostic for j in jobs)
    assert 8 <= ta <= 32  # Binomial(40, 0.5)
    again, _ = load_trace(p, "philly", map=m, rng=np.random.default_rng(3))
    assert [(j.family, j.type_agnostic) for j in again] == [(j.family, j.type_agnostic) for j in jobs]
    other, _ = load_trace(p, "philly", map=m, rng=np.random.default_rng(4))
    assert [(j.family, j.type_agnostic) for j in other] != [(j.family, j.type_agnostic) for j in jobs]


def test_rules_default_from_scenario(tmp_path):
    rows = [f"2017-10-01 00:{i:02d}:00,60.0,1,60.0,v" for i in range(30)]
    p = philly(tmp_path, rows)
    cfg = load_scenario("tiny").replace(workload={"elastic_fraction": 1.0, "type_agnostic_fraction": 0.0})
    jobs, _ = load_trace(p, "philly", cluster=cfg)
    assert all(j.elastic for j in jobs) and not any(j.type_agnostic for j in jobs)


# ------------------------------------------------------------------------------------------------
# bad input: error naming file, line, column, fix; or skip and count
# ------------------------------------------------------------------------------------------------
BAD_CASES = [
    ("2017-10-01 00:00:00,100.0,1,100.0", "wrong-field-count", None),
    ("2017-13-45 00:00:00,100.0,1,100.0,v", "bad-time", "timestamp"),
    (",100.0,1,100.0,v", "missing-value", "timestamp"),
    ("2017-10-01 00:00:00,-5.0,1,-5.0,v", "nonpositive-duration", "duration"),
    ("2017-10-01 00:00:00,0.0,1,0.0,v", "nonpositive-duration", "duration"),
    # issue 34: a duration of 1e11 s or 1e308 s ran for ever
    ("2017-10-01 00:00:00,1e11,1,1e11,v", "huge-duration", "duration"),
    ("2017-10-01 00:00:00,1e308,1,1e308,v", "huge-duration", "duration"),
    ("2017-10-01 00:00:00,10.0,0,0.0,v", "zero-gpus", "num_gpus"),
    ("2017-10-01 00:00:00,abc,1,100.0,v", "bad-number", "duration"),
    ("2017-10-01 00:00:00,10.0,2,99.0,v", "inconsistent", "gpu_time"),
    ("2017-10-01 00:00:00,10.0,1,10.0,v", "duplicate", None),  # same as the good row below
]


@pytest.mark.parametrize("row,reason,column", BAD_CASES)
def test_bad_philly_row_raises_then_skips(tmp_path, row, reason, column):
    p = philly(tmp_path, ["2017-10-01 00:00:00,10.0,1,10.0,v", row])
    with pytest.raises(TraceError) as ei:
        load_trace(p, "philly")
    err = ei.value
    msg = str(err)
    assert str(p) in msg and ":3" in msg and "Fix:" in msg and "--skip-bad-rows" in msg
    assert err.line == 3 and err.reason == reason and err.column == column
    if column:
        assert f"column '{column}'" in msg
    jobs, rep = load_trace(p, "philly", skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped == {reason: 1} and rep.skipped_total == 1
    assert reason in rep.summary()


def test_job_bigger_than_cluster(tmp_path):
    p = philly(tmp_path, ["2017-10-01 00:00:00,10.0,1,10.0,v", "2017-10-01 00:01:00,10.0,64,640.0,v"])
    cl = ClusterConfig(train_servers=2, train_gpus_per_server=8, inf_servers=0)
    with pytest.raises(TraceError, match=r":3: job needs 64 GPUs but the training pool has 16"):
        load_trace(p, "philly", cluster=cl)
    jobs, rep = load_trace(p, "philly", cluster=cl, skip_bad_rows=True)
    assert len(jobs) == 1 and rep.skipped["too-big"] == 1
    jobs, _ = load_trace(p, "philly")  # no cluster given: no size check
    assert len(jobs) == 2


def test_file_level_errors(tmp_path):
    with pytest.raises(TraceError, match="empty file"):
        load_trace(write(tmp_path / "e.csv", ""), "philly")
    with pytest.raises(TraceError, match="no data rows"):
        load_trace(write(tmp_path / "h.csv", PHILLY_HEADER), "philly")
    with pytest.raises(TraceError, match=r"missing column 'cluster'"):
        load_trace(write(tmp_path / "m.csv", "timestamp,duration,num_gpus,gpu_time\n"), "philly")
    semi = write(tmp_path / "s.csv", PHILLY_HEADER.replace(",", ";") + "2017-10-01 00:00:00;1;1;1;v\n")
    with pytest.raises(TraceError, match="semicolon-separated"):
        load_trace(semi, "philly")
    jobs, _ = load_trace(semi, "philly", delimiter=";")
    assert len(jobs) == 1
    with pytest.raises(TraceError, match="file not found"):
        load_trace(tmp_path / "nope.csv", "philly")
    with pytest.raises(ConfigError, match="unknown trace format"):
        load_trace(semi, "excel")
    with pytest.raises(ConfigError, match="unknown trace option 'colour'"):
        load_trace(semi, "philly", colour="red")
    with pytest.raises(TraceError, match="no jobs left"):
        load_trace(philly(tmp_path, ["2017-10-01 00:00:00,0,1,0,v"]), "philly", skip_bad_rows=True)


# ------------------------------------------------------------------------------------------------
# Pollux: tiny hand-made profile
# ------------------------------------------------------------------------------------------------
def make_profiles(root: Path) -> Path:
    app = root / "traces" / "toy"
    app.mkdir(parents=True)
    write(app / "placements.csv", "placement,local_bsz,step_time,sync_time\n"
          "1,10,1.0,0.0\n1,20,2.0,0.0\n2,10,1.5,0.5\n2,20,2.5,0.5\n")
    write(app / "scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
          "6,6,10,3.0,1.0\n6,6,20,5.0,1.0\n")
    for b in (10, 20):
        write(app / f"validation-{b}.csv", "progress,iteration,metric,grad_sqr,grad_var\n"
              "100,100,0.5,1.0,1.0\n200,200,0.6,1.0,1.0\n")
    return root / "traces"


def test_pollux_run_time_hand_computed(tmp_path):
    a = PolluxApplication(make_profiles(tmp_path) / "toy")
    assert a.max_epochs == 2 and a.init_batch_size == 10 and a.max_batch_size == 20
    # 1 replica, batch 10: 200 progress x 1.0 s / gain 1
    assert a.run_time(1, 10) == pytest.approx(200.0)
    # 2 replicas, batch 20: local 10, step 1.5 s, scale 2, gain 2 / (1/2 + 1) = 4/3
    assert a.run_time(2, 20) == pytest.approx(200 * 1.5 / (4 / 3))
    # 1 replica, batch 20 > base: upstream forces one accumulation step: 2 x 10 samples,
    # step 1.0 + 1 x (1.0 - 0) = 2.0 s, gain 4/3
    assert a.config(1, 20).accum_steps == 1
    assert a.run_time(1, 20) == pytest.approx(200 * 2.0 / (4 / 3))
    # 6 replicas on 4-GPU nodes -> not measured as a placement -> scalability rows (6 nodes? no)
    assert packed_placement(6) == (4, 2)
    with pytest.raises(ConfigError, match="no throughput profile"):
        a.throughput((4, 2), 10)
    assert a.throughput((1, 1, 1, 1, 1, 1), 15) == pytest.approx((4.0, 1.0))


def test_pollux_workload_and_conversion(tmp_path):
    prof = make_profiles(tmp_path)
    wl = tmp_path / "workloads"
    wl.mkdir()
    p = write(wl / "workload-1.csv", "name,time,application,num_replicas,batch_size\n"
              "toy-0,5,toy,1,10\ntoy-1,60,toy,2,20\n")
    jobs, rep = load_trace(p, "pollux", rng=np.random.default_rng(0))  # profiles found at ../traces
    assert rep.jobs == 2
    t4 = 0.35  # built-in T4 default speed; the profiles were measured on T4
    assert jobs[0].work == pytest.approx(200.0 * 1 * t4)
    assert jobs[1].work == pytest.approx(225.0 * 2 * t4)
    assert (jobs[1].app, jobs[1].batch_size, jobs[1].g, jobs[1].w_max) == ("toy", 20, 1, 2)
    assert [j.submit for j in jobs] == [5.0, 60.0]  # relative trace: times kept
    # explicit profiles option, and a bad application / batch / unsorted / duplicate name
    bad = write(wl / "workload-2.csv", "name,time,application,num_replicas,batch_size\n"
                "toy-0,5,toy,1,10\nx,6,nope,1,10\ny,7,toy,1,99\nz,3,toy,1,10\ntoy-0,9,toy,1,10\n"
                "w,10,toy,0,10\n")
    with pytest.raises(TraceError) as ei:  # the first bad row raises
        load_trace(bad, "pollux", profiles=str(prof))
    assert ei.value.line == 3 and ei.value.reason == "unknown-app" and ei.value.column == "application"
    jobs, rep = load_trace(bad, "pollux", profiles=str(prof), skip_bad_rows=True)
    assert len(jobs) == 1
    assert rep.skipped == {"unknown-app": 1, "bad-batch": 1, "unsorted": 1, "duplicate": 1, "zero-gpus": 1}


# ------------------------------------------------------------------------------------------------
# Gavel
# ------------------------------------------------------------------------------------------------
def test_gavel_hand_computed(tmp_path):
    write(tmp_path / "simulation_throughputs.json", json.dumps({"v100": {
        "('ResNet-50 (batch size 64)', 1)": {"null": 2.0},
        "('ResNet-50 (batch size 64)', 4)": {"null": 5.0},
        "('LM (batch size 20)', 1)": {"null": 10.0},
    }}))
    d = tmp_path / "traces"
    d.mkdir()
    line = "{}\tcmd\t-n\t1\t{}\t{}\t{}\n"
    p = write(d / "vc.trace", line.format("ResNet-50 (batch size 64)", 1000, 0.0, 4)
              + line.format("LM (batch size 20)", 500, 30.0, 2))
    jobs, rep = load_trace(p, "gavel", map=NO_ELASTIC)
    # duration = steps / V100 steps-per-second
    assert jobs[0].family == "resnet50" and jobs[0].elastic  # elastic family
    # World v1: requests its 4 GPUs (base demand) and may grow to r x 4, r in {2, 4}
    assert (jobs[0].g, jobs[0].w_req, jobs[0].w_min) == (1, 4, 4) and jobs[0].w_max in (8, 16)
    assert jobs[0].work == pytest.approx(1000 / 5.0 * 4)
    # LM has no 2-GPU entry: 1-GPU throughput scaled linearly, noted
    assert jobs[1].family == "lstm" and not jobs[1].elastic
    assert jobs[1].work == pytest.approx(500 / 20.0 * 1) and (jobs[1].g, jobs[1].w_max) == (2, 1)
    assert any("scaled linearly" in n for n in rep.notes)
    with pytest.raises(TraceError, match="no V100 throughput"):
        load_trace(p, "gavel", gavel_extrapolate=False)
    unsorted = write(d / "u.trace", line.format("LM (batch size 20)", 5, 30.0, 1)
                     + line.format("LM (batch size 20)", 5, 10.0, 1))
    with pytest.raises(TraceError, match=r"u.trace:2: column 'arrival_time'.*before the previous"):
        load_trace(unsorted, "gavel")
    jobs, _ = load_trace(unsorted, "gavel", sort=True)
    assert [j.submit for j in jobs] == [10.0, 30.0]
    comma = write(d / "c.trace", "a,b,c,d,e,f,g\n")
    with pytest.raises(TraceError, match="not tab-separated"):
        load_trace(comma, "gavel")


# ------------------------------------------------------------------------------------------------
# Generic CSV with a column mapping
# ------------------------------------------------------------------------------------------------
def test_generic_csv_map_yaml(tmp_path):
    p = write(tmp_path / "mine.csv", "jid;sub;st;en;n;arch;hw\n"
              "a;2020-01-01 10:00:00;2020-01-01 10:05:00;2020-01-01 11:05:00;4;VGG16;V100\n"
              "b;2020-01-01 10:30:00;2020-01-01 10:30:00;2020-01-01 10:40:00;1;mystery;T4\n")
    m = write(tmp_path / "map.yaml", """
delimiter: ";"
columns: {submit: sub, start: st, end: en, gpus: n, model: arch, gpu_type: hw, id: jid}
units: {time: datetime}
rules: {type_agnostic_fraction: 0.0}
""")
    jobs, _ = load_trace(p, "csv", map=m)
    assert [j.submit for j in jobs] == [0.0, 1800.0]
    assert jobs[0].family == "vgg16" and jobs[0].elastic and (jobs[0].g, jobs[0].w_req) == (1, 4)
    assert jobs[0].w_min == 4 and jobs[0].w_max in (8, 16)  # World v1: grows to r x request
    assert jobs[0].work == pytest.approx(3600.0 * 4)  # V100: speed 1
    assert jobs[1].family == "mystery" and not jobs[1].elastic
    assert jobs[1].work == pytest.approx(600.0 * 0.35)  # measured on T4 -> V100 worker-seconds
    assert jobs[0].name == "a"


def test_generic_csv_cli_columns_units_and_errors(tmp_path):
    p = write(tmp_path / "u.csv", "t,g,d\n0,1,2\n60,2,1.5\n30,1,1\n")
    cols = {"submit": "t", "gpus": "g", "duration": "d"}
    with pytest.raises(TraceError, match=r"u.csv:4: column 't'"):
        load_trace(p, "csv", columns=cols, units={"duration": "min"})
    jobs, rep = load_trace(p, "csv", columns=cols, units={"duration": "min"}, skip_bad_rows=True,
                           map=NO_ELASTIC)
    assert rep.skipped == {"unsorted": 1}
    assert [j.work for j in jobs] == [120.0, 90.0 * 1]  # 2 GPUs as one 2-GPU worker
    jobs, _ = load_trace(p, "csv", columns=cols, units={"time": "min"}, sort=True, map=NO_ELASTIC)
    assert [j.submit for j in jobs] == [0.0, 1800.0, 3600.0]
    with pytest.raises(ConfigError, match="needs a column mapping for duration"):
        load_trace(p, "csv", columns={"submit": "t", "gpus": "g"})
    with pytest.raises(TraceError, match="missing column 'dur'"):
        load_trace(p, "csv", columns={**cols, "duration": "dur"})
    with pytest.raises(ConfigError, match="units.time"):
        load_trace(p, "csv", columns=cols, units={"time": "fortnights"})
    with pytest.raises(ConfigError, match="unknown key 'colums'"):
        load_map({"colums": {}})
    with pytest.raises(ConfigError, match="rules.type_agnostic_fraction"):
        load_map({"rules": {"type_agnostic_fraction": 2}})
    bad_time = write(tmp_path / "b.csv", "t,g,d\nsoon,1,2\n")
    with pytest.raises(TraceError, match=r"b.csv:2: column 't': not a number of s"):
        load_trace(bad_time, "csv", columns=cols)


def test_mapping_rules_family_map():
    r = MappingRules()
    assert r.family_of("ResNet-50") == "resnet50" and r.family_of("My Model-X") == "mymodelx"


# ------------------------------------------------------------------------------------------------
# scenario integration and CLI
# ------------------------------------------------------------------------------------------------
def test_scenario_trace_and_cli(tmp_path, capsys):
    from aryl_gym.cli import main
    from aryl_gym.scenario import make_episode

    p = philly(tmp_path, [f"2017-10-01 00:{i:02d}:00,{300 + 60 * i}.0,{1 + i % 2},"
                          f"{(300 + 60 * i) * (1 + i % 2)}.0,v" for i in range(20)])
    data = load_scenario("tiny").to_dict()
    data["workload"].update(trace=str(p), trace_format="philly", trace_options={"vc": "v"})
    cfg = scenario_from_dict(data, source="<test>")
    ep = make_episode(cfg, seed=1)
    assert len(ep.jobs) == 20
    jobs = load_scenario_trace(cfg, np.random.default_rng(0))
    # GPU-seconds (work x g) do not depend on the seeded draws, worker splits may
    assert [j.work * j.g for j in jobs] == [j.work * j.g for j in ep.jobs]
    res = ep.simulator().run(__import__("aryl_gym.agents", fromlist=["make_policy"]).make_policy("baseline"))
    assert res.jobs_completed == 20
    # same episode through the command line (whose default policy is the paper's Baseline)
    assert main(["simulate", "--scenario", "tiny", "--trace", str(p), "--trace-format", "philly",
                 "--json", "--seed", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs_completed"] == 20 and out["avg_jct"] == pytest.approx(res.avg_jct)
    assert main(["trace-info", str(p), "--trace-format", "philly"]) == 0
    text = capsys.readouterr().out
    assert "20 jobs kept" in text and "GPUs per job" in text and "p50" in text
    bad = philly(tmp_path, ["2017-10-01 00:00:00,10.0,0,0.0,v", "2017-10-01 00:01:00,10.0,1,10.0,v"], "b.csv")
    # an info command reports bad rows by reason (with or without --skip-bad-rows)
    assert main(["trace-info", str(bad), "--trace-format", "philly"]) == 0
    out = capsys.readouterr().out
    assert "skipped       1  zero-gpus" in out and "line 2 column 'num_gpus': 0 GPUs" in out
    assert main(["trace-info", str(bad), "--trace-format", "philly", "--skip-bad-rows"]) == 0
    assert "skipped       1  zero-gpus" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# the real traces (read-only, ../shared/traces)
# ------------------------------------------------------------------------------------------------
ROOT = default_data_root()
HAVE_REAL = ROOT is not None and (ROOT / "traces" / "pollux-philly").is_dir()
real = pytest.mark.skipif(not HAVE_REAL, reason="real traces absent: set ARYL_GYM_DATA to the folder "
                          "holding traces/pollux-philly and traces/gavel-philly-vc (read-only shared data)")


@real
def test_real_pollux_workload6():
    cfg = load_scenario("pollux-w6")
    jobs, rep = load_trace("traces/pollux-philly/workloads/workload-6.csv", "pollux", cluster=cfg)
    assert rep.jobs == 160 and not rep.skipped
    assert {j.app for j in jobs} == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    runs = np.array([j.extra["profile_run_time_s"] for j in jobs])
    assert 1000 < runs.mean() < 3000  # about 1,819 s at the workload's TunedJobs configurations
    # a T4 job given its requested replicas runs exactly its profile time
    t4 = cfg.gpu_types["T4"]
    for j in jobs:
        assert j.work / (j.w_max * t4.speed_for(j.family)) == pytest.approx(j.extra["profile_run_time_s"])
    # TunedJobs configs scale at 50-80% efficiency (Pollux's workload generator), loosely
    apps = {"cifar10": (6, 2048), "bert": (8, 384), "deepspeech2": (8, 320)}
    from aryl_gym.workload.traces_pollux import load_pollux_profiles

    prof = load_pollux_profiles(ROOT / "traces/pollux-philly/traces")
    for name, (r, b) in apps.items():
        eff = prof[name].run_time(1, prof[name].init_batch_size) / prof[name].run_time(r, b) / r
        assert 0.4 < eff < 0.9, (name, eff)


@real
def test_real_philly_counts_match_readme():
    jobs, rep = load_trace("traces/pollux-philly/traces/philly.csv", "philly", vc="6214e9", duplicates="keep")
    assert rep.rows == 82247 and len(jobs) == 41226
    with pytest.raises(TraceError, match="duplicate"):
        load_trace("traces/pollux-philly/traces/philly.csv", "philly", vc="6214e9")


@real
def test_real_scenarios_run():
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    for name, n in (("pollux-w6", 160), ("philly-6214e9", 1478)):
        ep = make_episode(name, seed=0)
        assert len(ep.jobs) == n
        res = ep.simulator().run(make_policy("fifo"))
        assert res.jobs_completed == n and math.isfinite(res.avg_jct)


@real
def test_real_gavel_vc():
    if not (ROOT / "traces" / "gavel-philly-vc").is_dir():
        pytest.skip("traces/gavel-philly-vc absent")
    jobs, rep = load_trace("traces/gavel-philly-vc/traces/msr/seed=0/6214e9.trace", "gavel")
    assert rep.rows == 2000 and len(jobs) == 2000
    assert trace_stats(jobs)["gpu_hist"][1] > 1500


# ------------------------------------------------------------------------------------------------
# Pollux scaling curves (JobSpec.scaling) and tuning relative to them
# ------------------------------------------------------------------------------------------------
def test_pollux_scaling_curve_and_tuning_hand_computed(tmp_path):
    prof = make_profiles(tmp_path)
    a = PolluxApplication(prof / "toy")
    # batch 20 fixed: T(2) = 225 s (above), T(1) = 300 s (one accumulation step)
    # scaling[w] = T(2) x 2 / (T(w) x w): [unused, 450 / 300, 1]
    assert a.scaling_curve(2, 20) == pytest.approx((1.0, 1.5, 1.0))
    # tuned: 1 replica may drop to batch 10 (200 s) -> 300 / 200; 2 replicas: only batch 20
    assert a.tuning_table(2, 20) == pytest.approx([1.0, 1.5, 1.0])
    wl = tmp_path / "workloads"
    wl.mkdir()
    p = write(wl / "workload-1.csv", "name,time,application,num_replicas,batch_size\n"
              "toy-0,0,toy,1,10\ntoy-1,0,toy,2,20\n")
    jobs, _ = load_trace(p, "pollux", rng=np.random.default_rng(0))
    assert jobs[0].scaling == pytest.approx((1.0, 1.0))
    assert jobs[1].scaling == pytest.approx((1.0, 1.5, 1.0))


def test_scaling_curve_job_runs_profile_time_at_each_fixed_worker_count(tmp_path):
    """A job with a curve, held at w workers, takes exactly the profile's T(w) (no overheads)."""
    from dataclasses import replace

    from aryl_gym.sim.view import Decision
    from tests.helpers import ScriptedPolicy, make_sim

    prof = make_profiles(tmp_path)
    wl = tmp_path / "workloads"
    wl.mkdir()
    p = write(wl / "workload-1.csv", "name,time,application,num_replicas,batch_size\n"
              "toy-0,0,toy,2,20\n")
    cfg = scenario_from_dict({
        "name": "t4", "cluster": {"train_servers": 1, "train_gpus_per_server": 4, "train_gpu": "T4",
                                  "inf_servers": 0, "inf_gpus_per_server": 4},
        "inference": {"mode": "constant", "mean": 0.0, "headroom": 0.0},
        "sim": {"interval": 60.0, "first_start_overhead_s": 0.0}})  # T4: the profiles' GPU
    (spec,), _ = load_trace(p, "pollux", rng=np.random.default_rng(0))
    a = PolluxApplication(prof / "toy")
    spec = replace(spec, w_min=1, elastic=True)
    for w in (1, 2):
        sim = make_sim(cfg, [spec])
        pol = ScriptedPolicy(lambda v, w=w: Decision(targets={0: w}) if v.now == 0 else Decision(),
                             uses_loaning=False)
        res = sim.run(pol)
        assert res.jcts == [pytest.approx(a.run_time(w, 20))]
    # a linear job (no curve) would have taken T(2) x 2 = 450 s on one worker, not 300 s
    sim = make_sim(cfg, [replace(spec, scaling=None)])
    res = sim.run(ScriptedPolicy(lambda v: Decision(targets={0: 1}) if v.now == 0 else Decision(),
                                 uses_loaning=False))
    assert res.jcts == [pytest.approx(450.0)]


def test_scaling_curve_validation():
    from dataclasses import replace

    from tests.helpers import job

    with pytest.raises(ValueError, match="scaling curve"):
        replace(job(0), scaling=(1.0, 0.0)).validate()
    with pytest.raises(ValueError, match="scaling curve"):
        replace(job(0), scaling=(1.0,)).validate()
    replace(job(0), scaling=(1.0, 0.9)).validate()


@real
def test_real_w6_fifo_alone_gives_profile_run_time():
    """fifo, each Pollux-w6 application's first job alone at its requested replicas: JCT = the
    30 s first-start delay + the profile's run time (the curve is 1 at w_max)."""
    from dataclasses import replace

    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    cfg = load_scenario("pollux-w6")
    ep = make_episode(cfg, 0)
    first: dict[str, object] = {}
    for j in ep.jobs:
        first.setdefault(j.app, j)
    assert len(first) == 6
    for spec in first.values():
        assert spec.scaling is not None and len(spec.scaling) == spec.w_max + 1
        assert spec.scaling[spec.w_max] == pytest.approx(1.0)
        alone = make_episode(cfg, 0, jobs=[replace(spec, id=0, submit=0.0)])
        res = alone.simulator().run(make_policy("fifo"))
        want = cfg.sim.first_start_overhead_s + spec.extra["profile_run_time_s"]
        assert res.jcts == [pytest.approx(want)], spec.name


# ------------------------------------------------------------------------------------------------
# the columnar loader against hand-written files (line numbers, blank lines, quoting, order)
# ------------------------------------------------------------------------------------------------
def test_columnar_lines_blank_rows_crlf_quotes(tmp_path):
    # line 1 header, 2 job, 3 empty, 4 spaces, 5 only commas, 6 job (quoted vc), 7 CRLF job
    text = (PHILLY_HEADER + "2017-10-01 00:00:00,100.0,1,100.0,vcA\n\n   \n,,,,\n"
            '2017-10-01 00:01:00, 20.0 ,2,40.0,"vcA"\n' "2017-10-01 00:02:00,5,4,20,vcA\r\n")
    p = write(tmp_path / "t.csv", text)
    jobs, rep = load_trace(p, "philly", map=NO_ELASTIC)
    assert rep.rows == 3 and not rep.skipped  # blank rows are not rows
    assert [j.extra["trace_line"] for j in jobs] == [2, 6, 7]
    assert [j.submit for j in jobs] == [0.0, 60.0, 120.0]
    assert [j.extra["trace_duration_s"] for j in jobs] == [100.0, 20.0, 5.0]
    assert [j.extra["vc"] for j in jobs] == ["vcA"] * 3
    assert [j.name for j in jobs] == ["philly-vcA-L2", "philly-vcA-L6", "philly-vcA-L7"]
    # a quoted field spanning two lines: the csv module's line (where the record ends)
    q = write(tmp_path / "q.csv", PHILLY_HEADER + '2017-10-01 00:00:00,1,1,1,"v\nA"\n'
              "2017-10-01 00:00:30,1,0,0,vcA\n")
    with pytest.raises(TraceError) as ei:
        load_trace(q, "philly")
    assert ei.value.line == 4 and ei.value.column == "num_gpus" and ei.value.reason == "zero-gpus"


def test_columnar_earliest_bad_row_and_one_reason_per_row(tmp_path):
    rows = ["2017-10-01 00:00:00,10,1,10,v",
            "2017-10-01 00:00:10,10,1,99,v",  # line 3: inconsistent gpu_time
            "2017-10-01 00:00:20,-1,x,1,v",  # line 4: duration first (nonpositive), not num_gpus
            "2017-10-01 00:00:30,10,1",  # line 5: wrong field count
            "2017-10-01 00:00:40,1e999,1,1,v"]  # line 6: not finite -> bad-number
    p = philly(tmp_path, rows)
    with pytest.raises(TraceError) as ei:
        load_trace(p, "philly")
    assert (ei.value.line, ei.value.reason) == (3, "inconsistent")
    jobs, rep = load_trace(p, "philly", skip_bad_rows=True)
    assert len(jobs) == 1 and rep.rows == 5
    assert dict(rep.skipped) == {"inconsistent": 1, "nonpositive-duration": 1, "wrong-field-count": 1,
                                 "bad-number": 1}
    assert rep.examples["bad-number"] == ["line 6 column 'duration': not a number: '1e999'"]


def test_columnar_unsorted_running_max_and_duplicates(tmp_path):
    head = "name,time,application,num_replicas,batch_size\n"
    # times 10, 5, 20, 15, 30 (lines 2..6): lines 3 and 5 are late; the row before each late
    # row that was kept is line 2 (time 10) and line 4 (time 20)
    rows = ["a,10,x,1,1", "b,5,x,1,1", "c,20,x,1,1", "d,15,x,1,1", "a,30,x,1,1"]
    p = write(tmp_path / "u.csv", head + "".join(r + "\n" for r in rows))
    cols = {"submit": "time", "gpus": "num_replicas", "duration": "batch_size", "id": "name"}
    with pytest.raises(TraceError) as ei:
        load_trace(p, "csv", columns=cols)
    assert ei.value.line == 3 and "before the previous row's 10 (line 2)" in str(ei.value)
    jobs, rep = load_trace(p, "csv", columns=cols, skip_bad_rows=True)
    assert rep.skipped["unsorted"] == 2 and rep.examples["unsorted"][1].startswith("line 5")
    assert "20 (line 4)" in rep.examples["unsorted"][1]
    # line 6 repeats id 'a' (line 2): a duplicate, the first occurrence kept
    assert rep.skipped["duplicate"] == 1 and rep.examples["duplicate"] == ["line 6: same job as line 2"]
    assert [j.name for j in jobs] == ["a", "c"]
    jobs, rep = load_trace(p, "csv", columns=cols, sort=True, duplicates="keep")
    assert [j.name for j in jobs] == ["b", "a", "d", "c", "a"] and not rep.skipped


def _digest(jobs) -> str:
    import hashlib
    from dataclasses import fields

    h = hashlib.sha256()
    for j in jobs:
        # World v1 added w_req (left out, so the Pollux digest still checks the old fields);
        # hetero (heterogeneous training) is always False for loaded traces and left out too
        assert not j.hetero
        h.update(repr(tuple((f.name, getattr(j, f.name)) for f in fields(j)
                            if f.name not in ("extra", "w_req", "hetero"))).encode())
        h.update(repr(j.w_req).encode() if j.w_req != j.w_max else b"")
        h.update(repr(sorted((k, v) for k, v in dict(j.extra).items() if k != "profiles_dir")).encode())
    return h.hexdigest()[:16]


@real
@pytest.mark.parametrize("path,fmt,opts,scenario,n,digest", [
    ("traces/pollux-philly/traces/philly.csv", "philly", {"duplicates": "keep", "skip_bad_rows": True},
     "testbed", 82238, "7a0372aeb3a21593"),  # World v1 (elastic growth); v0: 0b43093643b7ff78
    ("traces/pollux-philly/workloads/workload-6.csv", "pollux", {}, "pollux-w6", 160, "22f3dc9d5662860c"),
    ("traces/gavel-philly-vc/traces/msr/seed=0/b436b2.trace", "gavel", {"skip_bad_rows": True}, "testbed",
     2000, "1873cbb66e8ce1e5"),  # World v1 (elastic growth); v0: ea398bc7da50870c
])
def test_real_traces_digest(path, fmt, opts, scenario, n, digest):
    """The columnar loader gives the JobSpecs the row-by-row loader gave (digests recorded from
    it, rng default_rng(3)): every field, and ``extra`` but the machine's profile folder. Philly
    and Gavel digests were re-recorded for World v1 (elastic jobs grow past their request); the
    Pollux workload's jobs did not change."""
    if not (ROOT / path).exists():
        pytest.skip(f"{path} absent under the data root {ROOT}")
    jobs, _ = load_trace(path, fmt, cluster=load_scenario(scenario), rng=np.random.default_rng(3), **opts)
    assert len(jobs) == n
    assert _digest(jobs) == digest
