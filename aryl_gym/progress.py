"""Progress reporting for long commands, on a terminal and in logs.

:func:`progress_bar` gives a tqdm bar when stderr is a terminal, and otherwise (a log file, CI,
``nohup``) a plain line every :data:`LOG_INTERVAL_S` seconds, ``desc: n/total (p%) elapsed
Ns, eta Ns``, so a long run written to a file still shows that it is alive. Both expose
``update(n)``, ``set_postfix_str(text)`` and ``close()``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

#: seconds between two progress lines when stderr is not a terminal (``ARYL_GYM_PROGRESS_S``)
LOG_INTERVAL_S = 5.0


class LineProgress:
    """A progress reporter that prints whole lines, at most one per ``interval`` seconds."""

    def __init__(self, total: int | None, desc: str, unit: str, stream: IO[str], interval: float):
        self.total = total
        self.desc = desc
        self.unit = unit
        self.stream = stream
        self.interval = interval
        self.n = 0
        self.postfix = ""
        self._t0 = time.monotonic()
        self._last = self._t0
        self._printed_n = -1

    def _line(self, now: float) -> str:
        el = now - self._t0
        if self.total:
            pct = 100.0 * self.n / self.total
            eta = el / self.n * (self.total - self.n) if self.n else float("nan")
            eta_s = f", eta {eta:.0f} s" if eta == eta else ""
            head = f"{self.desc}: {self.n}/{self.total} {self.unit} ({pct:.0f}%) elapsed {el:.0f} s{eta_s}"
        else:
            head = f"{self.desc}: {self.n} {self.unit}, elapsed {el:.0f} s"
        return head + (f"  [{self.postfix}]" if self.postfix else "")

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._emit(now)

    def _emit(self, now: float) -> None:
        self._last = now
        self._printed_n = self.n
        print(self._line(now), file=self.stream, flush=True)

    def set_postfix_str(self, text: str, refresh: bool = False) -> None:
        self.postfix = text

    def close(self) -> None:
        now = time.monotonic()
        # a final line when the run lasted longer than one interval (short runs stay silent)
        if now - self._t0 >= self.interval and self._printed_n != self.n:
            self._emit(now)


def progress_bar(
    total: int | None,
    desc: str,
    unit: str = "it",
    enabled: bool = True,
    leave: bool = False,
    stream: IO[str] | None = None,
) -> Any | None:
    """A tqdm bar on a terminal, a :class:`LineProgress` otherwise, ``None`` when disabled."""
    if not enabled:
        return None
    stream = stream or sys.stderr
    isatty = getattr(stream, "isatty", lambda: False)
    if isatty():
        # keeps tqdm out of import aryl_gym
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, leave=leave, dynamic_ncols=True, file=stream)
    try:
        interval = float(os.environ.get("ARYL_GYM_PROGRESS_S", LOG_INTERVAL_S))
    except ValueError:
        interval = LOG_INTERVAL_S
    return LineProgress(total, desc, unit, stream, interval)
