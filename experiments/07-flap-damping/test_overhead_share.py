"""The script of the seventh attempt (overhead_share.py) by hand."""

from __future__ import annotations

import numpy as np
import pytest
from overhead_share import window_max_share


def test_overhead_share_script_window_by_hand():
    """overhead_share.py's sliding maximum: marks every 10 minutes, 100 GPU-s of
    allocation per minute; overhead 0 for an hour, then 100% for 30 minutes, then 0 again. The
    worst 1-hour window holds the 30 minutes of waste: share 0.5."""
    marks, over, alloc = [(0.0, 0.0, 0.0)], 0.0, 0.0
    for k in range(1, 19):  # 3 hours
        t = k * 600.0
        alloc += 100.0 * 10
        if 3600.0 < t <= 5400.0:
            over += 100.0 * 10
        marks.append((t, over, alloc))
    m = np.array(marks)
    assert window_max_share(m, 3600.0) == pytest.approx(0.5)
    assert window_max_share(m, 1800.0) == pytest.approx(1.0)
    assert window_max_share(m[:6], 3600.0) == 0.0  # never a full window of waste before 1 h
