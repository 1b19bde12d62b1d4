"""Helpers shared by the block bridge integration tests."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from iostack.block_bridge.native_lib import BUILD_DIR


def make_backing(path: Path, size: int = 16 << 20) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def iscsi_rw(*args: str, data: bytes | None = None) -> bytes:
    result = subprocess.run([str(BUILD_DIR / "iscsi-rw"), *args], input=data,
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def compliance(url: str, suites: list[str]) -> dict[str, str]:
    """Runs iscsi-test-cu suites; returns {Suite.Test: passed|failed|skipped}.
    CUnit counts skips as passes, so each test's own line is read."""
    results: dict[str, str] = {}
    for suite in suites:
        out = subprocess.run(["iscsi-test-cu", "--dataloss", f"--test=ALL.{suite}", url],
                             capture_output=True, text=True, timeout=300).stdout
        for chunk in re.split(r"\n\s*Test: ", out)[1:]:
            name = chunk.split(" ...", 1)[0]
            status = ("skipped" if "SKIPPED" in chunk else
                      "failed" if "FAILED" in chunk else
                      "passed" if "passed" in chunk else "unknown")
            results[f"{suite}.{name}"] = status
    return results
