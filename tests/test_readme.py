"""The README's figures about ``make run`` (= ``aryl-gym main``) against the suite file it runs
(``configs/suites/quick.yaml``): entrants, scenario, seeds and episodes."""

from __future__ import annotations

import re
from pathlib import Path

from aryl_gym.leaderboard import load_suite

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10}


def _paragraph(start: str) -> str:
    i = README.index(start)
    return README[i:README.index("\n\n", i)]


def _count(text: str) -> int:
    return int(text) if text.isdigit() else NUMBERS[text]


def test_make_run_paragraph_matches_the_quick_suite() -> None:
    suite = load_suite("quick", allow_missing=True)
    para = _paragraph("`make run` (= `aryl-gym main`)")
    assert "`quick` suite (`configs/suites/quick.yaml`)" in para
    m = re.search(r"(\w+) entrants,", para)
    assert m and _count(m.group(1)) == len(suite.entrants)
    # every entrant named in the paragraph, and nothing else in the two lists of names
    lists = re.findall(r"\(((?:`[\w.-]+`(?:, )?)+)\)", para)
    named = [n for group in lists for n in re.findall(r"`([\w.-]+)`", group)]
    assert sorted(named) == sorted(e.name for e in suite.entrants)
    assert re.search(r"on the `(\w+)` scenario", para).group(1) == "testbed"  # type: ignore[union-attr]
    assert list(suite.scenarios) == ["testbed"]
    m = re.search(r"over (\d+) held-out seeds \((\d+)-(\d+)\), (\d+) episodes", para)
    assert m is not None
    n, lo, hi, episodes = map(int, m.groups())
    assert list(suite.seeds) == list(range(lo, hi + 1)) and n == len(suite.seeds)
    assert episodes == len(suite.seeds) * len(suite.entrants) * len(suite.scenarios)


def test_figures_table_is_the_quick_suite() -> None:
    """The quick leaderboard's table in the README's figures: the seeds and episodes of its
    caption, one row per entrant of the suite."""
    suite = load_suite("quick", allow_missing=True)
    cap = _paragraph("The quick leaderboard (`make run`:")
    m = re.search(r"`make run`: (\w+), held-out seeds (\d+)-(\d+), (\d+) episodes", cap)
    assert m is not None
    assert m.group(1) in suite.scenarios
    assert list(suite.seeds) == list(range(int(m.group(2)), int(m.group(3)) + 1))
    assert int(m.group(4)) == len(suite.seeds) * len(suite.entrants)
    i = README.index("| rank | entrant |", README.index(cap))
    rows = README[i:README.index("\n\n", i)].splitlines()[2:]
    names = [r.split("|")[2].strip().split(" ")[0] for r in rows]
    assert sorted(names) == sorted(e.name for e in suite.entrants)
