"""Every test under experiments/ carries the ``experiments`` marker, so the default test run
(``-m 'not slow and not experiments'``) leaves them out; ``pytest -m experiments`` runs them.
Each experiment's folder is on ``sys.path`` while its tests run (pytest's default import mode), so
a test imports its experiment's modules by their plain names (``import es``)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.experiments)
