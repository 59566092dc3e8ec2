"""Command-line options for real traces (``--trace``, ``--trace-format``, ``--map`` and the trace
and cluster options), shared by ``simulate``, ``compare`` and ``trace-info``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aryl_gym.commands._common import int_arg
from aryl_gym.config import ConfigError, ScenarioConfig
from aryl_gym.workload.formats import format_names, guess_format
from aryl_gym.workload.traces import check_time_window, load_trace


def _kv_pairs(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise argparse.ArgumentTypeError(f"expected KEY=VALUE pairs separated by commas, got {part!r}")
        k, v = part.split("=", 1)
        if k.strip() in out:  # was: the later value replaced the earlier silently
            raise argparse.ArgumentTypeError(f"{k.strip()!r} is given twice in {text!r}; give each key once")
        out[k.strip()] = v.strip()
    if not out:  # was: {} read as not given, so '--columns ""' was ignored without a word
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE pairs separated by commas, got {text!r}")
    return out


def _trace_arg(text: str) -> str:
    """A ``--trace`` path: not empty (was: ``--trace ''`` read as not given, so the scenario's
    synthetic workload ran without a word)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the path of a trace file, or leave the option out")
    return text


def _map_arg(text: str) -> str:
    """A ``--map`` path: not empty (was: ``--map ''`` read as the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the path of a map YAML file, or leave the option out")
    return text


def _typed(v: str) -> Any:
    low = v.lower()
    # the words YAML reads as booleans (was: on/off stayed text, which the trace options refuse)
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(v)
    except ValueError:
        pass
    try:
        x = float(v)
    except ValueError:
        return v
    # the one number parser's reading: 1e3 is the integer 1000 (max_jobs=1e3)
    return int(x) if "e" in v.lower() and x.is_integer() and abs(x) <= 2**53 else x


def add_trace_arguments(parser: argparse.ArgumentParser, cluster: bool = True) -> None:
    """Add ``--trace``, ``--trace-format``, ``--map`` and the trace/cluster options to ``parser``."""
    g = parser.add_argument_group("real trace (docs/traces.md)")
    g.add_argument("--trace", type=_trace_arg, default=None, help="trace file (relative to --data-root or absolute)")
    g.add_argument("--trace-format", choices=format_names(), default=None, help="trace format")
    g.add_argument("--map", type=_map_arg, default=None, help="map YAML: csv columns/units, mapping rules, options")
    g.add_argument("--columns", type=_kv_pairs, default=None,
                   help="csv columns, e.g. submit=ts,gpus=n,duration=dur (or start=..,end=..)")
    g.add_argument("--units", type=_kv_pairs, default=None,
                   help="csv units, e.g. time=s,duration=min or time=datetime")
    g.add_argument("--skip-bad-rows", action="store_true", help="skip bad rows and report them by reason")
    g.add_argument("--vc", default=None, help="Philly virtual cluster id(s), comma-separated")
    g.add_argument("--time-window", default=None, help="START,END: offsets from the first job ('0h,48h') or timestamps")
    g.add_argument("--time-compression", type=float, default=None, help="divide arrival offsets by this factor")
    g.add_argument("--max-jobs", type=int_arg, default=None, help="keep the first N jobs (after the window)")
    g.add_argument("--trace-option", action="append", default=[], metavar="KEY=VALUE",
                   help="other trace options (duplicates=keep, profiles=..., throughputs=...)")
    if cluster:
        c = parser.add_argument_group("cluster overrides (else the scenario's)")
        c.add_argument("--train-servers", type=int_arg, default=None)
        c.add_argument("--train-gpus-per-server", type=int_arg, default=None)
        c.add_argument("--train-gpu", default=None)
        c.add_argument("--inf-servers", type=int_arg, default=None)
        c.add_argument("--inf-gpus-per-server", type=int_arg, default=None)
        c.add_argument("--inf-gpu", default=None)


def check_trace_file(path: str, data_root: str | None, flag: str) -> None:
    """A ConfigError when the trace ``path`` (resolved as the loader does) is missing or a folder,
    before the format is guessed or the columns are checked (was: a missing file was told to
    "pass --trace-format", or that the csv format needs a column mapping)."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.workload.paths import resolve_data_path

    if not str(path).strip():
        raise ConfigError(f"{flag} '': give the path of a trace file")
    p = resolve_data_path(str(path), data_root)
    try:
        exists, is_dir = p.exists(), p.is_dir()
    except OSError:  # the reader names it
        return
    if not exists:
        raise ConfigError(f"{flag} {p}: file not found; check the path, --data-root or ARYL_GYM_DATA")
    if is_dir:
        raise ConfigError(f"{flag} {p}: is a folder, not a trace file; name the trace file itself")


def trace_options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for item in getattr(args, "trace_option", None) or []:
        if not item.strip():  # was: ignored
            raise ConfigError("--trace-option '': expected KEY=VALUE (e.g. --trace-option sort=true)")
        if item.lstrip().startswith("delimiter="):  # the value may itself be a comma (or commas)
            pairs = {"delimiter": item.split("=", 1)[1]}
        elif item.lstrip().startswith("time_window="):  # START,END holds a comma
            pairs = {"time_window": item.split("=", 1)[1].strip()}
        else:
            try:
                # a virtual cluster id is text (6214e9 is not a number)
                pairs = {k: v if k == "vc" else _typed(v) for k, v in _kv_pairs(item).items()}
            except argparse.ArgumentTypeError as exc:
                raise ConfigError(f"--trace-option {item!r}: {exc}") from None
        for k, v in pairs.items():
            if k in opts:  # was: the later value replaced the earlier silently
                raise ConfigError(f"--trace-option {k}=...: the option is given twice; give each once")
            opts[k] = v
    for key in ("vc", "time_window", "time_compression", "max_jobs"):
        v = getattr(args, key, None)
        if v is not None:
            if key in opts:
                flag = "--" + key.replace("_", "-")
                raise ConfigError(f"{flag} and --trace-option {key}=... both set {key}; give one")
            opts[key] = v
    if "time_window" in opts:  # named as given (was: a negative start accepted)
        given = "--time-window" if getattr(args, "time_window", None) is not None else "--trace-option time_window"
        check_time_window(opts["time_window"], given)
    if getattr(args, "columns", None):
        opts["columns"] = args.columns
    if getattr(args, "units", None):
        opts["units"] = args.units
    return opts


def scenario_from_args(args: argparse.Namespace) -> ScenarioConfig:
    """The scenario named by ``args.scenario`` with the ``--train-*``/``--inf-*`` overrides."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.config import load_scenario, validate_scenario

    cfg = load_scenario(args.scenario)
    over = {k: getattr(args, k) for k in ("train_servers", "train_gpus_per_server", "train_gpu",
                                          "inf_servers", "inf_gpus_per_server", "inf_gpu")
            if getattr(args, k, None) is not None}
    if over:
        cfg = cfg.replace(cluster=over)
        validate_scenario(cfg)
    return cfg


def episode_from_args(args: argparse.Namespace, seed: int):
    """The episode for ``args``: the scenario's cluster/inference/sim, the jobs from ``--trace``.

    The mapping draws use the same job stream as :func:`aryl_gym.scenario.make_episode`, so a
    scenario with ``workload.trace`` set gives the same episode as the equivalent command line.
    The load report is attached as ``episode.trace_report`` and printed on stderr when rows were
    skipped or filtered.
    """

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.scenario import _seed_streams, make_episode

    cfg = scenario_from_args(args)
    check_trace_file(args.trace, args.data_root, "--trace")
    fmt = args.trace_format or guess_format(args.trace)
    if fmt is None:
        raise ConfigError(f"{args.trace}: pass --trace-format ({'|'.join(format_names())})")
    r_jobs = _seed_streams(seed)[0]
    jobs, report = load_trace(args.trace, fmt, map=args.map, cluster=cfg, rng=r_jobs,
                              skip_bad_rows=args.skip_bad_rows, data_root=args.data_root,
                              **trace_options_from_args(args))
    ep = make_episode(cfg, seed, jobs=jobs, data_root=args.data_root)
    ep.trace_report = report  # type: ignore[attr-defined]
    if report.skipped or report.notes:
        print(report.summary(), file=sys.stderr)
    return ep
