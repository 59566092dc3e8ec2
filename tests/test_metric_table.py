"""The metric table (aryl_gym.metrics.METRICS): one row per scalar figure of EpisodeResult, read
by the CLI, the leaderboard report, the training callbacks and evaluation."""

from __future__ import annotations

import dataclasses

import pytest

from aryl_gym import metrics as M
from aryl_gym.metrics import METRICS, VIEWS, EpisodeResult


def test_table_covers_every_scalar_figure_once():
    scalars = [f.name for f in dataclasses.fields(EpisodeResult)
               if f.name not in ("scenario", "policy", "seed") and f.name not in EpisodeResult.SERIES]
    assert sorted(scalars) == sorted(METRICS)
    for m in METRICS.values():
        assert m.fmt in ("s", "h", "%", "n", "c"), m
        assert m.unit in ("s", "share", "GPU-h", "ms", ""), m
        assert m.views <= set(VIEWS), m
        assert m.higher_is_better in (True, False, None)


def test_views_are_what_each_reader_uses():
    from aryl_gym.commands import compare, simulate
    from aryl_gym.leaderboard import report
    from aryl_gym.train import evaluation

    assert compare.METRICS == list(M.names("compare"))
    assert [m.name for m in compare.TABLE] == list(M.names("compare-table"))
    assert simulate.SUMMARY_KEYS == list(M.names("simulate"))
    assert [c[0] for c in report.MD_COLUMNS] == list(M.names("report"))
    assert [c[0] for c in report.CONSOLE_COLUMNS] == list(M.names("console"))
    assert report.MD_COLUMNS[0] == ("avg_jct", "avg JCT (s)", "s")
    assert {c[0]: c[2] for c in report.MD_COLUMNS}["makespan"] == "h"
    assert evaluation.KEY_METRICS == M.names("train")
    # every view holds the headline figure
    for v in VIEWS:
        assert "avg_jct" in M.names(v)


def test_training_tags_keep_their_names():
    pytest.importorskip("stable_baselines3")
    from aryl_gym.train.evaluation import CLUSTER_TAGS, REFERENCE_FIGURES

    assert CLUSTER_TAGS["combined_usage"] == "usage"  # TensorBoard tag kept from the first runs
    assert CLUSTER_TAGS["avg_jct"] == "avg_jct"
    assert REFERENCE_FIGURES == ("avg_jct", "p95_jct", "avg_queue_time")


def test_ranking_direction_and_unknown_names():
    better = {n for n, m in METRICS.items() if m.higher_is_better}
    assert better == {"train_util", "train_util_makespan", "combined_usage",
                      "loaned_gpu_hours_used", "jobs_completed"}
    assert M.higher_is_better("combined_usage") and not M.higher_is_better("avg_jct")
    assert not M.higher_is_better("no_such_figure")
    assert M.metric("no_such_figure").fmt == "n"
    with pytest.raises(KeyError, match="views: simulate"):
        M.view("nope")


def test_failed_flag_is_printed_as_a_count_of_episodes():
    """The leaderboard prints the per-episode 0/1 ``failed`` flag as how many episodes failed,
    never as a mean with a spread."""
    from aryl_gym.leaderboard.report import fmt_stat, stats

    assert METRICS["failed"].fmt == "c" and METRICS["failed"].higher_is_better is False
    assert fmt_stat(stats([0, 1, 0, 0]), "c") == "1/4"
    assert fmt_stat(stats([0, 0, 0]), "c") == "0/3"
    assert fmt_stat(stats([1]), "c") == "1/1"
