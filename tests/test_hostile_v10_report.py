"""Hostile pass v10: the leaderboard's report layer on degenerate data (zero-valued rank_by,
non-finite values typed into results.csv, entrants that were never compared)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aryl_gym.leaderboard.report import aggregate, render_markdown
from aryl_gym.leaderboard.results import COLUMNS, METRIC_TYPES, rewrite_rows, scan_rows
from aryl_gym.leaderboard.suites import load_suite
from aryl_gym.stats import available

needs_stats = pytest.mark.skipif(not available(), reason="needs the stats extra (rliable)")

POLICIES = ["baseline", "fifo", "sjf", "aryl"]


def _suite(tmp_path: Path, rank_by: str = "avg_jct", seeds: tuple[int, ...] = (0, 1, 2)) -> Any:
    p = tmp_path / "s.yaml"
    p.write_text(
        f"name: hv10\nscenarios: [tiny]\nseeds: {list(seeds)}\nbaseline: baseline\n"
        f"rank_by: {rank_by}\npolicies: {POLICIES}\n",
        encoding="utf-8",
    )
    return load_suite(p)


def _row(policy: str, seed: int, **metrics: Any) -> dict[str, Any]:
    r: dict[str, Any] = {c: "" for c in COLUMNS}
    for k, t in METRIC_TYPES.items():
        r[k] = False if t is bool else t(0)
    r.update(suite="hv10", scenario="tiny", scenario_name="tiny", env_id="aryl_gym/Aryl-v2",
             seed=seed, policy=policy, kind="policy", wall_time_s=0.1, commit="c",
             config_hash="h", jobs_total=10, jobs_completed=10, jct_lower_bound=100.0)
    r.update(metrics)
    return r


# (policy -> avg JCT per seed): sjf and aryl identical, fifo clearly worst
JCT = {"baseline": [1000.0, 1500.0, 1200.0], "fifo": [2000.0, 2600.0, 2300.0],
       "sjf": [600.0, 700.0, 650.0], "aryl": [600.0, 700.0, 650.0]}


def _rows(seeds: tuple[int, ...] = (0, 1, 2), **over: Any) -> list[dict[str, Any]]:
    return [_row(p, s, **{"avg_jct": JCT[p][s], **over.get(p, {}).get(s, {})}) for p in POLICIES for s in seeds]


def _ranks(agg: dict[str, Any]) -> dict[str, int]:
    return {en["policy"]: en["rank"] for en in agg["scenarios"]["tiny"]["entrants"]}


def test_nan_or_inf_typed_into_results_csv_is_a_damaged_row(tmp_path: Path) -> None:
    # was: parsed as a value; the report then ranked an entrant with an inf avg JCT at 1=
    csv_path = tmp_path / "results.csv"
    rewrite_rows(csv_path, _rows())
    lines = csv_path.read_bytes().decode("utf-8").split("\r\n")
    i = COLUMNS.index("avg_jct")
    for n, bad in ((1, "nan"), (2, "inf")):
        f = lines[n].split(",")
        f[i] = bad
        lines[n] = ",".join(f)
    csv_path.write_bytes("\r\n".join(lines).encode("utf-8"))
    scan = scan_rows(csv_path)
    assert [ln for ln, _ in scan.damaged] == [2, 3]
    assert all("not a finite number" in why for _, why in scan.damaged)
    assert len(scan.rows) == len(_rows()) - 2


@needs_stats
def test_inf_rank_by_value_does_not_rank_first(tmp_path: Path) -> None:
    # rows handed to aggregate directly (an inf never reaches it from a results.csv now)
    rows = _rows(fifo={2: {"avg_jct": float("inf")}})
    ranks = _ranks(aggregate(rows, _suite(tmp_path)))
    # was: fifo (worst, and inf on one seed) uncompared at rank 1=
    assert ranks["fifo"] > ranks["baseline"] > ranks["aryl"]


@needs_stats
def test_zero_rank_by_value_is_best_not_missing(tmp_path: Path) -> None:
    # rank_by preemptions: baseline, sjf and aryl never preempt, fifo does on every seed
    rows = _rows(fifo={s: {"preemptions": 5 + s} for s in range(3)})
    agg = aggregate(rows, _suite(tmp_path, rank_by="preemptions"))
    ranks = _ranks(agg)
    order = [en["policy"] for en in agg["scenarios"]["tiny"]["entrants"]]
    # was: the three entrants with 0 preemptions ranked 2= behind fifo (0 read as "no value")
    assert ranks["fifo"] >= max(ranks[p] for p in ("baseline", "sjf", "aryl"))
    assert order[-1] == "fifo"


@needs_stats
def test_one_seed_ties_column_names_uncompared_entrants(tmp_path: Path) -> None:
    agg = aggregate(_rows(seeds=(0,)), _suite(tmp_path, seeds=(0,)))
    assert set(_ranks(agg).values()) == {1}
    md = render_markdown(agg)
    row = next(ln for ln in md.splitlines() if ln.startswith("| 1= | fifo"))
    # was: "-" in the ties column, as if fifo were separated from everybody
    assert row.rstrip(" |").endswith("not compared with baseline, sjf, aryl")


@needs_stats
def test_hand_computed_ratio_and_zero_spread_tie(tmp_path: Path) -> None:
    agg = aggregate(_rows(), _suite(tmp_path))
    ens = {en["policy"]: en for en in agg["scenarios"]["tiny"]["entrants"]}
    want = sum(JCT["fifo"]) / sum(JCT["baseline"])
    assert ens["fifo"]["vs_baseline"]["value"] == pytest.approx(want)
    # identical on every seed: ratio 1 with a zero-width interval, tied, never separated
    assert ens["sjf"]["vs_reference"]["ci"] == [pytest.approx(1.0), pytest.approx(1.0)]
    assert ens["sjf"]["rank"] == ens["aryl"]["rank"] == 1 and ens["sjf"]["tied_with"] == ["aryl"]
