"""Bad trace input: every case gives exit code 2 on the command line (a ``ConfigError`` /
``TraceError`` in the Python API) with a message naming the file, line/column or option, and
the fix; never a traceback. Plus the inputs that must now work (tab delimiter given as ``\\t``,
a UTF-8 byte order mark, a Pollux map's ``delimiter:``)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from aryl_gym.cli import main
from aryl_gym.config import ConfigError
from aryl_gym.workload.traces import TraceError, load_trace

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ROW_A = "2017-10-01 00:00:00,100.0,1,100.0,vcA\n"
ROW_B = "2017-10-01 00:10:00,50.0,2,100.0,vcA\n"
GEN_HEAD = "job,submit,num_gpu,gpu_milli,runtime,pod_phase\n"


def _w(text: str | bytes, name: str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        p = d / name
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text, encoding="utf-8")
        return p
    return make


def _folder(d: Path) -> Path:
    (d / "adir.csv").mkdir()
    return d / "adir.csv"


def _map(text: str) -> Callable[[Path], list[str]]:
    def make(d: Path) -> list[str]:
        (d / "m.yaml").write_text(text, encoding="utf-8")
        return ["--map", str(d / "m.yaml")]
    return make


GEN_COLS = "submit=submit,gpus=num_gpu,duration=runtime,id=job"


@dataclass
class Case:
    id: str
    make: Callable[[Path], Path]
    fmt: str
    args: list[str] = field(default_factory=list)
    expect: tuple[str, ...] = ()  # substrings of the message (besides the file name)
    extra: Callable[[Path], list[str]] | None = None
    names_file: bool = True


CASES = [
    Case("binary-gzip", _w(gzip.compress(b"timestamp,duration\n" * 50), "t.csv"), "philly", [],
         ("binary data", "Fix:", "decompress")),
    Case("not-utf8", _w(PHILLY.encode() + "2017-10-01 00:00:00,1,1,1,caf\xe9\n".encode("latin-1"), "t.csv"), "philly",
         [], ("t.csv:2", "not UTF-8", "iconv")),
    Case("delimiter-empty", _w(PHILLY + ROW_A, "t.csv"), "philly", ["--trace-option", "delimiter="],
         ("delimiter is empty", "give one character"), names_file=False),
    Case("delimiter-commas", _w(PHILLY + ROW_A, "t.csv"), "philly", ["--trace-option", "delimiter=,,"],
         ("delimiter is 2 characters (',,')", "give one character"), names_file=False),
    Case("delimiter-two-chars", _w(PHILLY + ROW_A, "t.csv"), "philly", ["--trace-option", "delimiter=;;"],
         ("delimiter is 2 characters", "give one character"), names_file=False),
    Case("delimiter-quote", _w(PHILLY + ROW_A, "t.csv"), "philly", ["--trace-option", 'delimiter="'],
         ("quote", "give one character"), names_file=False),
    Case("wrong-delimiter", _w(PHILLY.replace(",", ";") + ROW_A.replace(",", ";"), "t.csv"), "philly", [],
         ("t.csv:1", "semicolon-separated", "delimiter")),
    Case("missing-column", _w("timestamp,duration,num_gpus,cluster\n", "t.csv"), "philly", [],
         ("t.csv:1", "column 'gpu_time'", "missing column")),
    Case("empty-file", _w("", "t.csv"), "philly", [], ("empty file", "header row")),
    Case("folder", _folder, "philly", [], ("is a folder", "name the trace file")),
    Case("bad-number", _w(PHILLY + ROW_A + "2017-10-01 00:05:00,5.0,two,10.0,vcA\n", "t.csv"), "philly", [],
         ("t.csv:3", "column 'num_gpus'", "not an integer", "--skip-bad-rows")),
    Case("nonpositive-duration", _w(PHILLY + "2017-10-01 00:05:00,-5.0,1,-5.0,vcA\n", "t.csv"), "philly", [],
         ("t.csv:2", "column 'duration'", "not positive")),
    Case("bad-time", _w(PHILLY + ROW_A + "yesterday,5.0,1,5.0,vcA\n", "t.csv"), "philly", [],
         ("t.csv:3", "column 'timestamp'", "YYYY-MM-DD")),
    Case("duplicate", _w(PHILLY + ROW_A + ROW_B + ROW_A, "t.csv"), "philly", [],
         ("t.csv:4", "same job as line 2", "duplicates=keep")),
    Case("wrong-field-count", _w(PHILLY + ROW_A + "2017-10-01 00:05:00,5.0,1\n", "t.csv"), "philly", [],
         ("t.csv:3", "3 fields but the header has 5")),
    Case("unsorted-pollux", _w("name,time,application,num_replicas,batch_size\na,10,cifar10,1,128\n"
                               "b,5,cifar10,1,128\n", "workload-x.csv"), "pollux", [],
         ("workload-x.csv:3", "column 'time'", "before the previous row", "sort")),
    Case("fractional-gpu", _w(GEN_HEAD + "j1,0,1,460,10,Succeeded\n", "alibaba.csv"), "csv",
         ["--columns", GEN_COLS + ",gpu_milli=gpu_milli"],
         ("alibaba.csv:2", "column 'gpu_milli'", "0.46 GPUs", "fractional_gpus=ceil")),
    Case("filter-unknown-column", _w(GEN_HEAD + "j1,0,1,1000,10,Succeeded\n", "alibaba.csv"), "csv",
         ["--columns", GEN_COLS, "--trace-option", "filter=status=ok"],
         ("alibaba.csv:1", "column 'status'", "filter on a column")),
    Case("filter-malformed", _w(GEN_HEAD + "j1,0,1,1000,10,Succeeded\n", "alibaba.csv"), "csv",
         ["--columns", GEN_COLS, "--trace-option", "filter=pod_phase"],
         ("filter", "COLUMN=VALUE"), names_file=False),
    Case("fractional-option", _w(GEN_HEAD + "j1,0,1,1000,10,Succeeded\n", "alibaba.csv"), "csv",
         ["--columns", GEN_COLS, "--trace-option", "fractional_gpus=floor"],
         ("fractional_gpus", "'ceil'"), names_file=False),
    Case("units-gpus", _w(GEN_HEAD + "j1,0,1,1000,10,Succeeded\n", "alibaba.csv"), "csv",
         ["--columns", GEN_COLS, "--units", "gpus=dozens"], ("units.gpus", "milli"), names_file=False),
    Case("map-delimiter-int", _w(PHILLY + ROW_A, "t.csv"), "philly", [], ("m.yaml", "delimiter must be one character"),
         extra=_map("delimiter: 5\n"), names_file=False),
    Case("pollux-no-profiles", _w("name,time,application,num_replicas,batch_size\na,10,cifar10,1,128\n",
                                  "workload-y.csv"), "pollux", [],
         ("no Pollux profile folder", "profiles="), extra=lambda d: ["--data-root", str(d)]),
    Case("name-too-long", lambda d: d / ("x" * 300 + ".csv"), "philly", [],
         ("not a usable path", "file name"), names_file=False),
    Case("no-rows-left", _w(PHILLY + ROW_A, "t.csv"), "philly", ["--vc", "nope"],
         ("virtual cluster 'nope' has no rows", "vcA (1)")),
]


def _needs_profiles(case: Case) -> None:
    """A Pollux-format file outside the artifact's layout reads the data root's profiles."""
    from aryl_gym.workload.paths import default_data_root

    root = default_data_root()
    if case.fmt == "pollux" and (root is None or not (root / "traces/pollux-philly/traces").is_dir()):
        pytest.skip("needs the Pollux profiles under the data root (../shared/traces/pollux-philly)")


def _run_cli(tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    _needs_profiles(case)
    path = case.make(tmp_path)
    extra = case.extra(tmp_path) if case.extra else []
    argv = ["simulate", "--scenario", "tiny", "--policy", "fifo", "--no-progress", "--trace", str(path),
            "--trace-format", case.fmt, *case.args, *extra]
    rc = main(argv)
    err = capsys.readouterr().err
    return rc, err, path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_exit_2_names_file_line_and_fix(tmp_path, case, capsys):
    rc, err, path = _run_cli(tmp_path, case, capsys)
    assert rc == 2, err
    assert "Traceback" not in err
    assert err.startswith("aryl-gym simulate: error: ")
    if case.names_file:
        assert path.name in err
    for s in case.expect:
        assert s in err, (s, err)


def test_at_least_15_cases():
    assert len(CASES) >= 15


PY_CASES = [c for c in CASES if not c.args or c.args[0] != "--columns"]


@pytest.mark.parametrize("case", PY_CASES, ids=[c.id for c in PY_CASES])
def test_python_api_raises_config_error(tmp_path, case):
    """The same cases through ``load_trace``: a ``ConfigError`` (``TraceError`` for the file)."""
    _needs_profiles(case)
    path = case.make(tmp_path)
    opts: dict = {}
    it = iter(case.args)
    for a in it:
        v = next(it)
        if a == "--trace-option":
            k, val = v.split("=", 1)
            opts[k] = val
        elif a == "--vc":
            opts["vc"] = v
    extra = case.extra(tmp_path) if case.extra else []
    kw: dict = {}
    if extra[:1] == ["--map"]:
        kw["map"] = extra[1]
    if extra[:1] == ["--data-root"]:
        kw["data_root"] = extra[1]
    with pytest.raises(ConfigError) as ei:
        load_trace(path, case.fmt, **kw, **opts)
    msg = str(ei.value)
    for s in case.expect:
        assert s in msg, (s, msg)
    if case.names_file:
        assert isinstance(ei.value, TraceError) and ei.value.path.endswith(path.name)


# ------------------------------------------------------------------------------------------------
# inputs that used to fail and must work
# ------------------------------------------------------------------------------------------------
def test_tab_delimiter_given_as_backslash_t(tmp_path, capsys):
    p = tmp_path / "tab.csv"
    p.write_text((PHILLY + ROW_A + ROW_B).replace(",", "\t"), encoding="utf-8")
    rc = main(["trace-info", str(p), "--trace-format", "philly", "--trace-option", "delimiter=\\t", "--json"])
    out = capsys.readouterr().out
    assert rc == 0 and '"jobs": 2' in out
    jobs, _ = load_trace(p, "philly", delimiter="tab")
    assert [j.g * j.w_max for j in jobs] == [1, 2]


def test_comma_delimiter_option_works(tmp_path, capsys):
    p = tmp_path / "c.csv"
    p.write_text(PHILLY + ROW_A, encoding="utf-8")
    assert main(["trace-info", str(p), "--trace-format", "philly", "--trace-option", "delimiter=,", "--json"]) == 0
    assert '"jobs": 1' in capsys.readouterr().out


def test_utf8_bom_is_stripped(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbf" + (PHILLY + ROW_A).encode())
    jobs, rep = load_trace(p, "philly")
    assert rep.rows == 1 and len(jobs) == 1


def test_pollux_map_top_level_delimiter(tmp_path):
    from aryl_gym.workload.paths import default_data_root

    root = default_data_root()
    prof = root / "traces/pollux-philly/traces" if root is not None else None
    if prof is None or not prof.is_dir():
        pytest.skip("shared Pollux profiles absent: set ARYL_GYM_DATA to the folder holding "
                    "traces/pollux-philly (read-only shared data, ../shared beside the checkout)")
    p = tmp_path / "w.csv"
    p.write_text("name;time;application;num_replicas;batch_size\na;10;cifar10;1;128\n", encoding="utf-8")
    with pytest.raises(TraceError, match="semicolon-separated"):
        load_trace(p, "pollux", profiles=str(prof))
    jobs, _ = load_trace(p, "pollux", map={"delimiter": ";"}, profiles=str(prof))
    assert len(jobs) == 1 and jobs[0].app == "cifar10"


def test_trace_info_reports_bad_rows_by_reason(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text(PHILLY + ROW_A + ROW_B + ROW_A + "2017-10-01 00:05:00,5.0,two,10.0,vcA\n" + ROW_B, encoding="utf-8")
    rc = main(["trace-info", str(p), "--trace-format", "philly"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "skipped       2  duplicate" in out and "line 4: same job as line 2" in out
    assert "skipped       1  bad-number" in out and "line 5 column 'num_gpus'" in out
    assert "3 bad rows" in out


def test_fractional_gpus_ceil_and_whole_milli(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text(GEN_HEAD + "j1,0,1,460,10,Succeeded\nj2,5,2,1000,10,Succeeded\nj3,6,1,1000,10,Failed\n",
                 encoding="utf-8")
    cols = {"submit": "submit", "gpus": "num_gpu", "duration": "runtime", "id": "job", "gpu_milli": "gpu_milli"}
    jobs, rep = load_trace(p, "csv", columns=cols, skip_bad_rows=True)
    assert [j.name for j in jobs] == ["j2", "j3"] and rep.skipped["fractional-gpu"] == 1
    assert [j.g * j.w_max for j in jobs] == [2, 1]
    jobs, rep = load_trace(p, "csv", columns=cols, fractional_gpus="ceil", filter="pod_phase=Succeeded")
    assert [(j.name, j.g * j.w_max) for j in jobs] == [("j1", 1), ("j2", 2)]
    assert rep.filtered["row filter pod_phase=['Succeeded']"] == 1
    assert any("fraction of a GPU" in n for n in rep.notes)
    # a total in thousandths of a GPU (units.gpus: milli)
    q = tmp_path / "b.csv"
    q.write_text("submit,milli,runtime\n0,2000,10\n1,1500,10\n", encoding="utf-8")
    jobs, rep = load_trace(q, "csv", columns={"submit": "submit", "gpus": "milli", "duration": "runtime"},
                           units={"gpus": "milli"}, skip_bad_rows=True)
    assert [j.g * j.w_max for j in jobs] == [2] and rep.skipped["fractional-gpu"] == 1


def test_env_trace_options_and_seeded_draws(tmp_path):
    from aryl_gym.envs.allocation import ArylEnv

    p = tmp_path / "t.csv"
    rows = [f"2017-10-01 00:{m:02d}:00,{100 + m}.0,1,{100 + m}.0,{'vcA' if m % 3 else 'vcB'}\n" for m in range(40)]
    p.write_text(PHILLY + "".join(rows), encoding="utf-8")
    env = ArylEnv(scenario="tiny", trace=str(p), trace_format="philly", trace_options={"vc": "vcA"})
    fams = {}
    for s in (0, 1, 0):
        env.reset(options={"episode_seed": s})
        jobs = env.episode.jobs
        assert len(jobs) == 26 and all(j.extra["vc"] == "vcA" for j in jobs)
        fams.setdefault(s, []).append([(j.family, j.type_agnostic) for j in jobs])
    assert fams[0][0] == fams[0][1]  # same seed, same draws
    assert fams[0][0] != fams[1][0]  # the draws follow the episode seed
    # the env's trace load equals the CLI/scenario one for that seed
    from aryl_gym.scenario import _seed_streams

    want, _ = load_trace(p, "philly", cluster=env.config, rng=_seed_streams(1)[0], vc="vcA")
    env.reset(options={"episode_seed": 1})
    assert env.episode.jobs == want
    assert np.all([a.submit == b.submit for a, b in zip(env.episode.jobs, want)])


def test_pollux_outside_artifact_layout_uses_data_root_profiles(tmp_path):
    from aryl_gym.workload.paths import default_data_root

    root = default_data_root()
    if root is None or not (root / "traces/pollux-philly/traces").is_dir():
        pytest.skip("shared Pollux profiles absent: set ARYL_GYM_DATA to the folder holding "
                    "traces/pollux-philly (read-only shared data, ../shared beside the checkout)")
    p = tmp_path / "my-workload.csv"
    p.write_text("name,time,application,num_replicas,batch_size\na,10,cifar10,2,256\n", encoding="utf-8")
    jobs, rep = load_trace(p, "pollux")
    assert len(jobs) == 1 and jobs[0].w_max == 2
    assert any("Pollux profiles from the data root" in n for n in rep.notes)
    same, _ = load_trace(p, "pollux", profiles=str(root / "traces/pollux-philly/traces"))
    assert same == jobs


def test_fractional_gpus_ceil_note_quotes_the_traces_own_request(tmp_path):
    # was: the note always said "(e.g. 0.46)", whatever the trace asked for
    p = tmp_path / "a.csv"
    p.write_text(GEN_HEAD + "j1,0,1,1000,10,Succeeded\nj2,5,1,500,10,Succeeded\nj3,6,1,250,10,Succeeded\n",
                 encoding="utf-8")
    cols = {"submit": "submit", "gpus": "num_gpu", "duration": "runtime", "id": "job", "gpu_milli": "gpu_milli"}
    jobs, rep = load_trace(p, "csv", columns=cols, fractional_gpus="ceil")
    assert [j.g * j.w_max for j in jobs] == [1, 1, 1]
    note = next(n for n in rep.notes if "fraction of a GPU" in n)
    assert note.startswith("2 jobs ask for a fraction of a GPU (e.g. 0.5)"), note
