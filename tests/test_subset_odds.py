"""scripts/subset_odds.py: odds that a random n-seed subset of pooled held-out results meets a
bar, by hand-made cases."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers import load_script

so = load_script("subset_odds")


def test_constant_ratios_are_certain():
    y = np.full(30, 1000.0)
    assert so.subset_odds(0.9 * y, y, n=10, draws=50, reps=200) == (1.0, 1.0)
    assert so.subset_odds(1.1 * y, y, n=10, draws=50, reps=200) == (0.0, 0.0)


def test_one_seed_subsets_split_by_hand():
    """Two seeds with ratios 0.5 and 2.0: a one-seed subset meets the point bar exactly when it
    draws the first, half the time; it has no interval (one seed has no spread), so it never
    meets the interval's bar (a one-seed bootstrap used to give a zero-width interval, and then
    met it half the time too)."""
    x, y = np.array([0.5, 2.0]), np.array([1.0, 1.0])
    p_point, p_upper = so.subset_odds(x, y, n=1, draws=4000, reps=10)
    assert 0.46 < p_point < 0.54
    assert p_upper == 0.0
    # two seeds that agree: the point bar and the interval's bar are met together
    p_point, p_upper = so.subset_odds(np.array([0.5, 0.5, 2.0]), np.ones(3), n=2, draws=400, reps=200)
    assert p_point == p_upper and 0.25 < p_point < 0.42  # 1 of the 3 pairs holds no 2.0


def test_an_outlier_seed_lowers_the_odds_of_the_interval():
    """Nineteen seeds at 0.85 and one at 2.0 (the whole set still averages 0.91): the subsets
    that hold the outlier have an interval reaching past 1.0."""
    y = np.full(20, 1000.0)
    x = np.r_[np.full(19, 850.0), 2000.0]
    assert x.mean() / y.mean() < 0.97
    _, p_upper = so.subset_odds(x, y, n=10, draws=400, reps=1000)
    assert 0.4 < p_upper < 0.6  # about half the subsets of 10 of 20 hold the outlier
    with pytest.raises(ValueError, match="between 1 and the 20"):
        so.subset_odds(x, y, n=21)


def _write(tmp_path, name, runs):
    p = tmp_path / name
    p.write_text(json.dumps(runs))
    return str(p)


def test_pooling_files_with_labels_and_loads(tmp_path, capsys):
    a = _write(tmp_path, "a.json", [{"load": 0.9, "avg_jct": {"best": [1.0, 2.0], "aryl": [2.0, 2.0]}},
                                     {"load": 1.3, "avg_jct": {"best": [9.0], "aryl": [1.0]}}])
    b = _write(tmp_path, "b.json", [{"load": 0.9, "avg_jct": {"ppo-v1": [3.0], "aryl": [4.0]}}])
    x, y = so.pooled([a, b], {None: "ppo-v1", 0: "best"}, "aryl", 0.9)
    assert x.tolist() == [1.0, 2.0, 3.0] and y.tolist() == [2.0, 2.0, 4.0]
    with pytest.raises(ValueError, match=r"no entry 'ppo-v1'; it has aryl, best \(use --agent 0:LABEL"):
        so.pooled([a], {None: "ppo-v1"}, "aryl", 0.9)
    assert so.main([a, b, "--agent", "ppo-v1", "--agent", "0:best", "--load", "0.9", "--n", "1,3",
                    "--draws", "20"]) == 0
    out = capsys.readouterr().out
    assert "3 pooled seeds at load 0.9: ppo-v1 / aryl = 0.750" in out and "| 3 |" in out


def test_bad_files_are_clear_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert so.main([str(bad), "--agent", "x", "--load", "0.9"]) == 2
    assert "not a readable eval_v1.py --json file" in capsys.readouterr().err
    other = _write(tmp_path, "o.json", [{"load": 1.3, "avg_jct": {"x": [1.0], "aryl": [1.0]}}])
    assert so.main([other, "--agent", "x", "--load", "0.9"]) == 2
    assert "no file has load 0.9" in capsys.readouterr().err
