"""``iostack filter test FILE`` runs the filter in a real bubblewrap sandbox of its own.

No stack runs for these tests: ``IOSTACK_STATE_DIR`` points at an empty
folder, so the command could not reach Swift or a controller if it tried.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
NETWORK = b'''import socket

from iostack.storlet_runtime.sdk import Filter


class Phone(Filter):
    def encode(self, chunks, params):
        socket.create_connection(("127.0.0.1", 22), timeout=1)
        yield from chunks
'''


@pytest.fixture
def filter_cli(tmp_path):
    """``filter_cli("test", FILE, ...)``: the CLI with no stack anywhere it could find."""
    empty = tmp_path / "no-stack"
    empty.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # noqa: S603 - fixed argv
            [sys.executable, "-m", "iostack.cli", "filter", *args], capture_output=True,
            text=True, timeout=240, env={**os.environ, "IOSTACK_STATE_DIR": str(empty)},
            check=False)

    return run


def _sandboxes_left() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("iostack-filter-test-*")}


def test_the_template_passes_in_a_local_sandbox_with_no_stack(filter_cli, tmp_path):
    before = _sandboxes_left()
    assert filter_cli("new", "my_xor", "--dir", str(tmp_path)).returncode == 0
    done = filter_cli("test", str(tmp_path / "my_xor.py"))
    assert done.returncode == 0, done.stderr
    assert "10 MiB bodies pass in a local sandbox" in done.stdout
    assert _sandboxes_left() == before  # its folder (and sandbox) are gone


@pytest.mark.parametrize(("cls", "message"), [
    ("RaisingStorlet", "encode failed"),
    ("TruncatingStorlet", "decode of one line, bytes 0-39: 19 bytes that are not the 39"),
    ("OverlongStorlet", "decode of an empty body, bytes 0-0: 100 bytes"),
])
def test_a_broken_filter_fails_its_local_test_saying_how(filter_cli, cls, message):
    done = filter_cli("test", str(HERE / "broken_storlet.py"), "--main",
                      f"broken_storlet.{cls}")
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_local_sandbox_has_no_network(filter_cli, tmp_path):
    (tmp_path / "phone.py").write_bytes(NETWORK)
    done = filter_cli("test", str(tmp_path / "phone.py"))
    assert done.returncode == 2 and "encode failed" in done.stderr, done.stderr
    (tmp_path / "quiet.py").write_bytes(NETWORK.replace(
        b"socket.create_connection((\"127.0.0.1\", 22), timeout=1)", b"socket.gethostname()"))
    assert filter_cli("test", str(tmp_path / "quiet.py")).returncode == 0
