"""Set-up shared by tests/ and experiments/: stable-baselines3 writes its default logger folder
(``SB3-<date>``) under ``SB3_LOGDIR``, else the system's temporary folder, for every model that
learns without a logger of its own; pointing it into pytest's own temporary folders keeps a test
run from leaving folders in /tmp."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_pytest_tmp(tmp_path_factory: pytest.TempPathFactory):
    old = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))
    yield
    if old is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = old
