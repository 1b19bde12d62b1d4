"""The all-in-one's unit tests build layouts in pytest's tmp dirs: their devices stay
directories (``device_fs`` ``auto`` would loop-mount an XFS image into each, which
the tmp dir's clean-up cannot remove)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def devices_are_directories(monkeypatch) -> None:
    monkeypatch.setenv("IOSTACK_DEVICE_FS", "dir")
