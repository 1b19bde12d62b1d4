"""Data-path log lines reach Swift's log handler whatever the middleware's
log route is named, exactly once (each case in a fresh interpreter: Swift's
loggers and handlers are process-global)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

SCRIPT = """
import logging, sys
from iostack.swift_middleware.enforce import object as enforce_object, proxy as enforce_proxy
conf = {"log_address": sys.argv[1]}
for name in sys.argv[2:]:
    {"object": enforce_object, "proxy": enforce_proxy}[name].filter_factory(conf)(
        lambda env, start: [])
logging.getLogger("iostack.policy.changes").warning("channel lost: %s", "probe")
logging.getLogger("iostack.policy.reader").debug("below the level: %s", "quiet")
"""


@pytest.mark.parametrize("middlewares", [["object"], ["object", "proxy"], ["proxy", "object"]])
def test_a_data_path_warning_reaches_swifts_log_once(tmp_path, middlewares):
    """Regression: iostack.* stdlib loggers reached Swift's handler only through a
    route named 'iostack' (the proxy's enforcing middleware); in an object
    server (route 'iostack_object') a "channel lost" warning went nowhere."""
    address = str(tmp_path / "log.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as syslog:
        syslog.bind(address)
        syslog.settimeout(0.5)
        subprocess.run([sys.executable, "-c", SCRIPT, address, *middlewares], check=True,
                       timeout=120)
        lines = []
        try:
            while True:
                lines.append(syslog.recv(65536).decode())
        except TimeoutError:
            pass
    assert len([line for line in lines if "channel lost: probe" in line]) == 1, lines
    assert not [line for line in lines if "quiet" in line]
