"""``aryl-gym reproduce``: paired statistics, tolerance, rows, sweeps' key checks, cache resume."""

from __future__ import annotations

import json
import math

import pytest

from aryl_gym import reproduce as rp
from aryl_gym.cli import main
from aryl_gym.config import load_scenario
from aryl_gym.metrics import EpisodeResult

# ------------------------------------------------------------------------------------------------
# Tolerance (the statistics themselves: tests/test_stats.py)
# ------------------------------------------------------------------------------------------------


def test_tolerance_band_is_twenty_percent_of_the_gain():
    assert rp.tolerance_band(1.50) == pytest.approx((1.40, 1.60))
    assert rp.tolerance_band(1.269) == pytest.approx((1.2152, 1.3228))
    assert rp.tolerance_band(2.13) == pytest.approx((1.904, 2.356))
    assert rp.within_tolerance(1.40, 1.50) and rp.within_tolerance(1.60, 1.50)
    assert not rp.within_tolerance(1.39, 1.50) and not rp.within_tolerance(1.61, 1.50)
    assert not rp.within_tolerance(math.nan, 1.50)
    assert rp.fmt_value(1.269, "%") == "+26.9%" and rp.fmt_value(1.5, "x") == "1.50x"


# ------------------------------------------------------------------------------------------------
# Rows on synthetic results
# ------------------------------------------------------------------------------------------------


def _result(policy: str, seed: int, **kw: float) -> EpisodeResult:
    base = {f: 0.0 for f in EpisodeResult.__dataclass_fields__}
    base.update(scenario="x", policy=policy, seed=seed, truncated=False, stalled=False,
                combined_usage_hourly=[], jcts=[], queue_times=[])
    base.update(kw)
    return EpisodeResult.from_dict(base)


def test_rows_pair_by_seed_and_explain_misses_with_figures():
    spec = {r.id: r for r in rp.ROWS}
    res = {
        # seed 0: baseline/aryl JCT 1.5 (within), seed 1: 1.5 -> geo mean 1.5, within
        ("basic", "baseline", 0): _result("baseline", 0, avg_jct=3000.0, avg_queue_time_total=1200.0),
        ("basic", "aryl", 0): _result("aryl", 0, avg_jct=2000.0, avg_queue_time_total=800.0),
        ("basic", "baseline", 1): _result("baseline", 1, avg_jct=6000.0, avg_queue_time_total=600.0),
        ("basic", "aryl", 1): _result("aryl", 1, avg_jct=4000.0, avg_queue_time_total=100.0),
    }
    rows = rp.compute_rows([spec["jct-aryl-baseline"], spec["queue-aryl-baseline"]], res, [0, 1])
    jct, queue = rows
    assert jct.stat.mean == pytest.approx(1.5) and jct.within and jct.why == ""
    assert jct.stat.lo == pytest.approx(1.5) and jct.stat.hi == pytest.approx(1.5)
    # queue ratios 1.5 and 6.0: geometric mean 3.0, out of the band 1.4236..1.636
    assert queue.stat.mean == pytest.approx(3.0) and not queue.within
    assert "above" in queue.why and "900 s" in queue.why  # Baseline's mean queue (1200 + 600) / 2
    d = queue.to_dict()
    assert d["ours"]["per_seed"] == {"0": pytest.approx(1.5), "1": pytest.approx(6.0)}
    assert d["tolerance"] == pytest.approx([1.424, 1.636])


def test_rows_count_the_failed_episodes_behind_them():
    """A row says how many of its episodes left jobs unfinished (their JCT counts those jobs
    censored at the end): in the dict and in the Markdown table's seeds column."""
    spec = {r.id: r for r in rp.ROWS}["jct-aryl-baseline"]
    res = {
        ("basic", "baseline", 0): _result("baseline", 0, avg_jct=3000.0),
        ("basic", "aryl", 0): _result("aryl", 0, avg_jct=2000.0),
        ("basic", "baseline", 1): _result("baseline", 1, avg_jct=6000.0, failed=1, jobs_unfinished=4),
        ("basic", "aryl", 1): _result("aryl", 1, avg_jct=4000.0),
        ("basic", "baseline", 2): _result("baseline", 2, avg_jct=6000.0, failed=1),  # aryl missing
    }
    (row,) = rp.compute_rows([spec], res, [0, 1, 2])
    assert row.seeds == [0, 1] and row.failed == 1 and row.to_dict()["failed_episodes"] == 1
    assert "| 2, 1 episode(s) failed |" in rp.render_table_md([row])
    (clean,) = rp.compute_rows([spec], res, [0])
    assert clean.failed == 0 and "failed" not in rp.render_table_md([clean])


def test_jct_row_explanation_gives_the_queue_share_bound():
    spec = {r.id: r for r in rp.ROWS}["jct-aryl-baseline"]
    res = {
        ("basic", "baseline", 0): _result("baseline", 0, avg_jct=10000.0, avg_queue_time_total=2000.0,
                                          avg_run_time=8000.0, elastic_run_share=0.2),
        ("basic", "aryl", 0): _result("aryl", 0, avg_jct=8000.0, avg_queue_time_total=0.0,
                                      avg_run_time=8000.0),
    }
    (row,) = rp.compute_rows([spec], res, [0])
    assert row.stat.mean == pytest.approx(1.25) and not row.within
    # queue share 20% -> removing all queuing gives at most 1 / 0.8 = 1.25x
    assert "20% of its JCT" in row.why and "1.25x" in row.why
    # the mechanism: every second of the gain is queuing; Aryl runs jobs no faster
    mc = rp.mechanism(res, [0])
    assert mc is not None
    assert mc.queue_share == pytest.approx(0.2) and mc.run_factor.mean == pytest.approx(1.0)
    assert mc.from_queue == pytest.approx(1.0) and mc.from_run == pytest.approx(0.0)
    # the paper's pair (1.53x queue, 1.50x JCT) at a 20% share needs (0.8) / (1/1.5 - 0.2/1.53)
    assert mc.paper_run_factor == pytest.approx(0.8 / (1 / 1.5 - 0.2 / 1.53))
    assert rp.paper_run_factor(0.0) == pytest.approx(1.5)
    assert rp.paper_run_factor(0.9) == pytest.approx(1.28, abs=0.01)
    assert rp.mechanism(res, [0], baseline="fifo") is None
    # elastic jobs hold 20% of Baseline's running time: speeding up only them gives at most 1.25x
    assert mc.elastic_run_share == pytest.approx(0.2) and mc.run_bound == pytest.approx(1.25)
    assert "1.25x |" in rp.render_mechanism_md([mc], "basic")


def test_alternate_readings_restate_a_row_and_do_not_count():
    by = {r.id: r for r in rp.ROWS}
    alt = by["jct-aryl-baseline@strict-fifo"]
    assert alt.alt_of == "jct-aryl-baseline" and alt.num == "fifo" and alt.metric == "avg_jct"
    assert by["queue-aryl-baseline@queue-first"].metric == "avg_queue_time"
    assert by["queue-aryl-baseline"].metric == "avg_queue_time_total"
    assert all(r.id in {p.id for p in rp.ROWS} for r in rp.PRIMARY_ROWS)
    assert len(rp.PRIMARY_ROWS) == 12  # the paper's claims
    assert all(x in rp.READINGS for r in rp.ROWS for x in r.reading)
    res = {
        ("basic", "baseline", 0): _result("baseline", 0, avg_jct=3000.0),
        ("basic", "fifo", 0): _result("fifo", 0, avg_jct=6000.0),
        ("basic", "aryl", 0): _result("aryl", 0, avg_jct=2000.0),
    }
    rows = rp.compute_rows([by["jct-aryl-baseline"], alt], res, [0])
    assert rows[0].within and not rows[1].within
    assert rp.score(rows) == (1, 1)
    md = rp.render_table_md(rows)
    assert "↳ Baseline = strict FIFO" in md


def test_peak_hourly_usage_row_uses_the_arrival_window():
    spec = {r.id: r for r in rp.ROWS}["usage-peak-gain"]
    a = _result("aryl", 0, combined_usage_hourly=[0.5, 0.9, 0.6, 0.9])
    b = _result("fifo", 0, combined_usage_hourly=[0.5, 0.6, 0.6, 0.3])
    a.arrival_hours = 2.5  # type: ignore[attr-defined]
    # hours 0..2 only: max(1.0, 1.5, 1.0); hour 3 (drain, 3.0) is left out
    assert rp.seed_ratio(spec, a, b) == pytest.approx(1.5)


def test_undefined_row_says_why():
    spec = {r.id: r for r in rp.ROWS}["nogroup-preemption"]
    res = {
        ("ideal", "aryl-nogroup", 0): _result("aryl-nogroup", 0, preemption_ratio=0.1),
        ("ideal", "aryl", 0): _result("aryl", 0, preemption_ratio=0.0),
    }
    (row,) = rp.compute_rows([spec], res, [0])
    assert row.stat.n == 0 and row.stat.dropped == 1 and "aryl's preemption_ratio is 0" in row.why
    # the other way round the ratio is a real 0 (-100%), reported, not dropped
    res[("ideal", "aryl", 0)] = _result("aryl", 0, preemption_ratio=0.25)
    res[("ideal", "aryl-nogroup", 0)] = _result("aryl-nogroup", 0, preemption_ratio=0.0)
    (row,) = rp.compute_rows([spec], res, [0])
    assert row.stat.n == 1 and row.stat.mean == 0.0 and rp.fmt_value(row.stat.mean, "%") == "-100.0%"
    assert "aryl-nogroup 0.00%, aryl 25.00%" in row.why


def test_select_rows_rejects_unknown_ids():
    assert [r.id for r in rp.select_rows(["afs-aryl-avg"])] == ["afs-aryl-avg"]
    with pytest.raises(ValueError, match="unknown row 'nope'.*jct-aryl-baseline"):
        rp.select_rows(["nope"])


# ------------------------------------------------------------------------------------------------
# Scales, overrides, sweeps
# ------------------------------------------------------------------------------------------------


def test_ideal_role_is_the_base_scenario_with_ideals_workload_settings():
    ov = rp.ideal_overrides()
    assert ov.get("all_elastic") is True and ov.get("type_agnostic_fraction") == 1.0
    cfgs = rp.role_configs(rp.SCALES["paper"])
    prod = load_scenario("production")
    assert cfgs["basic"] == prod
    ideal = cfgs["ideal"]
    assert ideal.name == "production-ideal" and ideal.cluster == prod.cluster
    assert ideal.workload.all_elastic and ideal.workload.type_agnostic_fraction == 1.0
    assert ideal.workload.duration_hours == prod.workload.duration_hours
    mid = rp.role_configs(rp.SCALES["mid"])
    assert mid["ideal"] == load_scenario("ideal")


def test_sweep_key_validation():
    with pytest.raises(ValueError, match="not a dotted key"):
        rp.check_key("load")
    with pytest.raises(ValueError, match="unknown section 'work'"):
        rp.check_key("work.load")
    with pytest.raises(ValueError, match="section 'workload' has no field 'lod'.*Allowed:.*load"):
        rp.check_key("workload.lod")
    assert rp.parse_sweep("workload.load=0.7, 0.85") == ("workload.load", [0.7, 0.85])
    assert rp.parse_sweep("workload.all_elastic=true") == ("workload.all_elastic", [True])
    cfg = load_scenario("tiny")
    assert rp.apply_override(cfg, "workload.load", 0.7).workload.load == 0.7
    with pytest.raises(ValueError, match="workload.load must be > 0"):
        rp.apply_override(cfg, "workload.load", 0)
    with pytest.raises(ValueError, match="must be a number"):
        rp.apply_override(cfg, "workload.load", "high")
    with pytest.raises(ValueError, match="inference.headroom must be in"):
        rp.apply_override(cfg, "inference.headroom", 1.5)
    with pytest.raises(ValueError, match="use KEY=V1,V2"):
        rp.parse_sweep("workload.load")


@pytest.mark.parametrize(
    "flag, message",
    [
        ("workload.nope=1", "section 'workload' has no field 'nope'"),
        ("workload.load=-1", "workload.load must be > 0, got -1"),
        ("cluster.train_servers=1.5", "must be an integer"),
        ("nodots=1", "not a dotted key"),
    ],
)
def test_cli_rejects_bad_sweeps_with_exit_2(tmp_path, capsys, flag, message):
    rc = main(["reproduce", "--scale", "tiny", "--sweep", flag, "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "episodes").exists()  # nothing ran


def test_cli_rejects_unknown_rows(tmp_path, capsys):
    assert main(["reproduce", "--scale", "tiny", "--rows", "bogus", "--out", str(tmp_path)]) == 2
    assert "unknown row 'bogus'" in capsys.readouterr().err


def test_default_sweep_list_skips_knobs_this_config_lacks():
    notes: list[str] = []
    sweeps = rp.resolve_sweeps(["default"], notes.append)
    keys = [k for k, _ in sweeps]
    for key in rp.DEFAULT_SWEEPS:
        try:
            rp.check_key(key)
        except ValueError:
            assert key not in keys and any(key in n for n in notes)
        else:
            assert key in keys


def test_replace_block_keeps_prose():
    text = "# T\n\nprose\n\n<!-- reproduce:table -->\nold\n<!-- /reproduce:table -->\n\nmore prose\n"
    out = rp.replace_block(text, "table", "new")
    assert "prose" in out and "more prose" in out and "new" in out and "old" not in out
    out2 = rp.replace_block(out, "sweep", "S")
    assert out2.endswith("<!-- reproduce:sweep -->\nS\n<!-- /reproduce:sweep -->\n")


# ------------------------------------------------------------------------------------------------
# End to end on tiny
# ------------------------------------------------------------------------------------------------

FAST_ROWS = "queue-aryl-baseline,jct-aryl-baseline,usage-peak-gain,afs-aryl-avg,nogroup-preemption,nogroup-jct"


def _run_json(capsys, argv):
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc == 0
    return json.loads(out)


def test_reproduce_tiny_end_to_end_and_resume(tmp_path, capsys):
    argv = ["reproduce", "--scale", "tiny", "--seeds", "2", "--rows", FAST_ROWS, "--out",
            str(tmp_path), "--json", "--no-progress"]
    first = _run_json(capsys, argv)
    ids = [r["id"] for r in first["rows"]]
    assert ids == FAST_ROWS.split(",")
    assert first["seeds"] == [0, 1]
    # baseline, aryl, fifo (explains the queue row), aryl-noloan, afs, aryl-nogroup on tiny;
    # aryl-nogroup, aryl on tiny-ideal; 2 seeds each
    assert first["episodes"]["new"] == 16 and first["episodes"]["cached"] == 0
    by = {r["id"]: r for r in first["rows"]}
    for rid in ("queue-aryl-baseline", "jct-aryl-baseline", "usage-peak-gain", "afs-aryl-avg", "nogroup-jct"):
        o = by[rid]["ours"]
        assert o["n"] == 2
        assert all(isinstance(o[k], float) and math.isfinite(o[k]) for k in ("mean", "ci_lo", "ci_hi"))
        assert o["ci_lo"] <= o["mean"] <= o["ci_hi"]
        lo, hi = by[rid]["tolerance"]
        assert by[rid]["within_tolerance"] == (lo <= o["mean"] <= hi)
        assert by[rid]["within_tolerance"] or by[rid]["why"]
    # the JCT row is recomputed here from the cached episodes, seed by seed
    eps = tmp_path / "episodes"
    per_seed = {}
    for s in (0, 1):
        (f,) = (eps / "tiny" / "baseline").glob(f"seed{s}-*.json")
        (a,) = (eps / "tiny" / "aryl").glob(f"seed{s}-*.json")
        per_seed[s] = json.loads(f.read_text())["result"]["avg_jct"] / json.loads(a.read_text())["result"]["avg_jct"]
    assert by["jct-aryl-baseline"]["ours"]["mean"] == pytest.approx(math.sqrt(per_seed[0] * per_seed[1]))
    md = (tmp_path / "reproduction.md").read_text()
    assert "Aryl vs Baseline: average JCT" in md
    # the report's command line names no machine-local --out (tmp_path is outside the current folder)
    assert f"aryl-gym reproduce --scale tiny --seeds 2 --rows {FAST_ROWS}\n" in md and str(tmp_path) not in md
    assert "<!-- reproduce:table-tiny -->" in md and "Made by (at commit" in md
    assert "Outside the paper's regime" not in md  # the label is the mid table's only
    # second run: everything from the cache, the same numbers
    second = _run_json(capsys, argv)
    assert second["episodes"]["new"] == 0 and second["episodes"]["cached"] == 16
    assert [r["ours"] for r in second["rows"]] == [r["ours"] for r in first["rows"]]
    assert list(second["episodes"]["commits"].values()) == [16]
    here = next(iter(second["episodes"]["commits"]))
    assert f"Made by (at commit `{here[:12]}`):" in (tmp_path / "reproduction.md").read_text()
    # a saved episode from another checkout: the report names both commits, not only this one
    rec = json.loads(f.read_text())
    rec["commit"] = "0123456789abcdef0123"
    f.write_text(json.dumps(rec))
    mixed = _run_json(capsys, argv)
    assert mixed["episodes"]["commits"] == {here: 15, "0123456789abcdef0123": 1}
    md = (tmp_path / "reproduction.md").read_text()
    assert f"its episodes were made at commits `{here[:12]}` (15), `0123456789ab` (1)" in md
    # a sweep point equal to the shipped value reuses the same episodes (same config hash)
    # (tiny fixes its job count, so its load is inert and refused as a sweep: a knob that acts)
    ef = load_scenario("tiny").workload.elastic_fraction
    third = _run_json(capsys, [*argv, "--sweep", f"workload.elastic_fraction={ef}"])
    assert third["episodes"]["new"] == 0
    assert [r["ours"] for r in third["sweep"][0]["rows"]] == [r["ours"] for r in first["rows"]]
    # ... and its Baseline-vs-Aryl decomposition is the table's
    table_mech = next(m for m in first["mechanism"] if m["baseline"] == "baseline")
    assert third["sweep"][0]["mechanism"] == table_mech


@pytest.mark.slow
def test_reproduce_tiny_all_rows_with_workers_and_sweep(tmp_path, capsys):
    argv = ["reproduce", "--scale", "tiny", "--seeds", "2", "--workers", "2", "--out", str(tmp_path),
            "--json", "--no-progress", "--sweep", "inference.headroom=0.0,0.2"]
    res = _run_json(capsys, argv)
    assert [r["id"] for r in res["rows"]] == list(rp.ROW_IDS)
    assert len(res["sweep"]) == 2 and res["plot"] and (tmp_path / "sweep.png").exists()
    md = (tmp_path / "reproduction.md").read_text()
    assert "<!-- reproduce:sweep-tiny -->" in md and "inference.headroom=0.2" in md


def test_prediction_error_study_on_tiny(tmp_path, capsys):
    argv = ["reproduce", "--study", "prediction-error", "--scale", "tiny", "--seeds", "2",
            "--policies", "aryl,sjf", "--out", str(tmp_path), "--json"]
    res = _run_json(capsys, argv)
    assert res["sigmas"] == [0.0, 0.25, 0.5, 1.0] and res["skipped"] == {}
    jct = res["ratios"]["avg_jct"]
    for p in ("aryl", "sjf"):
        # sigma = 0 against itself: exactly 1 on every seed
        assert jct[p]["0.0"]["mean"] == pytest.approx(1.0) and jct[p]["0.0"]["n"] == 2
        for sg in ("0.25", "0.5", "1.0"):
            o = jct[p][sg]
            assert o["n"] == 2 and all(math.isfinite(o[k]) for k in ("mean", "ci_lo", "ci_hi"))
    # the cached episodes: the same trace at every sigma (only predictions change)
    a0 = json.loads(next((tmp_path / "episodes" / "tiny" / "sjf").glob("seed0-*.json")).read_text())
    assert a0["result"]["jobs_total"] == 30
    md = (tmp_path / "reproduction.md").read_text()
    assert "<!-- reproduce:prediction-error-tiny -->" in md and "--policies aryl,sjf" in md


def test_study_rejects_unknown_policy_and_rows(tmp_path, capsys):
    assert main(["reproduce", "--study", "prediction-error", "--policies", "aryl,nope",
                 "--out", str(tmp_path)]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["reproduce", "--study", "prediction-error", "--rows", "afs-aryl-avg",
                 "--out", str(tmp_path)]) == 2
    assert "drop --rows" in capsys.readouterr().err


def test_prediction_sigma_changes_predictions_only():
    from aryl_gym.scenario import make_episode

    cfg = load_scenario("tiny")
    a = make_episode(rp.apply_override(cfg, "workload.prediction_sigma", 0.0), 3).jobs
    b = make_episode(rp.apply_override(cfg, "workload.prediction_sigma", 1.0), 3).jobs
    assert [(j.submit, j.work, j.w_max) for j in a] == [(j.submit, j.work, j.w_max) for j in b]
    assert [j.pred_work for j in a] == [j.work for j in a]
    assert any(j.pred_work != j.work for j in b)


def test_row_without_paired_episodes_names_what_is_missing():
    spec = {r.id: r for r in rp.ROWS}["afs-aryl-avg"]
    res = {("basic", "aryl-noloan", 0): _result("aryl-noloan", 0, avg_jct=1.0)}
    (row,) = rp.compute_rows([spec], res, [0, 1])
    assert row.stat.n == 0 and "not run or not cached: afs" in row.why and "aryl-noloan" not in row.why


def test_hetero_study_on_tiny(tmp_path, capsys):
    argv = ["reproduce", "--study", "hetero", "--scale", "tiny", "--seeds", "2",
            "--out", str(tmp_path), "--json"]
    res = _run_json(capsys, argv)
    assert res["fractions"] == [0.05, 0.1, 0.2]
    for row in res["rows"]:
        # aryl never mixes; every figure is paired over both seeds
        assert row["mean"]["aryl/hetero_jobs"] == 0
        assert row["ratio"]["avg_jct"]["n"] == 2
        assert math.isfinite(row["ratio"]["avg_jct"]["mean"])
    md = (tmp_path / "reproduction.md").read_text()
    assert "<!-- reproduce:hetero-tiny -->" in md and "--study hetero" in md
    assert main(["reproduce", "--study", "hetero", "--policies", "aryl",
                 "--out", str(tmp_path)]) == 2
    assert "does not apply to --study hetero" in capsys.readouterr().err


@pytest.mark.parametrize("extra, error", [
    (["--study", "hetero", "--policies", "aryl"], "does not apply to --study hetero"),
    (["--study", "hetero", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["--study", "prediction-error", "--scenario", "nope"], "unknown scenario 'nope'"),
    (["--study", "prediction-error", "--policies", "aryl,nope"], "unknown policy 'nope'"),
])
def test_bad_study_arguments_are_refused_before_the_output_folder_is_made(tmp_path, capsys, extra, error):
    out = tmp_path / "out"
    assert main(["reproduce", "--scale", "tiny", *extra, "--out", str(out)]) == 2
    assert error in capsys.readouterr().err
    assert not out.exists()


def test_the_mid_table_is_labelled_outside_the_papers_regime(monkeypatch):
    """The generated mid block carries its label (was: only the prose around it said so)."""
    from types import SimpleNamespace

    from aryl_gym.commands import reproduce as cmd
    from aryl_gym.reproduce.scales import SCALES

    # the block's own text around the label, with the table parts stubbed
    stub = SimpleNamespace(why_lines=lambda rows: [], score=lambda rows: (0, 0),
                           render_table_md=lambda rows, names: "TABLE", wall_table_md=lambda stats: "")
    monkeypatch.setattr(cmd, "_made_by", lambda stats: "")
    configs = {"basic": SimpleNamespace(name="basic"), "ideal": SimpleNamespace(name="ideal")}
    stats = SimpleNamespace(missing=[], new=0, cached=0)
    mid = cmd._table_block(stub, [], SCALES["mid"], configs, [0, 1], "c", stats)
    paper = cmd._table_block(stub, [], SCALES["paper"], configs, [0, 1], "c", stats)
    assert cmd.MID_REGIME in mid and mid.index(cmd.MID_REGIME) < mid.index("TABLE")
    assert cmd.MID_REGIME not in paper
