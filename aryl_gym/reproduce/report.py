"""The headline table's tasks and rendering, and the generated blocks of docs/reproduction.md."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from aryl_gym.commands._common import table
from aryl_gym.config import (
    ScenarioConfig,
)
from aryl_gym.episodes import EpisodeTask, RunStats, policy_task
from aryl_gym.fileio import update_text_locked
from aryl_gym.metrics import EpisodeResult
from aryl_gym.reproduce.claims import READINGS, RowResult, RowSpec, fmt_value
from aryl_gym.reproduce.scales import Scale

# ----------------------------------------------------------------------------------------------
# The headline table
# ----------------------------------------------------------------------------------------------


def seeds_for(scale: Scale, n: int | None, first_seed: int, policy: str) -> list[int]:
    k = n if n is not None else scale.seeds
    if n is None and policy in scale.slow_seeds:
        k = scale.slow_seeds[policy]
    elif n is not None and policy in scale.slow_seeds:
        k = min(n, scale.slow_seeds[policy])
    return list(range(first_seed, first_seed + k))


def table_tasks(
    specs: Sequence[RowSpec],
    configs: Mapping[str, ScenarioConfig],
    scale: Scale,
    n_seeds: int | None,
    first_seed: int,
    tag: str = "",
) -> list[EpisodeTask]:
    """The episodes the rows need: each (role, policy, seed) once."""
    need: dict[tuple[str, str], None] = {}
    for sp in specs:
        for p in sp.policies:
            need[(sp.role, p)] = None
    return [policy_task(configs[role], pol, s, role, tag)
            for role, pol in need for s in seeds_for(scale, n_seeds, first_seed, pol)]


def results_by_role(results: Mapping[EpisodeTask, EpisodeResult]) -> dict[tuple[str, str, int], EpisodeResult]:
    return {(t.role, t.policy, t.seed): r for t, r in results.items()}


def all_seeds(tasks: Sequence[EpisodeTask]) -> list[int]:
    return sorted({t.seed for t in tasks})


def render_table_md(rows: Sequence[RowResult], names: Mapping[str, str] | None = None) -> str:
    """The table in Markdown; ``names`` maps a role to its scenario's name."""
    names = names or {}
    lines = [
        "| row | paper | ours (geo. mean of per-seed ratios) | 95% CI | seeds | tolerance | within | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sp, st = r.spec, r.stat
        ci = f"{fmt_value(st.lo, sp.fmt)} .. {fmt_value(st.hi, sp.fmt)}" if math.isfinite(st.lo) else "-"
        lo, hi = r.band
        ok = "yes" if r.within else ("no (CI overlaps)" if r.ci_overlaps else "no")
        label = sp.name
        if sp.alt_of:  # the same claim under another reading
            label = "&nbsp;&nbsp;&nbsp;&nbsp;↳ " + "; ".join(READINGS[x] for x in sp.reading)
        elif sp.reading:
            label += " (" + "; ".join(READINGS[x] for x in sp.reading) + ")"
        lines.append(
            f"| {label} | {fmt_value(sp.paper, sp.fmt)} | {fmt_value(st.mean, sp.fmt)}"
            f"{' (arith. mean: a seed has 0)' if st.method == 'arithmetic' else ''} | {ci} | "
            f"{st.n}{f' ({st.dropped} undefined)' if st.dropped else ''}"
            f"{f', {r.failed} episode(s) failed' if r.failed else ''} | "
            f"{fmt_value(lo, sp.fmt)} .. {fmt_value(hi, sp.fmt)} | {ok} | {sp.variant} on `{names.get(sp.role, sp.role)}` |"
        )
    return "\n".join(lines)


def render_table_text(rows: Sequence[RowResult]) -> str:
    body = []
    for r in rows:
        sp, st = r.spec, r.stat
        ci = f"{fmt_value(st.lo, sp.fmt)}..{fmt_value(st.hi, sp.fmt)}" if math.isfinite(st.lo) else "-"
        lo, hi = r.band
        # as the Markdown table: an arithmetic mean and the undefined seeds are named (was: the
        # console table showed neither)
        body.append([sp.id, fmt_value(sp.paper, sp.fmt),
                     fmt_value(st.mean, sp.fmt) + (" (arith. mean)" if st.method == "arithmetic" else ""), ci,
                     f"{st.n}{f' ({st.dropped} undefined)' if st.dropped else ''}"
                     f"{f' ({r.failed} failed)' if r.failed else ''}",
                     f"{fmt_value(lo, sp.fmt)}..{fmt_value(hi, sp.fmt)}", "yes" if r.within else "no"])
    return table(body, ["row", "paper", "ours", "95% CI", "n", "tolerance", "within"])


def why_lines(rows: Sequence[RowResult]) -> list[str]:
    out = []
    for r in rows:
        if r.within:
            continue
        name = r.spec.name
        if r.spec.alt_of:
            name += " [" + "; ".join(READINGS[x] for x in r.spec.reading) + "]"
        out.append(f"- **{name}**: {r.why}")
    return out


def score(rows: Sequence[RowResult]) -> tuple[int, int]:
    """(rows within tolerance, rows) over the paper's claims under the defended readings."""
    prim = [r for r in rows if not r.spec.alt_of]
    return sum(r.within for r in prim), len(prim)


# ----------------------------------------------------------------------------------------------
# The document
# ----------------------------------------------------------------------------------------------


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``<!-- reproduce:NAME -->`` markers set to ``body``
    (appended at the end when absent), so hand-written prose around it is kept."""
    start, end = f"<!-- reproduce:{name} -->", f"<!-- /reproduce:{name} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    i, j = text.find(start), text.find(end)
    if i >= 0 and j > i:
        return text[:i] + block + text[j + len(end):]
    return text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"


def update_doc(path: Path, blocks: Mapping[str, str], title: str = "# Reproducing the paper's headline table") -> None:
    def change(old: str | None) -> str:
        text = old if old is not None else f"{title}\n"
        for name, body in blocks.items():
            text = replace_block(text, name, body)
        return text

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # locked and atomic: two runs updating their own blocks of one file (--write-docs of two
        # scales at once) both land (was: a fixed temporary name, so the later run dropped the
        # earlier one's block or failed with a FileNotFoundError traceback)
        update_text_locked(path, change)
    except UnicodeDecodeError:  # was: the decoder's message alone, naming no file
        raise ValueError(f"{path}: cannot update its generated blocks: not a UTF-8 text file; move it "
                         "away and rerun (finished episodes are cached and not run again)") from None


def wall_table_md(stats: RunStats) -> str:
    lines = [
        "| scenario | policy | episodes | wall s per episode (mean) | CPU s per episode (mean) |",
        "|---|---|---|---|---|",
    ]
    for (scen, pol), ws in sorted(stats.wall_by_policy.items()):
        cs = stats.cpu_by_policy.get((scen, pol), [])
        cpu = f"{np.mean(cs):.2g}" if cs and np.mean(cs) < 10 else (f"{np.mean(cs):.0f}" if cs else "-")
        lines.append(f"| {scen} | {pol} | {len(ws)} | {np.mean(ws):.1f} | {cpu} |")
    return "\n".join(lines)


