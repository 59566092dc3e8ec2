"""``aryl-gym reproduce``: the paper's headline table, sensitivity sweeps, the prediction-error study.

* ``aryl-gym reproduce --scale mid --seeds 5 --workers 2``: the table (``docs/reproduction.md``
  explains every row); episodes are cached in ``--out`` (default ``results/reproduce-SCALE``)
  and reused, so an interrupted run resumes: Ctrl-C or SIGTERM ends the run (exit 130 or 143)
  with one line saying how many episodes are done and the command that resumes it.
* ``--sweep KEY=V1,V2`` (repeatable; ``--sweep default`` = the knobs the paper does not fix):
  one knob at a time, the table's ratios at each value, a Markdown table and a PNG.
* ``--study prediction-error``: ``workload.prediction_sigma`` in {0, 0.25, 0.5, 1.0} for aryl,
  sjf, afs and the shipped learned agent, each policy's ratio to its own sigma = 0 result.
* ``--study hetero``: heterogeneous training (paper 7.2), ``aryl`` (off) vs ``aryl-hetero`` (on)
  at ``workload.hetero_fraction`` in {0.05, 0.1, 0.2}, paired by seed.

Writes ``OUT/reproduction.md`` (and ``docs/reproduction.md``'s generated blocks with
``--write-docs``). ``--json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from aryl_gym.commands._common import check_seed_range, names_list, out_arg, positive_int, seed_arg
from aryl_gym.config import size_limits_lifted

#: the most seeds per policy ``--seeds`` takes (README, "Size limits")
MAX_SEEDS = 10_000

NAME = "reproduce"
HELP = "reproduce the paper's headline table (paired by seed, 95% CI), sweeps and studies"

STUDIES = ("prediction-error", "hetero")



def _write_study_block(args, out: Path, name: str, body: list[str], cmd: str, stats) -> Path:
    """Close a study's Markdown block (command, commit, costs) and write it to
    ``OUT/reproduction.md`` (returned) and, with ``--write-docs``, to docs/reproduction.md."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym import reproduce as rp

    body += ["", _made_by(stats), "", "```", cmd, "```", "", rp.wall_table_md(stats)]
    block = {name: "\n".join(body)}
    md = out / "reproduction.md"
    rp.update_doc(md, block)
    if args.write_docs:
        rp.update_doc(docs_path(), block)
    return md

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=("paper", "mid", "tiny"), default="mid",
                   help="paper: production size; mid: basic/ideal (default); tiny: seconds (tests)")
    p.add_argument("--seeds", type=positive_int, default=None,
                   help="seeds per policy (default: 3 at paper scale, every policy; 5 mid; 3 tiny)")
    p.add_argument("--first-seed", type=seed_arg, default=0, help="seeds are FIRST..FIRST+N-1 (default 0)")
    p.add_argument("--workers", type=positive_int, default=1, help="parallel episodes (default 1)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="local process pool (default) or Ray (RAY_ADDRESS or a local Ray)")
    p.add_argument("--rows", default=None,
                   help="comma-separated row ids to compute (default all); see docs/reproduction.md")
    p.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="vary a scenario config key (SECTION.FIELD), one knob at a time; "
                        "'default' = the knobs the paper does not fix")
    p.add_argument("--study", choices=STUDIES, default=None,
                   help="prediction-error: paper 7.5 study; hetero: paper 7.2 (heterogeneous "
                        "training, aryl vs aryl-hetero); instead of the table")
    p.add_argument("--policies", default=None,
                   help="--study only: comma-separated policies (registry names or agent:SOURCE; "
                        "default aryl,sjf,afs,agent:ppo-testbed)")
    p.add_argument("--scenario", default=None,
                   help="--study only: run the study on this scenario (name or YAML) instead of "
                        "the scale's Basic")
    p.add_argument("--out", type=out_arg, default=None, help="folder for the episode cache and reproduction.md "
                                               "(default results/reproduce-SCALE)")
    p.add_argument("--write-docs", action="store_true",
                   help="also update the generated blocks of docs/reproduction.md")
    p.add_argument("--fresh", action="store_true", help="ignore cached episodes and recompute them")
    p.add_argument("--cached-only", action="store_true",
                   help="run nothing: report from the cached episodes (rows use the seeds cached "
                        "for both of their policies)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (progress lines only)")


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def portable_out(out: Path) -> str | None:
    """``out`` as the generated docs may name it: a relative path inside the current folder
    (an absolute one under it made relative), or None for a folder elsewhere (``/tmp/x``,
    ``../x``, a home folder): a machine-local path in docs/reproduction.md means nothing on
    another machine (was: ``--out /tmp/sw-mid`` in the docs' command line)."""
    p = Path(out)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(Path.cwd().resolve())
        except (ValueError, OSError):
            return None
    if ".." in p.parts or str(p).startswith("~"):
        return None
    return str(p)


def _command_line(args: argparse.Namespace, out: Path, portable: bool = False) -> str:
    """The command that makes this report, from the parsed options (no display-only flags).
    ``portable``: as the report prints it (:func:`portable_out`: ``--out`` left out when the
    folder is not a relative path, the default folder then used)."""
    parts = ["aryl-gym", "reproduce", "--scale", args.scale]
    if args.seeds is not None:
        parts += ["--seeds", str(args.seeds)]
    if args.first_seed:
        parts += ["--first-seed", str(args.first_seed)]
    if args.rows:
        parts += ["--rows", args.rows]
    for s in args.sweep:
        parts += ["--sweep", s]
    if args.study:
        parts += ["--study", args.study]
    if args.policies:
        parts += ["--policies", args.policies]
    if args.scenario:
        parts += ["--scenario", args.scenario]
    if args.cached_only:
        parts += ["--cached-only"]
    shown = portable_out(out) if portable else str(out)
    if shown is not None:
        parts += ["--out", shown]
    if args.workers != 1:
        parts += ["--workers", str(args.workers)]
    if args.backend != "local":
        parts += ["--backend", args.backend]
    return " ".join(shlex.quote(a) for a in parts)


def _resume_command(args: argparse.Namespace, out: Path) -> str:
    """The command that resumes an interrupted run: this one, with ``--out`` spelled out and
    without ``--fresh`` (which would recompute the episodes this run saved)."""
    extra = [flag for flag, on in (("--write-docs", args.write_docs), ("--json", args.json),
                                   ("--no-progress", args.no_progress)) if on]
    return " ".join([_command_line(args, out), *extra])


def docs_path() -> Path:
    """``docs/reproduction.md`` of the checkout holding this package (``--write-docs``)."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    if not docs.is_dir():
        raise ValueError(
            f"--write-docs updates docs/reproduction.md of a source checkout, and {docs} does not "
            "exist (an installed package); the report is in --out"
        )
    return docs / "reproduction.md"


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym import reproduce as rp

    if args.seeds is not None and args.seeds > MAX_SEEDS and not size_limits_lifted():
        # was: 100000000 built a task list until memory ran out, with no message
        raise ValueError(f"--seeds {args.seeds:,}: at most {MAX_SEEDS:,} seeds per policy (check the value, "
                         "or set ARYL_GYM_ALLOW_HUGE=1 to run it anyway)")
    scale = rp.SCALES[args.scale]
    # every seed used, FIRST..FIRST+N-1, must be a valid seed (was: --first-seed 2**63-1 ran 2**63)
    n_seeds = args.seeds if args.seeds is not None else (
        3 if args.study else max([scale.seeds, *scale.slow_seeds.values()]))
    check_seed_range(args.first_seed, n_seeds, "--first-seed", "seeds per policy")
    for flag, v in (("--rows", args.rows), ("--policies", args.policies), ("--scenario", args.scenario)):
        if v is not None and not [x for x in v.split(",") if x.strip()]:
            # was: an empty --rows ran every row
            raise ValueError(f"{flag} is empty; give comma-separated names (or leave the flag out)")
        if v is not None:
            names_list(v, flag)  # a name given twice is an error (was: a row printed twice)
    if args.fresh and args.cached_only:  # was: accepted (--fresh recomputes, --cached-only never runs)
        raise ValueError("--fresh recomputes every episode and --cached-only runs none; give one of them")
    if args.study and (args.rows or args.sweep):
        raise ValueError("--study runs its own grid; drop --rows and --sweep")
    if (args.policies or args.scenario) and not args.study:
        raise ValueError("--policies and --scenario apply to --study only (the table's rows fix "
                         "their policies and the scale fixes the scenarios)")
    out = Path(args.out) if args.out else Path("results") / f"reproduce-{args.scale}"
    specs = rp.select_rows([r.strip() for r in args.rows.split(",") if r.strip()] if args.rows else None)
    sweeps = rp.resolve_sweeps(args.sweep, _say)  # validated before any episode runs
    configs = rp.role_configs(scale)
    for key, values in sweeps:
        for v in values:
            rp.sweep_configs(configs, key, v)  # a bad value fails here, with its key
    if any(k == "workload.load" for k, _ in sweeps) and all(
            c.workload.num_jobs is not None or c.workload.trace is not None for c in configs.values()):
        # was: swept, and every point the same episodes (a fixed job count or a trace ignores load)
        named = any(t.strip() != "default" and t.split("=", 1)[0].strip() == "workload.load" for t in args.sweep)
        if named:
            raise ValueError(f"--sweep workload.load: scale {args.scale}'s scenarios fix their jobs "
                             "(workload.num_jobs or a trace), so load changes nothing; sweep another knob")
        _say(f"note: --sweep default: workload.load skipped at scale {args.scale} (its scenarios fix their jobs)")
        sweeps = [(k, v) for k, v in sweeps if k != "workload.load"]
    if args.write_docs:
        docs_path()  # fail before running anything
    _check_study_args(args, rp)  # before the output folder is made (was: made, then refused)
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.episodes import run_interruptible
    from aryl_gym.fileio import DirLock, check_out_folder, claim_folder
    from aryl_gym.leaderboard.runner import prepare_out_dir

    # one run per --out at a time (the leaderboard's lock), and never another command's folder
    check_out_folder(out, "reproduce")  # not a user's folder (before its lock file is made there)
    with DirLock(prepare_out_dir(out)):
        claim_folder(out, "reproduce")
        # SIGTERM and Ctrl-C: one line (episodes done, the command that resumes), exit 143 / 130
        cmd = _resume_command(args, out)
        return run_interruptible(
            lambda: _run_locked(args, rp, scale, out, specs, sweeps, configs), cmd,
            f"the finished episodes are kept in {out}/episodes; rerun the same command to resume "
            f"from the cache: {cmd}")


def _run_locked(args: argparse.Namespace, rp: Any, scale: Any, out: Path, specs: Any, sweeps: Any,
                configs: Any) -> int:
    cmd = _command_line(args, out, portable=True)  # the report's command line: no local paths
    progress = "lines" if (args.no_progress or args.json) else "bar"

    def run_tasks(tasks: list[Any]) -> tuple[dict[Any, Any], Any]:
        return rp.run_tasks(tasks, out, workers=args.workers, backend=args.backend,
                            fresh=args.fresh, cached_only=args.cached_only, progress=progress)

    if args.study == "prediction-error":
        return _prediction_study(args, rp, scale, configs, out, cmd, run_tasks)
    if args.study == "hetero":
        return _hetero_study(args, rp, configs, out, cmd, run_tasks)

    tasks = rp.table_tasks(specs, configs, scale, args.seeds, args.first_seed)
    sweep_tasks = [
        (key, v, rp.table_tasks(specs, rp.sweep_configs(configs, key, v), scale, args.seeds,
                                args.first_seed, tag=f"{key}={v}"))
        for key, values in sweeps
        for v in values
    ]
    # One pool for the table and every sweep point; an episode shared by several (a sweep value
    # equal to the shipped one) runs once.
    results, stats = run_tasks([*tasks, *(t for _, _, ts in sweep_tasks for t in ts)])
    if args.cached_only and not results:  # was: a table of '-' rows and exit 0
        return _nothing_cached(out, "this table")
    by_key = {t.episode_key: r for t, r in results.items()}

    def rows_for(ts: list[Any]) -> list[Any]:
        res = {t: by_key[t.episode_key] for t in ts if t.episode_key in by_key}
        return rp.compute_rows(specs, rp.results_by_role(res), seeds)

    seeds = rp.all_seeds(tasks)
    rows = rows_for(tasks)
    def mech_for(ts: list[Any]) -> Any:
        return rp.mechanism(rp.results_by_role({t: by_key[t.episode_key] for t in ts if t.episode_key in by_key}), seeds)

    points = [rp.SweepPoint(key, v, rows_for(ts), mech_for(ts)) for key, v, ts in sweep_tasks]
    mechs = [mc for b in ("baseline", "fifo")
             if (mc := rp.mechanism(rp.results_by_role({t: by_key[t.episode_key] for t in tasks if t.episode_key in by_key}),
                                    seeds, baseline=b)) is not None]
    # one block per scale (the paper scale is the primary table: "table", "sweep")
    sfx = "" if scale.name == "paper" else f"-{scale.name}"
    blocks = {
        f"table{sfx}": _table_block(rp, rows, scale, configs, seeds, cmd, stats, mechs),
    }
    plot = None
    if points:
        plot = rp.plot_sweep(points, specs, out / "sweep.png")
        # named beside OUT/reproduction.md (was: OUT/sweep.png, a wrong or local path)
        blocks[f"sweep{sfx}"] = _sweep_block(rp, points, specs, cmd, plot and Path(plot.name), scale.name, stats)
    md = out / "reproduction.md"
    rp.update_doc(md, blocks)
    if args.write_docs:
        dp = docs_path()
        if plot is not None:
            img = dp.parent / "img" / f"reproduction-sweep{sfx}.png"
            img.parent.mkdir(exist_ok=True)
            shutil.copyfile(plot, img)
            blocks[f"sweep{sfx}"] = _sweep_block(rp, points, specs, cmd, Path("img") / img.name, scale.name, stats)
        rp.update_doc(dp, blocks)
    failed = stats.failed
    if args.json:
        print(json.dumps({
            "scale": args.scale,
            "scenarios": {r: c.name for r, c in configs.items()},
            "seeds": seeds,
            "rows": [r.to_dict() for r in rows],
            "score": {"within": rp.score(rows)[0], "rows": rp.score(rows)[1]},
            "mechanism": [mc.to_dict() for mc in mechs],
            "sweep": [{"key": p.key, "value": p.value, "rows": [r.to_dict() for r in p.rows],
                       "mechanism": p.mechanism.to_dict() if p.mechanism else None} for p in points],
            "episodes": {"new": stats.new, "cached": stats.cached, "failed": len(failed),
                         "skipped": len(stats.skipped), "commits": stats.commits},
            "wall_s_per_episode": {f"{s}/{p}": sum(w) / len(w) for (s, p), w in stats.wall_by_policy.items()},
            "cpu_s_per_episode": {f"{s}/{p}": sum(w) / len(w) for (s, p), w in stats.cpu_by_policy.items()},
            "missing_episodes": len(stats.missing),
            "report": str(md),
            "plot": str(plot) if plot else None,
        }, default=_json_default))
    else:
        print(f"scale {args.scale}: basic = {configs['basic'].name}, ideal = {configs['ideal'].name}; "
              f"seeds {seeds[0]}..{seeds[-1]}; ratios are geometric means of per-seed ratios, 95% t CI")
        print(rp.render_table_text(rows))
        w, n = rp.score(rows)
        print(f"{w} of {n} of the paper's rows within tolerance (the defended readings)")
        if mechs:
            print(rp.render_mechanism_md(mechs, configs["basic"].name))
        for line in rp.why_lines(rows):
            print(line)
        if points:
            print()
            print(rp.render_sweep_md(points, specs))
            if m := rp.render_sweep_mechanism_md(points):
                print()
                print(m)
        print(f"\n{stats.new} episode(s) run, {stats.cached} cached, {stats.wall_s:.0f} s; report: {md}"
              + (f"; sweep plot: {plot}" if plot else ""))
    for t, msg in failed:
        # was: t.config.name, an AttributeError traceback after the report (EpisodeTask has no config)
        _say(f"FAILED {t.label}: {msg.splitlines()[0]}")
    return 1 if failed else 0


def _nothing_cached(out: Path, what: str) -> int:
    """--cached-only found none of the episodes: say so (exit 1), and write no report."""
    print(f"aryl-gym reproduce: error: --cached-only: no episode of {what} is cached in {out}; "
          "run without --cached-only (or give the --out folder of an earlier run)", file=sys.stderr)
    return 1


def _commit() -> str:
    # provenance reads the scenario config (pydantic): only when a report is written
    from aryl_gym.provenance import git_commit

    return git_commit()[:12]


def _made_by(stats: Any = None) -> str:
    """``Made by (at commit X):``, naming the commits that made the episodes when any of them
    is not X (saved episodes from an earlier checkout: the report mixes code versions)."""
    here = _commit()
    commits = dict(getattr(stats, "commits", None) or {})
    if not commits or set(c[:12] for c in commits) == {here}:
        return f"Made by (at commit `{here}`):"
    if len(commits) == 1:
        return f"Made by (at commit `{here}`, from episodes made at commit `{next(iter(commits))[:12]}`):"
    made = ", ".join(f"`{c[:12]}` ({n})" for c, n in sorted(commits.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"Made by (at commit `{here}`; its episodes were made at commits {made}: rerun with "
            "`--fresh` for one code version):")


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)


#: the label of the generated mid table: its section 7.4 rows are outside the paper's regime
MID_REGIME = (
    "**Outside the paper's regime for the section 7.4 rows** (Pollux, AFS, Aryl+TunedJobs): the "
    "paper places that comparison on a cluster of over 3,500 GPUs and ties Pollux's loss to that "
    "size; at 512 GPUs Pollux-250 has many more generations per job than the paper's had. These "
    "rows say how our baselines behave on a small cluster, not whether the paper's claim holds "
    "(the paper-scale table does)."
)


def _table_block(rp: Any, rows: list[Any], scale: Any, configs: dict[str, Any], seeds: list[int],
                 cmd: str, stats: Any, mechs: list[Any] | None = None) -> str:
    why = rp.why_lines(rows)
    w, n = rp.score(rows)
    parts = [
        "## The table" if scale.name == "paper" else f"## The table at scale `{scale.name}`",
        "",
        f"Scale `{scale.name}`: the paper's Basic is `{configs['basic'].name}`, its Ideal "
        f"`{configs['ideal'].name}`; seeds {seeds[0]}..{seeds[-1]}"
        + (f" ({', '.join(f'{p}: {n}' for p, n in scale.slow_seeds.items())} seed(s))" if scale.slow_seeds else "")
        + ". Each value is the geometric mean of per-seed ratios (paired by seed), with a 95% "
        "Student-t interval on the log ratios. Tolerance: +-20% of the paper's gain, judged on the "
        "point estimate.",
        "",
        *([MID_REGIME, ""] if scale.name == "mid" else []),
        rp.render_table_md(rows, {r: c.name for r, c in configs.items()}),
        "",
        f"**{w} of {n}** of the paper's rows are within tolerance under the readings we defend "
        "(rows marked ↳ restate a row under another reading and are not counted).",
        "",
        *([rp.render_mechanism_md(mechs, configs["basic"].name), ""] if mechs else []),
        "Out of tolerance, and why (figures are means over the paired seeds):" if why else
        "Every row is within tolerance.",
        "",
        *why,
        "",
        _made_by(stats),
        "",
        "```",
        cmd,
        "```",
        "",
        # was: t.config.name, an AttributeError traceback whenever --cached-only left one out
        *([f"{len(stats.missing)} episode(s) were not in the cache and are left out: "
           + ", ".join(sorted({f'{t.scenario_name}/{t.policy}' for t in stats.missing}))
           + " (rows use the seeds cached for both of their policies).", ""] if stats.missing else []),
        f"Cost per episode (this run's machine; {stats.new} run, {stats.cached} cached; wall time "
        "depends on what else the machine runs, CPU time much less):",
        "",
        rp.wall_table_md(stats),
    ]
    return "\n".join(parts)


def _sweep_block(rp: Any, points: list[Any], specs: list[Any], cmd: str, plot: Path | None,
                 scale: str = "", stats: Any = None) -> str:
    parts = [
        f"### Sensitivity at scale `{scale}` (generated)" if scale else "### Sensitivity (generated)",
        "",
        "One knob at a time, every other setting as the scenario ships it. Read off the table below:",
        "",
        *rp.sweep_findings(points, specs),
        "",
        rp.render_sweep_md(points, specs),
        "",
        *([m, ""] if (m := rp.render_sweep_mechanism_md(points)) else []),
        f"![each row's ratio over each knob's values]({plot})" if plot else "(matplotlib missing: no plot)",
        "",
        _made_by(stats),
        "",
        "```",
        cmd,
        "```",
    ]
    return "\n".join(parts)


def _check_study_args(args: Any, rp: Any) -> None:
    """A study's own arguments, refused with their error before anything is written: its
    ``--scenario`` must load, and ``--policies`` must name known policies (prediction-error)
    or be absent (hetero)."""
    if not args.study:
        return
    if args.study == "hetero" and args.policies:
        raise ValueError("--policies does not apply to --study hetero (it compares aryl with "
                         "aryl-hetero)")
    if args.scenario:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.config import load_scenario

        load_scenario(args.scenario)
    if args.policies:
        rp.check_policies([p.strip() for p in args.policies.split(",") if p.strip()])


def _prediction_study(args: Any, rp: Any, scale: Any, configs: dict[str, Any], out: Path, cmd: str,
                      run_tasks: Any) -> int:
    n = args.seeds if args.seeds is not None else 3
    seeds = list(range(args.first_seed, args.first_seed + n))
    if args.scenario:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.config import load_scenario

        cfg = load_scenario(args.scenario)
    else:
        cfg = configs["basic"]
    pols = ([p.strip() for p in args.policies.split(",") if p.strip()] if args.policies
            else list(rp.PREDICTION_POLICIES))
    sigmas = list(rp.PREDICTION_SIGMAS)
    tasks = rp.prediction_tasks(cfg, pols, sigmas, seeds)
    results, stats = run_tasks(tasks)
    if args.cached_only and not results:  # was: a study of '-' cells written, exit 0
        return _nothing_cached(out, "this study")
    skipped = {t.policy: msg for t, msg in stats.skipped}
    ran = [p for p in pols if p not in skipped]
    by = {(t.policy, t.seed, t.role): r for t, r in results.items()}
    def absolute(metric: str) -> dict[str, float]:
        """Each policy's mean ``metric`` at the first sigma (the reference of the ratios)."""
        out = {}
        for p in ran:
            xs = [getattr(by[(p, s, f"sigma={sigmas[0]}")], metric) for s in seeds
                  if (p, s, f"sigma={sigmas[0]}") in by]
            out[p] = sum(xs) / len(xs) if xs else math.nan
        return out

    tables = {m: rp.prediction_table(results, ran, sigmas, seeds, m) for m in rp.PREDICTION_METRICS}
    body = [
        f"### Prediction error on `{cfg.name}` (generated)",
        "",
        f"Scenario `{cfg.name}`, seeds {seeds[0]}..{seeds[-1]}. Predicted work = work x "
        "exp(N(0, sigma)) per job (`workload.prediction_sigma`); the trace itself does not change "
        "with sigma, so each policy is compared with itself on the same episodes. Cells: "
        "geometric mean over seeds of metric(sigma) / metric(sigma = 0), 95% t interval.",
        "",
    ]
    for m, tab in tables.items():
        body += [f"`{m}`:", "", rp.render_prediction_md(tab, sigmas, absolute(m), m), ""]
    for p, msg in skipped.items():
        body.append(f"- {p} did not run here: {msg}")
    md = _write_study_block(args, out, f"prediction-error-{cfg.name}", body, cmd, stats)
    if args.json:
        print(json.dumps({
            "study": "prediction-error",
            "scenario": cfg.name,
            "seeds": seeds,
            "sigmas": sigmas,
            "skipped": skipped,
            "ratios": {m: {p: {str(sg): st.to_dict() for sg, st in row.items()} for p, row in tab.items()}
                       for m, tab in tables.items()},
            "at_sigma0": {m: {p: (v if math.isfinite(v) else None) for p, v in absolute(m).items()}
                          for m in rp.PREDICTION_METRICS},
            "wall_s": stats.wall_s,
            "report": str(md),
        }))
    else:
        print("\n".join(body))
        print(f"\n{stats.new} episode(s) run, {stats.cached} cached, {stats.wall_s:.0f} s; report: {md}")
    return 1 if stats.failed else 0


def _hetero_study(args: Any, rp: Any, configs: dict[str, Any], out: Path, cmd: str,
                  run_tasks: Any) -> int:
    n = args.seeds if args.seeds is not None else 3
    seeds = list(range(args.first_seed, args.first_seed + n))
    if args.scenario:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.config import load_scenario

        cfg = load_scenario(args.scenario)
    else:
        cfg = configs["basic"]
    fractions = list(rp.HETERO_FRACTIONS)
    tasks = rp.hetero_tasks(cfg, fractions, seeds)
    results, stats = run_tasks(tasks)
    if args.cached_only and not results:  # was: a study of '-' cells written, exit 0
        return _nothing_cached(out, "this study")
    rows = rp.hetero_table(results, fractions, seeds)
    s = cfg.sim
    body = [
        f"### Heterogeneous training on `{cfg.name}` (generated)",
        "",
        f"Scenario `{cfg.name}`, seeds {seeds[0]}..{seeds[-1]}, mixed rate model "
        f"`sim.hetero_rate: {s.hetero_rate}`, `sim.hetero_penalty: {s.hetero_penalty}`. "
        "`workload.hetero_fraction` marks that share of the eligible jobs (elastic, "
        "type-agnostic, data-parallel families); `aryl` ignores the mark (off), `aryl-hetero` "
        "may add T4 workers to a hetero job based on V100 (on). Both run the same episodes per "
        "seed. Rows: means over seeds; the ratio row is the paired geometric mean of "
        "aryl-hetero / aryl per seed with its 95% t interval (below 1 = heterogeneous training "
        "lowers the figure).",
        "",
        rp.render_hetero_md(rows),
    ]
    for t, msg in stats.skipped:
        body.append(f"- {t.policy} did not run here: {msg}")
    md = _write_study_block(args, out, f"hetero-{cfg.name}", body, cmd, stats)
    if args.json:
        print(json.dumps({
            "study": "hetero",
            "scenario": cfg.name,
            "seeds": seeds,
            "fractions": fractions,
            "rows": [
                {
                    "fraction": r["fraction"],
                    "mean": {f"{p}/{m}": (v if math.isfinite(v) else None)
                             for (p, m), v in r["mean"].items()},
                    "ratio": {m: st.to_dict() for m, st in r["ratio"].items()},
                }
                for r in rows
            ],
            "wall_s": stats.wall_s,
            "report": str(md),
        }))
    else:
        print("\n".join(body))
        print(f"\n{stats.new} episode(s) run, {stats.cached} cached, {stats.wall_s:.0f} s; report: {md}")
    return 1 if stats.failed else 0
