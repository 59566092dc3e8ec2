"""Reading user-given files with clear errors, strict YAML, atomic writes and an output lock.

Everything a user passes as a file (a scenario, a suite, an algorithm config, a results CSV) is
opened through :func:`open_text` or :func:`load_yaml_file`, so a folder, a name that is too long,
a file without read permission or a binary file gives a :class:`~aryl_gym.config.ConfigError`
naming the file and the fix instead of a traceback. YAML is read with :class:`StrictLoader`, a
``SafeLoader`` that rejects duplicate mapping keys (PyYAML silently keeps the last one).
"""

from __future__ import annotations

import errno
import io
import math
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import yaml

from aryl_gym.errors import ConfigError


def _config_error(msg: str) -> Exception:
    return ConfigError(msg)


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises on a mapping key given twice (with both line numbers)."""


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: dict[Any, Any] = {}
    for key_node, _value in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # a merge key (<<: *base): its keys may be overridden here, as YAML says
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: let SafeLoader report it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first given on line {first.line + 1}); "
                "each key may appear once, remove one of them",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,  # type: ignore[arg-type]
)


# YAML 1.1 (PyYAML) reads a number in exponent form without a dot (``1e-4``, ``8e-1``, ``1e5``)
# as a string; YAML 1.2 and every other parser read it as a number. StrictLoader does too, so a
# YAML file and a command-line value (``--set learning_rate=1e-4``) read the same numbers.
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml11_trap(loader: StrictLoader, node: yaml.ScalarNode) -> str:
    """Why a plain number that YAML 1.1 reads unlike YAML 1.2, every other parser and the command
    line (:func:`parse_number`) is refused, or "": ``010`` (octal: 8) and ``1:30`` (base 60: 90).
    Was: ``train_servers: 010`` ran 8 servers and ``duration_hours: 1:30`` 90 hours."""
    value = str(loader.construct_scalar(node))
    digits = value.replace("_", "").lstrip("+-")
    is_int = node.tag.endswith(":int")
    if ":" in digits:
        read = loader.construct_yaml_int(node) if is_int else loader.construct_yaml_float(node)
        return (f"{value!r} is a base-60 number in YAML 1.1 (read as {read:g}); write the number "
                "itself (e.g. 1.5 for an hour and a half), or quote it for text")
    if is_int and len(digits) > 1 and digits[0] == "0" and digits[1].isdigit() and int(digits, 8) != int(digits):
        return (f"{value!r} is an octal number in YAML 1.1 (read as {loader.construct_yaml_int(node)}); "
                f"write it without the leading zero ({value[:1].strip('0123456789_')}{digits.lstrip('0')}), or quote it "
                "for text")
    return ""


def _construct_number(loader: StrictLoader, node: yaml.ScalarNode) -> Any:
    why = _yaml11_trap(loader, node)
    if why:
        raise yaml.constructor.ConstructorError(None, None, why, node.start_mark)
    if node.tag.endswith(":int"):
        return loader.construct_yaml_int(node)
    return loader.construct_yaml_float(node)


for _tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float"):
    StrictLoader.add_constructor(_tag, _construct_number)  # type: ignore[arg-type]


#: the most nodes a YAML document may hold with its aliases expanded: a "billion laughs" anchor
#: bomb is a few lines that expand to gigabytes when the config is copied or written out
MAX_YAML_NODES = 1_000_000


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of ``root`` with every alias expanded (shared nodes counted at each use), computed
    without expanding; a recursive alias counts as too many."""
    size: dict[int, int] = {}
    busy: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in size:
            continue
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [n for kv in node.value for n in kv]
        if done:
            busy.discard(key)
            size[key] = min(1 + sum(size[id(k)] for k in kids), MAX_YAML_NODES + 1)
            continue
        if key in busy:
            return MAX_YAML_NODES + 1  # recursive
        busy.add(key)
        stack.append((node, True))
        for k in kids:
            if id(k) in busy:
                return MAX_YAML_NODES + 1
            if id(k) not in size:
                stack.append((k, False))
    return size[id(root)]


def _load_capped(text: str, where: str) -> Any:
    """``yaml.load(text, StrictLoader)`` with the alias expansion capped (:data:`MAX_YAML_NODES`)."""
    loader = StrictLoader(text)
    loader.name = where  # error marks name the file (was: in "<unicode string>", line ...)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        n = _expanded_size(node)
        if n > MAX_YAML_NODES:
            raise _config_error(
                f"{where}: its anchors and aliases (&name / *name) expand to more than "
                f"{MAX_YAML_NODES:,} values (an alias bomb, or a recursive alias); write the values out"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml_value(text: str) -> Any:
    """One value given on the command line (``--set KEY=VALUE``), read as YAML by
    :class:`StrictLoader` (so ``1e-4`` is a number, as in the YAML files)."""
    try:
        return _load_capped(text, repr(text[:40]))
    except yaml.YAMLError as exc:  # was: a parser traceback (--set learning_rate=[1)
        why = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise _config_error(f"{text!r} is not a YAML value ({why}); quote it to give it as text (KEY=\"'...'\")") from None


def parse_number(text: str, what: str = "value", integer: bool = False) -> int | float:
    """The one number parser of the command-line flags: an integer, a decimal or scientific
    notation (``1e-4``, ``8e-1``, ``1e5``); NaN and infinity are refused, and with ``integer``
    a value that is not whole (``1.5``, ``1e-4``). A ValueError says what was expected."""
    t = str(text).strip().replace("_", "")
    kind = "a whole number" if integer else "a number"
    if not t.isascii():
        # was: read by int()/float(), which take any script's digits: '١' (Arabic-Indic one) and
        # '１' (fullwidth) ran as seed 1
        raise ValueError(f"{what}: expected {kind} in ASCII digits (e.g. 10, 0.5, 1e-4), got {text!r}")
    try:
        return int(t)
    except ValueError:
        pass
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"{what}: expected {kind} (e.g. 10, 0.5, 1e-4), got {text!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{what}: expected a finite number, got {text!r}")
    if integer:
        if not v.is_integer() or abs(v) > 2**53:
            raise ValueError(f"{what}: expected {kind}, got {text!r}")
        return int(v)
    return v


def check_readable_file(path: str | os.PathLike[str], what: str = "file") -> Path:
    """``path`` as a :class:`Path` if it names a readable regular file, else a ConfigError."""
    p = Path(path)
    try:
        if p.is_dir():
            raise _config_error(f"{p}: is a folder; give the path of a {what} (a file), not a folder")
        if not p.exists():
            raise _config_error(f"{p}: file not found (check the {what} path)")
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _config_error(
                f"{str(p)[:80]}...: the file name is too long ({len(p.name)} characters; the limit "
                f"is usually 255); give a shorter {what} path"
            ) from None
        raise _config_error(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    if not os.access(p, os.R_OK):
        raise _config_error(
            f"{p}: permission denied; make the {what} readable (chmod u+r) or copy it somewhere readable"
        )
    return p


def read_text(path: str | os.PathLike[str], what: str = "file") -> str:
    """The UTF-8 text of ``path``; a folder, missing, unreadable or binary file is a ConfigError."""
    p = check_readable_file(path, what)
    try:
        data = p.read_bytes()
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            raise _config_error(f"{str(p)[:80]}...: the file name is too long; give a shorter path") from None
        raise _config_error(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise _config_error(f"{p}: is a binary file, not a text {what}; give the YAML/CSV text file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _config_error(
            f"{p}: is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            f"save the {what} as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


@contextmanager
def open_text(path: str | os.PathLike[str], what: str = "file") -> Iterator[IO[str]]:
    """Open ``path`` for reading text after :func:`check_readable_file` (errors named)."""
    p = check_readable_file(path, what)
    try:
        fh = open(p, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise _config_error(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    try:
        yield fh
    except UnicodeDecodeError:
        raise _config_error(f"{p}: is not UTF-8 text (a binary file?); give the text {what}") from None
    finally:
        fh.close()


def load_yaml_file(path: str | os.PathLike[str], what: str = "YAML file") -> Any:
    """Parse ``path`` with :class:`StrictLoader`; every failure is a ConfigError naming the file."""
    text = read_text(path, what)
    try:
        return _load_capped(text, str(Path(path)))
    except yaml.YAMLError as exc:
        raise _config_error(f"{Path(path)}: not valid YAML: {exc}") from None


# ----------------------------------------------------------------------------------------------
# Writing
# ----------------------------------------------------------------------------------------------


def _umask() -> int:
    """The process's file-creation mask (read by setting it and putting it back)."""
    m = os.umask(0o022)
    os.umask(m)
    return m


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes,
                       temporary: str | os.PathLike[str] | None = None) -> None:
    """Write ``data`` to ``path`` through a unique temporary file, fsync, then ``os.replace``.

    Readers see the old file or the new one, never a part; two writers never share a temporary.
    ``temporary``: the temporary's path, when the caller names it (unique to its writer, e.g. by
    its pid, so that a killed writer's leftover can be told apart); by default a fresh name
    beside ``path``. An error or interruption while writing removes the temporary.
    """

    p = Path(path)
    if temporary is None:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    else:
        tmp = os.fspath(temporary)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        # the mode a plain open() would give (was: mkstemp's 0600 on every file written)
        try:
            mode = os.stat(p).st_mode & 0o7777
        except OSError:
            mode = 0o666 & ~_umask()
        os.chmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_savefig(fig: Any, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """``fig.savefig(path, **kwargs)`` through :func:`atomic_write_bytes`: a run killed while a
    plot is written leaves the earlier plot or the new one (was: a cut PNG)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=kwargs.pop("format", None) or Path(path).suffix.lstrip(".") or "png", **kwargs)
    atomic_write_bytes(path, buf.getvalue())


def update_text_locked(path: str | os.PathLike[str], change: Any) -> None:
    """Replace ``path``'s text with ``change(old)`` (``old``: ``None`` when the file is missing
    or empty), atomically and under an exclusive ``flock`` on the file, so that two processes
    updating parts of one shared file (``reproduce --write-docs`` of two scales at once) both
    land: was a read-modify-write through one fixed temporary name, where the later writer
    dropped the earlier one's part, or failed with a FileNotFoundError traceback. Where
    ``fcntl`` is missing (not POSIX) the update is atomic but not locked."""
    p = Path(path)
    try:
        import fcntl  # POSIX only: imported where it is used, so the module loads elsewhere too
    except ImportError:  # pragma: no cover - not POSIX
        old = p.read_text(encoding="utf-8") if p.exists() else None
        atomic_write_text(p, change(old or None))
        return
    while True:
        fd = os.open(p, os.O_RDONLY | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.stat(p).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # replaced (or removed) while this process waited: lock the new file
                continue
            with open(p, "rb") as fh:
                old = fh.read().decode("utf-8")
            atomic_write_text(p, change(old or None))
            return
        finally:
            os.close(fd)  # releases the lock


def pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this machine (``kill(pid, 0)``): another
    user's process or a zombie counts as alive. Where that cannot be asked safely (not POSIX:
    Windows' ``os.kill`` ends the process) every pid counts as alive."""
    if os.name != "posix":  # pragma: no cover - not POSIX
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    except (OverflowError, ValueError):  # no process can have that id
        return False
    except OSError:  # pragma: no cover - cannot tell: keep what it may own
        return True
    return True


def check_output_file(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """``path`` as a :class:`Path` if a file can be written there, else a ConfigError saying why:
    checked before any work, so a long run never ends by failing to save what it computed."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise _config_error(f"{p}: is a folder; give the path of the {what} (a file)")
    if not parent.is_dir():
        raise _config_error(
            f"{p}: the folder {parent} does not exist; create it (mkdir -p {parent}) or give another {what} path"
        )
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise _config_error(f"{p}: permission denied; give a writable {what} path")
    return p


def unique_backup(path: Path) -> Path:
    """A name ``PATH.bak-YYYYmmdd-HHMMSS-microseconds[-n]`` that does not exist yet."""

    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    cand = path.with_name(f"{path.name}.bak-{stamp}")
    n = 1
    while cand.exists():
        cand = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        n += 1
    return cand


class DirLock:
    """An exclusive, non-blocking lock on an output folder: a ``filelock.FileLock`` on
    ``DIR/.lock`` (``fcntl.flock`` on POSIX).

    The kernel drops the lock when the holder dies, so a killed run never leaves a stale lock
    (the file itself stays; its presence means nothing). The lock file records the holder's pid
    for the error message: filelock 3.30 and later leave a held lock file untouched when an
    acquisition fails (earlier ones opened it with ``O_TRUNC`` and erased the pid), hence the
    ``filelock>=3.30`` dependency. The lock is re-entrant within a process.
    """

    #: folders locked by this process -> hold count (the lock is re-entrant within a process)
    _held: dict[str, int] = {}

    def __init__(self, folder: Path, what: str = "--out"):
        self.folder = Path(folder)
        self.path = self.folder / ".lock"
        self.what = what
        self._lock: Any = None  # the filelock.FileLock while held
        self._key = str(self.folder.resolve())
        self._nested = False

    def acquire(self) -> DirLock:
        if DirLock._held.get(self._key):
            DirLock._held[self._key] += 1
            self._nested = True
            return self
        # filelock: a core dependency, imported when a folder is locked
        from filelock import FileLock, Timeout

        # thread_local=False: one hold for the whole process, as the hold count above
        lock = FileLock(self.path, mode=0o644, thread_local=False)
        try:
            lock.acquire(timeout=0)  # one attempt: a folder in use is an error, not a wait
        except Timeout:
            raise _config_error(
                f"{self.folder}: another aryl-gym run (pid {self._holder()}) is writing to this "
                f"{self.what} folder; wait for it to finish (or stop it), or choose another {self.what}"
            ) from None
        self._record_pid()
        self._lock = lock
        DirLock._held[self._key] = 1
        return self

    def _holder(self) -> str:
        """The pid the holder wrote into the lock file, or ``?``."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return "?"
        try:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
        except OSError:
            return "?"
        finally:
            os.close(fd)

    def _record_pid(self) -> None:
        """Write this process's pid into the (held) lock file; the lock does not need it."""
        try:
            fd = os.open(self.path, os.O_WRONLY)
        except OSError:  # pragma: no cover - a lock file we hold but cannot write
            return
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # pragma: no cover - e.g. a region locked by the OS (Windows)
            pass
        finally:
            os.close(fd)

    def release(self) -> None:
        if self._nested:
            DirLock._held[self._key] -= 1
            self._nested = False
            return
        DirLock._held.pop(self._key, None)
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


#: the file recording which command owns an output folder
OWNER_FILE = ".aryl-gym-owner"

#: files that mark a folder written by a command before owner markers existed
_LEGACY_MARKS = {
    "leaderboard": ("leaderboard.json", "leaderboard.md"),
    "reproduce": ("reproduction.md",),
}


#: what a command's own folder of a version before owner markers holds (any one of these):
#: such a folder is taken as the command's earlier output, not as a folder of the user's
_OWN_OLD_OUTPUT = {
    "leaderboard": ("leaderboard.json", "leaderboard.md", "results.csv"),
    "seed-study": ("results.csv",),
    "reproduce": ("reproduction.md", "episodes"),
    "calibrate": ("episodes",),
    "train-reclaim": ("reclaim-agent.npz",),
}

#: files of ours that may sit in a folder before it is claimed (the lock, the owner marker)
_OUR_FILES = {".lock", OWNER_FILE}

#: placeholders of version control and file browsers, no user data (``runs/.gitkeep`` of a
#: project scaffold, a ``.gitignore`` keeping results out of git, ``.DS_Store``): such a folder
#: counts as empty (was: ``--out runs`` holding only ``.gitkeep`` was refused as a user's folder)
_PLACEHOLDERS = {".gitkeep", ".keep", ".gitignore", ".DS_Store", "Thumbs.db", "desktop.ini"}


def _own_file(p: Path) -> bool:
    """``p`` exists and can be a command's own earlier output: a ``results.csv`` only when its
    header is one of ours (its first column ``suite``; an empty one is a killed run's), since a
    user's folder may well hold a ``results.csv`` of their own (was: any such file made the
    folder a leaderboard's, and ``--overwrite`` moved the user's file aside)."""
    if not p.exists():
        return False
    if p.name != "results.csv" or not p.is_file():
        return True
    try:
        with open(p, encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return True  # unreadable: the run's own reading of it says why
    return not first.strip() or first.startswith("suite,")


def _is_train_run(d: Path) -> bool:
    """``d`` is a training run folder: ``aryl-gym train``'s (``config.yaml`` beside
    ``commit.txt``), or one of ``examples/ppo_mask.py``, which writes into the same default
    ``runs/`` without an owner marker (``model.pt``, TensorBoard's ``events.out.tfevents.*``)."""
    if (d / "config.yaml").is_file() and (d / "commit.txt").is_file():
        return True
    return (d / "model.pt").is_file() or any(f.is_file() for f in d.glob("events.out.tfevents.*"))


def _old_train_runs(folder: Path) -> bool:
    """``folder`` holds a training run folder of its own (:func:`_is_train_run`): the parent of
    earlier training runs (was: only ``aryl-gym train``'s, so ``runs/`` holding only a run of
    ``python examples/ppo_mask.py``, its default ``--out-dir`` too, was refused to ``train``)."""
    try:
        return any(_is_train_run(d) for d in folder.iterdir() if d.is_dir())
    except OSError:
        return False


def check_out_folder(folder: str | os.PathLike[str], command: str, what: str = "--out") -> None:
    """Refuse (ConfigError) an existing, non-empty ``folder`` that is not a results folder of
    aryl-gym: no owner marker (``.aryl-gym-owner``) and nothing a run of ``command`` writes.
    ``--out ~`` or ``--out .`` used to be claimed and filled (tables, plots, caches, run folders
    among the user's files; ``--overwrite`` moved their ``results.csv`` aside). Nothing is
    written or deleted here; a missing or empty folder passes."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / OWNER_FILE).exists():
        return
    try:
        # a results folder of aryl-gym inside (runs/reclaim-agent-seed0 of train-reclaim in the
        # default runs/ of train) is no file of the user's either
        names = sorted(p.name for p in folder.iterdir()
                       if p.name not in _OUR_FILES and not (p.name in _PLACEHOLDERS and p.is_file())
                       and not (p / OWNER_FILE).is_file())
    except OSError:
        return  # unreadable: prepare_out_dir / the write itself says why
    if not names:
        return
    if any(_own_file(folder / n) for n in _OWN_OLD_OUTPUT.get(command, ())):
        return
    if any((folder / n).exists() for marks in _LEGACY_MARKS.values() for n in marks):
        return  # an older folder of another command: claim_folder names that command
    if command == "train" and _old_train_runs(folder):
        return
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    raise _config_error(
        f"{what} {folder}: the folder is not empty ({shown}) and holds no results of `aryl-gym "
        f"{command}` (no {OWNER_FILE}); `aryl-gym {command}` does not write among other files. "
        f"Give a new or empty folder, e.g. {what} {folder / ('aryl-gym-' + command)}"
    )


def claim_folder(folder: Path, command: str, what: str = "--out") -> None:
    """Record that ``command`` writes ``folder`` (``DIR/.aryl-gym-owner``); a folder owned by
    another command is a ConfigError, so no command writes into (or resumes) another's results,
    and so is a non-empty folder that is no results folder at all (:func:`check_out_folder`).
    Call it while holding the folder's :class:`DirLock`."""
    folder = Path(folder)
    mark = folder / OWNER_FILE
    owner = None
    try:
        owner = mark.read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        for other, names in _LEGACY_MARKS.items():
            if other != command and any((folder / n).exists() for n in names):
                owner = other
                break
    except OSError as exc:
        raise _config_error(f"{mark}: cannot read the folder's owner: {exc.strerror or exc}") from None
    except UnicodeDecodeError:  # was: the decoder's message alone, naming no file
        raise _config_error(f"{mark}: cannot read the folder's owner: not a text file (damaged); delete "
                            f"it if {folder} holds your results of `aryl-gym {command}`, or choose "
                            f"another {what}") from None
    if owner is not None and owner != command:
        raise _config_error(
            f"{what} {folder}: this folder holds the results of `aryl-gym {owner}` (see {mark.name}); "
            f"`aryl-gym {command}` does not write into another command's folder. Choose another {what}"
        )
    if owner is None:
        check_out_folder(folder, command, what)
        atomic_write_text(mark, command + "\n")
