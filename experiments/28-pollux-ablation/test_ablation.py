"""The ablation's variants are Pollux-250 with exactly the named advantage taken away, and the
command refuses what it cannot run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import ablation  # noqa: E402
from aryl_gym.agents import make_policy  # noqa: E402

from aryl_gym.config import ConfigError  # noqa: E402


def test_variants_differ_from_pollux_250_only_in_range_and_tuning() -> None:
    ref = make_policy("pollux-250")
    for name, kw in ablation.VARIANTS.items():
        pol = ablation.policy(name)
        if kw is None:
            assert pol.name == name
            continue
        assert (pol.generations, pol.pop_size, pol.p, pol.explore, pol.upstream_mutation) == (
            ref.generations, ref.pop_size, ref.p, ref.explore, ref.upstream_mutation)
        assert (pol.elasticity, pol.tune) == (kw["elasticity"], kw["tune"])
    assert ablation.policy("pollux-250").elasticity == ref.elasticity and ablation.policy("pollux-250").tune


@pytest.mark.parametrize("argv", [["--seeds", "1"], ["--variants", "nope"]])
def test_bad_arguments_are_refused(argv: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        ablation.main([*argv, "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())


def test_an_unknown_scenario_fails_before_any_episode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown scenario"):
        ablation.main(["--scenario", "no-such", "--out", str(tmp_path)])
    assert not any(tmp_path.iterdir())
