"""What the user documentation (README.md, docs/env.md, docs/training.md, docs/leaderboard.md,
docs/extending.md, docs/traces.md) says about names in the code: every `aryl-gym CMD --option`
it shows exists in that command's parser, every repository path and relative link it names
exists, every env id it names is registered, the env arguments' documented defaults are the
defaults, and the excerpt of `configs/algos/maskable_ppo.yaml` in docs/training.md agrees with the
file. tests/test_readme.py checks the README's `make run` figures; this file does not repeat
them. No episode is played: the whole file takes about two seconds."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

import aryl_gym  # noqa: F401  (registers the envs)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "docs/env.md", "docs/training.md", "docs/leaderboard.md",
        "docs/extending.md", "docs/traces.md"]
# prose that starts with "aryl-gym" and a verb, not a command
PROSE = {"trains", "reads", "allocates", "run"}


def _text(name: str) -> str:
    return (ROOT / name).read_text()


@pytest.fixture(scope="module")
def subparsers():
    from aryl_gym.cli import build_parser

    parser = build_parser()
    return next(a.choices for a in parser._actions if isinstance(getattr(a, "choices", None), dict))


def _invocations(text: str):
    """(line, command, options) of every `aryl-gym CMD ...` (backslash continuations joined;
    up to a backtick, a table bar or a comment)."""
    joined = text.replace("\\\n", " ")
    for i, line in enumerate(joined.split("\n"), 1):
        for m in re.finditer(r"aryl-gym ([a-z][a-z-]*)([^`|#\n]*)", line):
            yield i, m.group(1), re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(2))


@pytest.mark.parametrize("doc", DOCS)
def test_every_documented_command_and_option_exists(doc, subparsers):
    bad = []
    for line, cmd, opts in _invocations(_text(doc)):
        if cmd in PROSE:
            continue
        if cmd not in subparsers:
            bad.append(f"{doc}:{line}: no command {cmd!r}")
            continue
        known = {o for a in subparsers[cmd]._actions for o in a.option_strings}
        bad += [f"{doc}:{line}: aryl-gym {cmd} has no {o}" for o in opts if o not in known]
    assert not bad, "\n".join(bad)


def test_train_options_paragraph_names_train_options(subparsers):
    """docs/training.md, "One command": `Options: ...` lists options of `aryl-gym train`."""
    text = _text("docs/training.md")
    para = text[text.index("Options: `--scenario"):]
    para = para[:para.index("\n\n")]
    known = {o for a in subparsers["train"]._actions for o in a.option_strings}
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", para))
    assert len(named) >= 15 and named <= known, sorted(named - known)


def test_ppo_mask_example_flags_exist():
    """docs/training.md's `Flags:` list of examples/ppo_mask.py, against its argparse calls
    (read from the source: importing it would import torch)."""
    text = _text("docs/training.md")
    para = text[text.index("Flags: `--env-id`"):]
    para = para[:para.index("\n\n")]
    tree = ast.parse(_text("examples/ppo_mask.py"))
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                    flags.add(arg.value)
                    kw = {k.arg: k.value for k in node.keywords}
                    if "BooleanOptionalAction" in ast.dump(kw.get("action", ast.Constant(None))):
                        flags.add("--no-" + arg.value[2:])
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", para))
    assert len(named) >= 20 and named <= flags, sorted(named - flags)


PATH_RE = re.compile(r"(?<![\w./-])((?:aryl_gym|docs|configs|scripts|tests|agents|examples"
                     r"|experiments)/[\w./*=-]*[\w*])")


def _is_id_or_placeholder(path: str) -> bool:
    if re.fullmatch(r"aryl_gym/\w+-v\d+", path):  # an env id (checked below)
        return True
    if re.fullmatch(r"aryl_gym/[\w-]+/[\w-]+-v\d+", path):  # a Minari dataset id
        return True
    # placeholders and the files of examples (NAME.yaml, configs/scenarios/mine.yaml)
    return bool(re.search(r"\b(NAME|RUN|SUITE|SCENARIO|ENTRANT|mine)\b", path))


@pytest.mark.parametrize("doc", DOCS)
def test_every_repository_path_exists(doc):
    missing = []
    for i, line in enumerate(_text(doc).split("\n"), 1):
        for p in PATH_RE.findall(line):
            if _is_id_or_placeholder(p):
                continue
            found = list(ROOT.glob(p)) if "*" in p else (ROOT / p).exists()
            if not found:
                missing.append(f"{doc}:{i}: {p}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    text = _text(doc)
    bad = []
    for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        url = m.group(1)
        external = url.startswith(("http://", "https://", "mailto:"))
        if not external and not ((ROOT / doc).parent / url).exists():
            bad.append(f"{doc}:{text[:m.start()].count(chr(10)) + 1}: {url}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc", DOCS)
def test_every_env_id_is_registered(doc):
    """`aryl_gym/Aryl...-vN` ids; -v0 is documented as deprecated (gym raises DeprecatedEnv)."""
    ids = set(re.findall(r"aryl_gym[/:](Aryl\w*-v\d+)", _text(doc)))
    unknown = {i for i in ids if f"aryl_gym/{i}" not in gym.registry and not i.endswith("-v0")}
    assert not unknown, sorted(unknown)


def test_env_arguments_defaults_match_env_options():
    """docs/env.md, "Arguments of `Aryl-v2`": `name` (default) for the literal defaults."""
    from aryl_gym.envs.options import EnvOptions

    text = _text("docs/env.md")
    section = text.split("## Arguments of `Aryl-v2`")[1].split("\n\n")[1]
    documented = dict(re.findall(r"`(\w+)`\s+\(([^;)]+?)(?:;[^)]*)?\)", section))
    checked = 0
    for f in dataclasses.fields(EnvOptions):
        if f.name not in documented or f.default is dataclasses.MISSING:
            continue
        raw = documented[f.name].strip()
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            continue  # prose ("from the scenario's ...", "Aryl's: ...")
        if isinstance(value, tuple):  # "ansi" or "rgb_array" style lists of choices
            continue
        assert value == f.default, f"docs/env.md: {f.name} ({raw}), EnvOptions: {f.default!r}"
        checked += 1
    assert checked >= 14


def test_training_md_config_excerpt_matches_maskable_ppo_yaml():
    """docs/training.md shows the shape of configs/algos/maskable_ppo.yaml with its values."""
    cfg = yaml.safe_load(_text("configs/algos/maskable_ppo.yaml"))
    text = _text("docs/training.md")
    i = text.index("### Hyperparameters: `configs/algos/*.yaml`")
    block = text[text.index("```yaml", i) + 7:text.index("```", text.index("```yaml", i) + 7)]
    d = cfg["default"]
    assert f"algo: {cfg['algo']}" in block
    assert f"env_id: {d['env_id']}" in block
    assert f"env_kwargs: {{action_mode: {d['env_kwargs']['action_mode']}}}" in block
    assert f"n_envs: {d['n_envs']}" in block
    net = ", ".join(str(n) for n in d["policy_kwargs"]["net_arch"])
    assert f"net_arch: [{net}], activation_fn: {d['policy_kwargs']['activation_fn']}" in block
    assert f"n_steps: {d['hyperparams']['n_steps']}" in block
    ev = d["eval"]
    assert (f"eval: {{freq: {ev['freq']}, seeds: [{', '.join(map(str, ev['seeds']))}], "
            f"references: [{', '.join(ev['references'])}]}}") in block
    assert f"tiny: {{total_timesteps: {cfg['tiny']['total_timesteps']}" in block


def test_bench_names_in_docs_exist():
    """`aryl-gym bench --only NAME[,NAME]` names benchmarks that exist."""
    from aryl_gym.benchmarks import BENCHMARKS

    names = {b.name for b in BENCHMARKS}
    used = set()
    for doc in DOCS:
        text = _text(doc).replace("`\n", "` ").replace("\n", " ")
        for group in re.findall(r"aryl-gym bench\s+(?:--quick\s+)?--only\s+([\w,-]+)", text):
            used |= set(group.split(","))
    assert used and used <= names, sorted(used - names)


def test_readme_reference_policies_are_registered():
    """The README's "What is inside" row of reference policies names registered policies only."""
    from aryl_gym.agents import policy_names

    row = next(line for line in _text("README.md").splitlines()
               if line.startswith("| reference policies |"))
    named = set(re.findall(r"`([\w+.-]+)`", row.split("|")[3])) - {"aryl-gym policies"}
    assert len(named) >= 15
    assert named <= set(policy_names()), sorted(named - set(policy_names()))


ENTRY_POINT_GROUPS = {"aryl_gym.policies", "aryl_gym.trace_formats"}


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT / ("agents" if parts[:2] == ["aryl_gym", "agents"] else "aryl_gym")
    rel = parts[2:] if parts[:2] == ["aryl_gym", "agents"] else parts[1:]
    path = base.joinpath(*rel)
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


@pytest.mark.parametrize("doc", DOCS)
def test_dotted_names_resolve(doc):
    """`aryl_gym.module.name[.attr]` in the docs: the module exists and defines (or imports) the
    name, and a method named after a class is defined in that module (read from the source, so
    no torch or Ray import)."""
    bad = []
    names = set(re.findall(r"`(aryl_gym(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", _text(doc)))
    for name in sorted(names - ENTRY_POINT_GROUPS):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            found = _module_file(parts[:i])
            if found is not None:
                rest = parts[i:]
                break
        else:
            bad.append(f"{doc}: {name}: no such module")
            continue
        src = found.read_text()
        for attr in rest[:2]:
            defined = (rf"(^|\n)\s*(def|class)\s+{attr}\b|(^|\n)\s*{attr}\s*[:=]"
                       rf"|\bimport\b[^\n]*\b{attr}\b")
            if not re.search(defined, src):
                bad.append(f"{doc}: {name}: {attr} not defined in {found.relative_to(ROOT)}")
                break
    assert not bad, "\n".join(bad)
