"""Fixtures for the block bridge unit tests: the native build, a filter
directory with the shipped filters plus test-only ones, backing files."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iostack.block_bridge.native_lib import ensure_built

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def native_build() -> Path:
    """Build (or confirm up to date) the native parts once per session."""
    return ensure_built()


@pytest.fixture(scope="session")
def filter_dir(native_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped filters, the bare-ABI sample (mirror) and the test-only
    'divert' filter (owns writes: doWrite=false) and 'failing' filter (fails
    on demand through the error-returning transforms), compiled here."""
    directory = tmp_path_factory.mktemp("filters")
    for so in (native_build / "filters").glob("*.so"):
        shutil.copy(so, directory / so.name)
    shutil.copy(native_build / "examples" / "mirror.so", directory / "mirror.so")
    subprocess.run(
        ["gcc", "-Wall", "-fPIC", "-shared", "-o", str(directory / "divert.so"),
         str(HERE / "filters" / "divert.c")],
        check=True,
    )
    subprocess.run(
        ["gcc", "-Wall", "-fPIC", "-shared", "-o", str(directory / "failing.so"),
         str(HERE / "filters" / "failing.c")],
        check=True,
    )
    return directory


@pytest.fixture(scope="session")
def evp_fail_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An LD_PRELOAD library that fails libcrypto's EVP_CipherUpdate while the
    file named by $EVP_FAIL_FLAG exists."""
    shim = tmp_path_factory.mktemp("shim") / "evp_fail.so"
    subprocess.run(["gcc", "-Wall", "-fPIC", "-shared", "-o", str(shim),
                    str(HERE / "filters" / "evp_fail.c"), "-ldl"], check=True)
    return shim


@pytest.fixture
def backing(tmp_path: Path):
    """A 1 MiB zero-filled backing file, open read-write; yields (path, fd)."""
    path = tmp_path / "backing.img"
    with open(path, "wb") as f:
        f.truncate(1 << 20)
    fd = os.open(path, os.O_RDWR)
    yield path, fd
    os.close(fd)
