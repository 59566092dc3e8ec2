"""Rendering (SPEC 6): an ``ansi`` text dashboard and an ``rgb_array`` picture, numpy only.

The picture has one row of cells per server (training servers first, then inference servers),
one cell per GPU, coloured by the job holding it (a fixed colour per job id); free GPUs are dark
grey on training servers, dark blue on loaned inference servers, and inference servers that are
not on loan are light grey. Below, a strip shows usage over time (one column per sampled round,
most recent at the right): training-pool busy GPUs (green) and loaned busy GPUs (orange) as
fractions of all GPUs.
"""

from __future__ import annotations

import numpy as np

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import INFER

CELL = 6  # pixels per GPU cell
PLOT_H = 40  # pixels of the usage strip
PLOT_W = 240  # columns (rounds) shown in the usage strip

_FREE_TRAIN = (40, 40, 40)
_FREE_LOAN = (20, 30, 80)
_NOT_LOANED = (170, 170, 170)
_BG = (0, 0, 0)


def _job_colour(j: int) -> tuple[int, int, int]:
    # a deterministic, well-spread colour per job id (golden-ratio hue walk)
    h = (j * 0.618033988749895) % 1.0
    i = int(h * 6)
    f = h * 6 - i
    v, s = 230, 0.65
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    r, g, b = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i % 6]
    return int(r), int(g), int(b)


def render_rgb(sim: Simulator) -> np.ndarray:
    """An (H, W, 3) uint8 image of the cluster and recent usage."""
    S = sim.n_servers
    max_cap = int(sim.srv_cap.max()) if S else 1
    width = max(max_cap * CELL, PLOT_W)
    height = S * CELL + 4 + PLOT_H
    img = np.zeros((height, width, 3), dtype=np.uint8)
    img[:] = _BG
    for s in range(S):
        y = s * CELL
        cap = int(sim.srv_cap[s])
        is_inf = sim.srv_pool[s] == INFER
        if is_inf and not sim.srv_loaned[s]:
            colours = [_NOT_LOANED] * cap
        else:
            colours = [_FREE_LOAN if is_inf else _FREE_TRAIN] * cap
            pos = 0
            for j, k in sorted(sim.srv_jobs[s].items()):
                for _ in range(int(k) * int(sim.g[j])):
                    if pos < cap:
                        colours[pos] = _job_colour(j)
                        pos += 1
        for c, col in enumerate(colours):
            img[y + 1 : y + CELL - 1, c * CELL + 1 : (c + 1) * CELL - 1] = col
    # usage strip
    y0 = S * CELL + 4
    tl = sim.acc.timeline[-PLOT_W:]
    total = float(sim.srv_cap.sum()) or 1.0
    for x, row in enumerate(tl):
        train_busy, loan_busy = row[1], row[2]
        h1 = int(round(PLOT_H * train_busy / total))
        h2 = int(round(PLOT_H * loan_busy / total))
        cx = width - len(tl) + x
        if h1:
            img[y0 + PLOT_H - h1 : y0 + PLOT_H, cx] = (60, 200, 60)
        if h2:
            img[y0 + PLOT_H - h1 - h2 : y0 + PLOT_H - h1, cx] = (240, 150, 30)
    return img


def render_ansi(sim: Simulator, window: np.ndarray | None = None) -> str:
    """A text dashboard: clock, queue, loans, one line per server, the window's jobs."""
    lines = []
    h = sim.now / 3600.0
    lines.append(
        f"t={sim.now:,.0f}s ({h:.2f} h)  queued={sim.n_queued} running={sim.n_running} "
        f"done={sim.done_count}/{sim.n_jobs}  loaned={int(sim.srv_loaned.sum())}/{sim.n_inf} "
        f"loanable={sim.loanable_now}  u={sim.loan.utilization(sim.now):.2f}"
    )
    for s in range(sim.n_servers):
        cap = int(sim.srv_cap[s])
        is_inf = sim.srv_pool[s] == INFER
        tag = "I" if is_inf else "T"
        if is_inf and not sim.srv_loaned[s]:
            bar = "#" * cap
            note = "inference"
        else:
            cells = []
            for j, k in sorted(sim.srv_jobs[s].items()):
                cells.extend([chr(ord("a") + j % 26)] * (int(k) * int(sim.g[j])))
            bar = "".join(cells).ljust(cap, ".")
            note = " ".join(f"j{j}x{k}" for j, k in sorted(sim.srv_jobs[s].items()))
        lines.append(f"{tag}{s:<3d} [{bar}] {note}")
    if window is not None and len(window):
        lines.append("window: " + " ".join(
            f"{int(j)}{'R' if sim.state[j] == JobState.RUNNING else 'Q'}{int(sim.workers[j])}/{int(sim.w_max[j])}"
            for j in window
        ))
    return "\n".join(lines) + "\n"
