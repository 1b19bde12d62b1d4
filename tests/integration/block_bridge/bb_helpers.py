"""Helpers shared by the block bridge integration tests."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from iostack.block_bridge.access import IscsiAccess
from iostack.block_bridge.native_lib import BUILD_DIR


def make_backing(path: Path, size: int = 16 << 20) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def iscsi_rw(access: IscsiAccess, *args: str, data: bytes | None = None,
             initiator: str | None = None, chap: bool = True, check: bool = True) -> bytes:
    """libiscsi I/O as a listed initiator (or ``initiator``) with the CHAP pair
    (or none); with ``check=False`` a failure returns its message."""
    env = {**os.environ, **(access.initiator_env() if chap else {})}
    result = subprocess.run(
        [str(BUILD_DIR / "iscsi-rw"), "-i", initiator or access.initiators[0], *args],
        input=data, capture_output=True, timeout=60, env=env)
    if not check:
        return result.stdout if result.returncode == 0 else result.stderr
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def compliance(access: IscsiAccess, url: str, suites: list[str]) -> dict[str, str]:
    """Runs iscsi-test-cu suites; returns {Suite.Test: passed|failed|skipped}.
    CUnit counts skips as passes, so each test's own line is read."""
    results: dict[str, str] = {}
    initiators = [f"--initiator-name={access.initiators[0]}",
                  f"--initiator-name-2={access.initiators[-1]}"]
    for suite in suites:
        out = subprocess.run(["iscsi-test-cu", "--dataloss", *initiators, f"--test=ALL.{suite}",
                              url], capture_output=True, text=True, timeout=300,
                             env={**os.environ, **access.initiator_env()}).stdout
        for chunk in re.split(r"\n\s*Test: ", out)[1:]:
            name = chunk.split(" ...", 1)[0]
            status = ("skipped" if "SKIPPED" in chunk else
                      "failed" if "FAILED" in chunk else
                      "passed" if "passed" in chunk else "unknown")
            results[f"{suite}.{name}"] = status
    return results


def processes_showing(text: str) -> list[str]:
    """Command lines (``/proc/*/cmdline``, readable by every local user) holding ``text``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # exited meanwhile
            continue
        if text in args:
            found.append(f"{cmdline.parent.name}: {args}")
    return found


def xts_encrypt(key: bytes, data: bytes, offset: int, sector: int = 512) -> bytes:
    """AES-XTS per sector, tweak = sector number (LE), as aes_xts.so stores it."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    out = b""
    for start in range(0, len(data), sector):
        tweak = ((offset + start) // sector).to_bytes(16, "little")
        out += Cipher(algorithms.AES(key), modes.XTS(tweak)).encryptor().update(
            data[start:start + sector])
    return out
