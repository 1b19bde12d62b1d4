"""Fixtures for block bridge integration tests: real tgtd, FUSE, nbdkit,
libiscsi and fio, each started on private ports and stopped by pid, also
when a test fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from iostack.block_bridge.access import IscsiAccess
from iostack.block_bridge.native_lib import ensure_built
from iostack.block_bridge.tgt import Tgtd
from iostack.ports import free_port


@pytest.fixture(scope="session")
def native_build() -> Path:
    return ensure_built()


@pytest.fixture
def failing_filters(native_build, tmp_path) -> Path:
    """A filter folder: the built filters plus ``failing`` (a test filter whose
    transforms fail while its ``flag`` file exists)."""
    filters = tmp_path / "filters"
    filters.mkdir()
    for so in (native_build / "filters").glob("*.so"):
        shutil.copy(so, filters / so.name)
    failing = Path(__file__).parents[2] / "unit" / "block_bridge" / "filters" / "failing.c"
    subprocess.run(["gcc", "-Wall", "-fPIC", "-shared", "-o", str(filters / "failing.so"),  # noqa: S603, S607
                    str(failing)], check=True)
    return filters


@pytest.fixture(scope="module")
def tgtd(native_build, tmp_path_factory):
    daemon = Tgtd(tmp_path_factory.mktemp("tgtd") / "tgtd.log",
                  IscsiAccess.generate("iqn.2026-11.org.iostack"), port=free_port())
    daemon.start()
    yield daemon
    daemon.stop()
