"""Fixtures for block bridge integration tests: real tgtd, FUSE, nbdkit,
libiscsi and fio, each started on private ports and stopped by pid, also
when a test fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from iostack.block_bridge.access import IscsiAccess
from iostack.block_bridge.native_lib import ensure_built
from iostack.block_bridge.processes import free_port
from iostack.block_bridge.tgt import Tgtd


@pytest.fixture(scope="session")
def native_build() -> Path:
    return ensure_built()


@pytest.fixture(scope="module")
def tgtd(native_build, tmp_path_factory):
    daemon = Tgtd(tmp_path_factory.mktemp("tgtd") / "tgtd.log",
                  IscsiAccess.generate("iqn.2026-11.org.iostack"), port=free_port())
    daemon.start()
    yield daemon
    daemon.stop()
