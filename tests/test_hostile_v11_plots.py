"""Hostile pass v11: the leaderboard's plots and report never drop an entrant, a seed or a value
without a word (an entrant missing the first seed, fewer seeds pooled than the title says, a
0-minute bar for no data, a missing ``rank_by`` value ranked without a mark)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aryl_gym.leaderboard import Entrant, Suite
from aryl_gym.leaderboard.report import aggregate, render_console, render_markdown
from aryl_gym.leaderboard.results import METRIC_TYPES
from aryl_gym.stats import available

pytest.importorskip("matplotlib")

from aryl_gym.leaderboard import plots  # noqa: E402 - after the matplotlib check

needs_stats = pytest.mark.skipif(not available(), reason="needs the stats extra (rliable)")

SEEDS = (0, 1, 2)
NAMES = ("fifo", "aryl", "late", "ghost")  # ghost never has a row


def _suite(scenarios: tuple[str, ...] = ("tiny",), names: tuple[str, ...] = NAMES) -> Suite:
    return Suite(name="s", description="", scenarios=scenarios, seeds=SEEDS,
                 entrants=tuple(Entrant(name=n) for n in names), baseline="fifo")


def _row(policy: str, seed: int, scenario: str = "tiny", **metrics: Any) -> dict[str, Any]:
    r: dict[str, Any] = {k: (0 if t is int else (False if t is bool else 1.0)) for k, t in METRIC_TYPES.items()}
    r.update(suite="s", scenario=scenario, scenario_name=scenario, seed=seed, policy=policy,
             kind="policy", source="", env_kwargs="", commit="c", config_hash="h", note="",
             jobs_unfinished=0, jct_lower_bound=100.0, avg_jct=1000.0 + 100.0 * seed,
             avg_queue_time=600.0, p95_queue_time=1200.0)
    r.update(metrics)
    return r


def _series(usage: float = 0.5) -> dict[str, Any]:
    return {"combined_usage_hourly": [usage, usage], "jcts": [100.0, 200.0]}


@pytest.fixture
def figs(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The figures make_plots saves, by file name (their artists stay readable after close)."""
    seen: dict[str, Any] = {}

    def spy(fig: Any, plt: Any, path: Path) -> Path:
        seen[path.name] = fig  # not written: the pixels are not under test
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "_save", spy)
    # the profile's bootstrap is not under test here
    monkeypatch.setattr(plots, "performance_profile_plot", lambda *a: None)
    yield seen


def _legend(fig: Any) -> list[str]:
    lg = fig.axes[0].get_legend()
    return [t.get_text() for t in lg.get_texts()] if lg else []


def test_usage_plot_draws_an_entrant_without_the_first_seed(tmp_path: Path, figs: dict[str, Any]) -> None:
    # late has no row (and no series) on seed 0; aryl has rows but no series file at all
    rows = [_row(p, s) for p in ("fifo", "aryl") for s in SEEDS] + [_row("late", s) for s in (1, 2)]
    series = {("s", "tiny", s, "fifo"): _series() for s in SEEDS}
    series[("s", "tiny", 1, "late")] = _series(0.3)
    plots.make_plots(tmp_path, _suite(), rows, series)
    fig = figs["usage_tiny.png"]
    # was: legend ['fifo'] (late, without seed 0, gone without a word)
    assert _legend(fig) == ["fifo", "late (seed 1)"]
    lines = {ln.get_label(): ln.get_ydata().tolist() for ln in fig.axes[0].get_lines()}
    assert lines["late (seed 1)"] == pytest.approx([30.0, 30.0])
    title = fig.axes[0].get_title()
    assert "no usage series: aryl" in title and "no results: ghost" in title


def test_usage_plot_on_complete_data_is_unchanged(tmp_path: Path, figs: dict[str, Any]) -> None:
    rows = [_row(p, s) for p in ("fifo", "aryl") for s in SEEDS]
    series = {("s", "tiny", s, p): _series() for s in SEEDS for p in ("fifo", "aryl")}
    plots.make_plots(tmp_path, _suite(names=("fifo", "aryl")), rows, series)
    fig = figs["usage_tiny.png"]
    assert _legend(fig) == ["fifo", "aryl"]
    assert fig.axes[0].get_title().startswith("tiny, seed 0: hourly combined usage")
    assert "not drawn" not in fig.axes[0].get_title()


def test_jct_cdf_says_what_was_pooled(tmp_path: Path, figs: dict[str, Any]) -> None:
    rows = [_row(p, s) for p in ("fifo", "aryl") for s in SEEDS] + [_row("late", s) for s in (1, 2)]
    series = {("s", "tiny", s, "fifo"): _series() for s in SEEDS}
    series[("s", "tiny", 1, "late")] = _series()
    series[("s", "tiny", 2, "late")] = {"combined_usage_hourly": [0.1], "jcts": []}  # no JCTs
    plots.make_plots(tmp_path, _suite(), rows, series)
    ax = figs["jct_cdf_tiny.png"].axes[0]
    # was: "tiny: JCT CDF (3 seeds pooled)" over late's one seed and no word on aryl
    assert "3 seeds pooled" not in ax.get_title()
    assert _legend(figs["jct_cdf_tiny.png"]) == ["fifo", "late (1 of 3 seeds)"]
    assert "no JCTs: aryl" in ax.get_title() and "no results: ghost" in ax.get_title()
    # complete data: every seed pooled, said once in the title
    figs.clear()
    series = {("s", "tiny", s, p): _series() for s in SEEDS for p in ("fifo", "aryl")}
    plots.make_plots(tmp_path, _suite(names=("fifo", "aryl")), rows[:6], series)
    ax = figs["jct_cdf_tiny.png"].axes[0]
    assert ax.get_title() == "tiny: JCT CDF (all 3 seeds pooled)"
    assert _legend(figs["jct_cdf_tiny.png"]) == ["fifo", "aryl"]


def test_queue_chart_draws_no_bar_without_values(tmp_path: Path, figs: dict[str, Any]) -> None:
    rows = ([_row("fifo", s) for s in SEEDS]
            + [_row("aryl", s, avg_queue_time=None, p95_queue_time=None) for s in SEEDS]
            + [_row("late", s, p95_queue_time=None if s == 2 else 900.0) for s in (1, 2)])
    plots.make_plots(tmp_path, _suite(), rows, {})
    ax = figs["queue_tiny.png"].axes[0]
    bars = sorted((round(p.get_x() + p.get_width() / 2, 2), p.get_height()) for p in ax.patches)
    # was: two 0-minute bars at aryl (x = 1), a perfect score
    assert bars == [(-0.19, pytest.approx(10.0)), (0.19, pytest.approx(20.0)),
                    (1.81, pytest.approx(10.0)), (2.19, pytest.approx(15.0))]
    texts = sorted((round(t.get_position()[0], 2), t.get_text()) for t in ax.texts)
    assert texts == [(0.81, "no data"), (1.19, "no data"), (2.19, "n=1")]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fifo", "aryl", "late (2 of 3 seeds)"]
    assert "no results: ghost" in ax.get_title()


@needs_stats
def test_interval_estimates_names_the_entrants_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rliable import plot_utils

    seen: dict[str, Any] = {}
    real = plot_utils.plot_interval_estimates

    def spy(*a: Any, **kw: Any) -> Any:
        seen["fig"], axes = real(*a, **kw)
        return seen["fig"], axes

    monkeypatch.setattr(plot_utils, "plot_interval_estimates", spy)

    def en(policy: str, v: float, one_seed: bool = False) -> dict[str, Any]:
        c = {"value": v, "ci": [None, None] if one_seed else [v - 0.1, v + 0.1], "seeds": 1 if one_seed else 3}
        return {"policy": policy, "score_iqm": c, "optimality_gap": c, "p_improvement": c}

    gap = {**en("late", 0.4), "optimality_gap": None}
    agg = {"protocol": {"intervals": {"library": "rliable"}, "reference": "aryl"},
           "scenarios": {"tiny": {"entrants": [en("fifo", 0.7), en("aryl", 0.5), en("one", 0.3, True), gap]}}}
    suite = _suite(names=("fifo", "aryl", "one", "late", "ghost"))
    assert plots.interval_estimates_plot(tmp_path, suite, agg, plots._pyplot()) is not None
    text = " ".join(t.get_text() for t in seen["fig"].texts)
    # was: one, late and ghost left out without a word
    assert "no interval (one seed): one" in text
    assert "no interval (a value missing): late" in text
    assert "no results: ghost" in text
    # every entrant drawn: no note
    agg["scenarios"]["tiny"]["entrants"] = [en("fifo", 0.7), en("aryl", 0.5)]
    plots.interval_estimates_plot(tmp_path, _suite(names=("fifo", "aryl")), agg, plots._pyplot())
    assert "not drawn" not in " ".join(t.get_text() for t in seen["fig"].texts)


@needs_stats
def test_performance_profile_says_episodes_per_entrant_and_who_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_profile = plots.performance_profile
    # the bands are not under test: few replications
    monkeypatch.setattr(plots, "performance_profile", lambda s, t: real_profile(s, t, reps=50))
    seen: dict[str, Any] = {}

    def spy(fig: Any, plt: Any, path: Path) -> Path:
        seen[path.name] = fig
        plt.close(fig)
        return path

    monkeypatch.setattr(plots, "_save", spy)
    rows = ([_row(p, s, avg_jct=1000.0 + 10 * s + 100 * i) for i, p in enumerate(("fifo", "aryl")) for s in SEEDS]
            + [_row("late", s) for s in (1, 2)] + [_row("bad", s, avg_jct=None) for s in SEEDS])
    plots.performance_profile_plot(tmp_path, _suite(names=("fifo", "aryl", "late", "bad", "ghost")),
                                   rows, plots._pyplot())
    fig = seen["performance_profile.png"]
    # was: "(4/6 episodes per entrant)" without whose, bad and ghost left out without a word
    assert _legend(fig) == ["fifo (3 episodes)", "aryl (3 episodes)", "late (2 episodes)"]
    title = fig.axes[0].get_title()
    assert "episodes per entrant in the legend" in title
    assert "no seed with a score on every scenario: bad" in title and "no results: ghost" in title


# ----------------------------------------------------------------------------------------------
# the report
# ----------------------------------------------------------------------------------------------


def _entrants(agg: dict[str, Any]) -> list[str]:
    return [en["policy"] for en in agg["scenarios"]["tiny"]["entrants"]]


def _rank_rows() -> list[dict[str, Any]]:
    # late is the best on the seeds it has a value for, but has none on seed 2
    jct = {"fifo": 2000.0, "aryl": 1000.0, "late": 500.0}
    return [_row(p, s, avg_jct=None if (p, s) == ("late", 2) else jct[p] + 10.0 * s)
            for p in ("fifo", "aryl", "late") for s in SEEDS]


@pytest.mark.parametrize("with_ci", [pytest.param(True, marks=needs_stats), False])
def test_missing_rank_by_value_is_marked_and_ranked_last(monkeypatch: pytest.MonkeyPatch, with_ci: bool) -> None:
    import aryl_gym.leaderboard.report as report

    monkeypatch.setattr(report, "available", lambda: with_ci)
    suite = _suite(names=("fifo", "aryl", "late"))
    agg = aggregate(_rank_rows(), suite)
    # was: without intervals late ranked 1st on its 2 seeds; with them last; neither marked
    assert _entrants(agg) == ["aryl", "fifo", "late"]
    md = render_markdown(agg)
    row = next(ln for ln in md.splitlines() if ln.startswith("| 3 | late"))
    assert row.startswith("| 3 | late ‡ | 505 ± 7 (n=2) |")
    late = agg["scenarios"]["tiny"]["entrants"][-1]
    assert late["rank"] == 3 and late["rank_by_missing"] == [2]
    assert "- ‡ late: no `avg_jct` value on seed 2 (2 of its 3 seeds have one)" in md
    assert "‡ marks an entrant with no `avg_jct` value on some seed" in md
    assert "late ‡" in render_console(agg) and "‡ late: no `avg_jct` value on seed 2" in render_console(agg)


@pytest.mark.parametrize("with_ci", [pytest.param(True, marks=needs_stats), False])
def test_complete_data_has_no_marks(monkeypatch: pytest.MonkeyPatch, with_ci: bool) -> None:
    import aryl_gym.leaderboard.report as report

    monkeypatch.setattr(report, "available", lambda: with_ci)
    rows = [r for r in _rank_rows() if r["policy"] != "late"]
    agg = aggregate(rows, _suite(names=("fifo", "aryl")))
    assert _entrants(agg) == ["aryl", "fifo"]
    md = render_markdown(agg)
    assert "‡" not in md and "(n=" not in md
    assert "‡" not in render_console(agg)


@needs_stats
def test_overall_names_entrants_missing_a_scenario() -> None:
    suite = _suite(scenarios=("tiny", "big"), names=("fifo", "aryl", "late"))
    rows = [_row(p, s, scenario=sc) for sc in ("tiny", "big") for p in ("fifo", "aryl") for s in SEEDS]
    rows += [_row("late", s, scenario="tiny") for s in SEEDS]
    agg = aggregate(rows, suite)
    assert {en["policy"] for en in agg["overall"]["entrants"]} == {"fifo", "aryl"}
    md = render_markdown(agg)
    # was: late absent from "All scenarios" without a word
    assert "Not in this comparison (no results on every scenario): late." in md


@needs_stats
def test_overall_without_any_entrant_on_every_scenario_renders() -> None:
    suite = _suite(scenarios=("tiny", "big"), names=("fifo", "aryl"))
    rows = [_row("fifo", s, scenario="tiny") for s in SEEDS] + [_row("aryl", s, scenario="big") for s in SEEDS]
    # was: KeyError 'scenarios' in render_markdown
    md = render_markdown(aggregate(rows, suite))
    assert "Not in this comparison (no results on every scenario): fifo, aryl." in md


def test_jct_cdf_counts_unfinished_jobs(tmp_path: Path, figs: dict[str, Any]) -> None:
    # the episodes' jcts hold finished jobs only: aryl left 2 jobs unfinished on seed 1, so its
    # 6 finished JCTs are 6 of 8 jobs (was: a CDF reaching 1, as if every job had finished)
    rows = [_row("fifo", s) for s in SEEDS] + [_row("aryl", s, jobs_unfinished=2 if s == 1 else 0) for s in SEEDS]
    series = {("s", "tiny", s, p): _series() for s in SEEDS for p in ("fifo", "aryl")}
    plots.make_plots(tmp_path, _suite(names=("fifo", "aryl")), rows, series)
    fig = figs["jct_cdf_tiny.png"]
    assert _legend(fig) == ["fifo", "aryl (2 unfinished: stops at 75%)"]
    ys = {ln.get_label(): ln.get_ydata() for ln in fig.axes[0].get_lines()}
    assert max(ys["aryl (2 unfinished: stops at 75%)"]) == pytest.approx(6 / 8)
    assert max(ys["fifo"]) == pytest.approx(1.0)
