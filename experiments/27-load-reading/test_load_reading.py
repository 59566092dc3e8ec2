"""The experiment's rows are the reproduction's primary rows (paper value, policies, metric),
and its command refuses what it cannot run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import load_reading  # noqa: E402

from aryl_gym.reproduce.claims import ROWS  # noqa: E402


def test_rows_are_the_reproductions() -> None:
    spec = {r.id: r for r in ROWS}
    for rid, (paper, num, den, metric) in load_reading.ROWS.items():
        r = spec[rid]
        assert (r.paper, r.num, r.den, r.metric, r.role, r.stat) == (paper, num, den, metric, "basic", "ratio")


@pytest.mark.parametrize("argv", [
    ["--load", "1.0", "--rows", "no-such-row"],
    ["--load", "0"],
    ["--load", "nan"],
    ["--load", "1.0", "--seeds", "1"],
])
def test_refuses_what_it_cannot_run(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as e:
        load_reading.main([*argv, "--out", str(tmp_path)])
    assert e.value.code == 2
    assert not any(tmp_path.iterdir())  # nothing ran
