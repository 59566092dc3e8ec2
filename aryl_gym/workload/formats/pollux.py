"""Pollux: the artifact's ``workload`` CSVs (``name, time, application, num_replicas,
batch_size``) with the per-application throughput profiles."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from aryl_gym.config import ConfigError
from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.paths import POLLUX_PROFILES, default_data_root, resolve_data_path
from aryl_gym.workload.traces_formats import (
    LoadReport,
    RowChecks,
    TraceError,
    TraceRows,
    as_i64,
    empty_mask,
    gpus_check,
    key_codes,
    num_checks,
    obj,
    read_csv_table,
    width_checks,
)
from aryl_gym.workload.traces_pollux import load_pollux_profiles

POLLUX_COLUMNS = ["name", "time", "application", "num_replicas", "batch_size"]


def read_pollux(path: Path, report: LoadReport, opts: Mapping[str, Any], apps: Mapping[str, Any],
                skip: bool) -> TraceRows:
    """``name,time,application,num_replicas,batch_size``; run time from the app's profiles
    (computed once per distinct configuration)."""
    gpus_per_node = int(opts.get("profile_gpus_per_node", 4))
    profile_gpu = opts.get("profile_gpu", "T4")
    tab = read_csv_table(path, POLLUX_COLUMNS, opts.get("delimiter", ","), report, opts.get("filter"))
    c = tab.cols
    chk = RowChecks(path, tab.lines, report, skip)
    width_checks(chk, tab)
    t = num_checks(chk, c["time"], "time")
    with np.errstate(invalid="ignore"):
        chk.flag(t < 0, "time", "bad-time", lambda i: f"negative arrival {t[i]:g} s", "arrival times are seconds >= 0")
    app_col = c["application"]
    known = np.asarray(pc.is_in(app_col, value_set=pa.array(sorted(apps), pa.string())), dtype=bool)
    chk.flag(~known, "application", "unknown-app", lambda i: f"no profile for application {app_col[i].as_py()!r}",
             f"use one of {sorted(apps)} or add its profile folder")
    n = num_checks(chk, c["num_replicas"], "num_replicas", "int")
    gpus_check(chk, "num_replicas", n)
    b = num_checks(chk, c["batch_size"], "batch_size", "int")
    # one profile computation per distinct (application, replicas, batch)
    cand = np.flatnonzero(chk.ok)
    app_codes = np.asarray(pc.dictionary_encode(app_col).indices, dtype=np.int64)
    app_names = pc.dictionary_encode(app_col).dictionary.to_pylist()
    n_i, b_i = as_i64(n), as_i64(b)
    cfg_code = np.zeros(cand.size, dtype=np.int64)
    for part in (app_codes[cand], n_i[cand], b_i[cand]):
        _, pinv = np.unique(part, return_inverse=True)
        pinv = pinv.reshape(-1).astype(np.int64)
        cfg_code = cfg_code * (int(pinv.max(initial=0)) + 1) + pinv
        cfg_code = np.unique(cfg_code, return_inverse=True)[1].reshape(-1).astype(np.int64)
    first_u, inv = (np.unique(cfg_code, return_index=True, return_inverse=True)[1:] if cand.size
                    else (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    inv = np.asarray(inv).reshape(-1)
    uniq = np.stack([app_codes[cand][first_u], n_i[cand][first_u], b_i[cand][first_u]], axis=1)
    m_u = len(uniq)
    u_batch_bad = np.zeros(m_u, dtype=bool)
    u_err: dict[int, str] = {}
    u_dur = np.zeros(m_u)
    u_base: list[dict[str, Any] | None] = [None] * m_u
    u_scaling: list[tuple[float, ...] | None] = [None] * m_u
    u_msg: dict[int, str] = {}
    for k, (ai, ni, bi) in enumerate(uniq.tolist()):
        name = app_names[ai]
        app = apps[name]
        if not app.init_batch_size <= bi <= app.max_batch_size:
            u_batch_bad[k] = True
            u_msg[k] = (f"batch {bi} outside {name}'s validated range "
                        f"[{app.init_batch_size}, {app.max_batch_size}]")
            continue
        try:
            dur = app.run_time(ni, bi, gpus_per_node)
            cfg = app.config(ni, bi, gpus_per_node)
            curve = app.scaling_curve(ni, bi, gpus_per_node)
        except ConfigError as exc:
            u_err[k] = str(exc)
            continue
        u_dur[k] = dur
        u_scaling[k] = tuple(float(x) for x in curve) if len(curve) == ni + 1 else None
        u_base[k] = {
            "profile_run_time_s": dur,
            "atomic_bsz": cfg.atomic_bsz,
            "accum_steps": cfg.accum_steps,
            "max_replicas": app.max_replicas,
            "min_batch_size": app.init_batch_size,
            "max_batch_size": app.max_batch_size,
            "max_epochs": app.max_epochs,
            "gpus_per_worker": 1,
            "profiles_dir": str(app.folder.parent),
            "profile_gpus_per_node": gpus_per_node,
        }
    row_u = np.full(len(tab), -1, dtype=np.int64)
    row_u[cand] = inv
    bb = np.zeros(len(tab), dtype=bool)
    bb[cand] = u_batch_bad[inv]
    chk.flag(bb, "batch_size", "bad-batch", lambda i: u_msg[int(row_u[i])], "pick a batch size the profiles validate")
    err_mask = np.zeros(len(tab), dtype=bool)
    if u_err:
        err_u = np.zeros(m_u, dtype=bool)
        err_u[list(u_err)] = True
        err_mask[cand] = err_u[inv]
    chk.flag(err_mask, "num_replicas", "no-profile", lambda i: u_err[int(row_u[i])],
             "use a configuration the profiles cover")
    ok = chk.finish()
    idx = np.flatnonzero(ok)
    names_raw = c["name"]
    key = key_codes([names_raw])
    named = ~empty_mask(names_raw)
    if not named.all():  # rows without a name: identity is (time, application, replicas, batch)
        key_anon = key_codes([c["time"], app_col, c["num_replicas"], c["batch_size"]])
        key = np.where(named, key, key.max(initial=0) + 1 + key_anon)
    u = row_u[idx]
    app_obj = np.array(app_names + [None], dtype=object)[:-1][app_codes[idx]] if app_names else np.zeros(0, object)
    nm = obj(names_raw)[idx]
    lines = tab.lines[idx]
    empty_names = np.flatnonzero(nm == "")
    for j in empty_names.tolist():
        nm[j] = f"{app_obj[j]}-L{lines[j]}"
    base_arr = np.array(u_base + [None], dtype=object)[:-1]
    scal_arr = np.array(u_scaling + [None], dtype=object)[:-1]
    return TraceRows(
        lines, t[idx], n_i[idx], u_dur[u], key[idx], nm, model=app_obj,
        gpu_type=np.full(idx.size, profile_gpu, dtype=object), app=app_obj, batch_size=b_i[idx],
        base=base_arr[u], scaling=scal_arr[u], one_gpu_workers=True,
    )


def profiles_dir(p: Path, prof: Any, data_root: str | os.PathLike[str] | None,
                 report: LoadReport) -> Path:
    """The Pollux profile folder: the ``profiles`` option, else ``<workload folder>/../traces``
    (the artifact's layout), else the data root's ``traces/pollux-philly/traces``."""
    if prof:
        d = resolve_data_path(str(prof), data_root)
        if not d.is_dir():
            raise TraceError(p, f"Pollux profile folder {d} is not a folder",
                             "pass trace option profiles=<folder with bert/, cifar10/, ...> (relative to the data root)")
        return d
    beside = p.parent.parent / "traces"
    if beside.is_dir() and any((d / "placements.csv").exists() for d in beside.iterdir()):
        return beside
    root = Path(data_root) if data_root else default_data_root()
    cand = root / POLLUX_PROFILES if root is not None else None
    if cand is not None and cand.is_dir():
        report.notes.append(f"Pollux profiles from the data root ({cand}): none at {beside}")
        return cand
    raise TraceError(p, f"no Pollux profile folder at {beside} and none under the data root",
                     "pass trace option profiles=<folder with bert/, cifar10/, ...> (relative to the data root), "
                     "or --data-root DIR holding " + POLLUX_PROFILES)


def _read(req: ReadRequest) -> TraceRows:
    prof_dir = profiles_dir(req.path, req.options.get("profiles"), req.data_root, req.report)
    return read_pollux(req.path, req.report, {**req.options, "delimiter": req.delimiter},
                       load_pollux_profiles(prof_dir), req.skip)


FORMAT = TraceFormat(
    name="pollux",
    read=_read,
    description="Pollux artifact workload CSV (name, time, application, num_replicas, batch_size)",
    time_column="time",
    guess=lambda path: "workload" in Path(path).name,
)
