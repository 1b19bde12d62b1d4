"""``iostack_memcache``: Swift's memcache middleware over a Unix socket (a real
memcached, started here on a socket in the test's directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from iostack.service_probes import memcached_answers
from iostack.swift_middleware.memcache import filter_factory


@pytest.fixture
def memcached():
    """The socket of a memcached in a directory every uid may enter (0755), so
    that only the socket's own mode keeps others out."""
    binary = shutil.which("memcached")
    if binary is None:
        pytest.skip("memcached is not installed on this machine")
    directory = Path(tempfile.mkdtemp(prefix="iostack-memcached-"))
    directory.chmod(0o755)
    path = directory / "memcached.sock"
    argv = [binary, "-s", str(path), "-a", "0600", "-m", "8"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while not memcached_answers(f"unix:{path}"):
        assert time.monotonic() < deadline and proc.poll() is None, "memcached did not start"
        time.sleep(0.05)
    yield path
    proc.terminate()
    proc.wait(10)
    shutil.rmtree(directory)


def test_swift_cache_works_over_a_unix_socket(memcached):
    seen = {}

    def app(env, start_response):
        seen["cache"] = env["swift.cache"]
        return []

    middleware = filter_factory({}, memcache_servers=f"unix:{memcached}")(app)
    middleware({"REQUEST_METHOD": "GET", "PATH_INFO": "/"}, None)
    cache = seen["cache"]
    cache.set("AUTH_tk0123", {"groups": "t1,AUTH_t1"}, time=60)
    assert cache.get("AUTH_tk0123") == {"groups": "t1,AUTH_t1"}
    assert cache.memcache_servers == [f"unix:{memcached}"]
    assert oct(memcached.stat().st_mode & 0o777) == oct(0o600)


def test_nobody_else_can_open_the_socket(memcached):
    """Regression: memcached listened on loopback TCP, so any local user dumped the
    live tempauth tokens and cached ACLs (lru_crawler metadump + get)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to act as another uid")
    probe = ("import socket, sys; s = socket.socket(socket.AF_UNIX); "
             "s.connect(sys.argv[1]); s.sendall(b'version\\r\\n'); print(s.recv(64))")
    result = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534",
                             "--clear-groups", "/usr/bin/python3", "-c", probe, str(memcached)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0 and "Permission denied" in result.stderr, result
