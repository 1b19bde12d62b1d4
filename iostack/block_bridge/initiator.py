"""Konnector's iSCSI initiator methods, limited to the bridge's own targets.

The kernel initiator (open-iscsi's ``iscsiadm``) does discovery, login and
logout where it is installed. Discovery also works without it, through
libiscsi's userspace ``iscsi-ls`` (SendTargets). Methods that need the
kernel initiator fail with a clear message where it is absent (as on
hosts without the iscsi_tcp module). Every command is an argument list:
nothing is passed through a shell.

An RPC caller drives the host's initiator, so ``Initiator`` confines it to
what the bridge itself exports: ``discover_portal``, ``login_target`` and
``logout_target`` accept only the bridge's own portal (``portal_host``:
``portal_port``; ``hostname``/``port`` may be left out) and, for targets,
only the IQNs of the bridge's volumes; ``logout_all_targets`` logs out
those targets' sessions, never the host's others; ``display_session``
lists only the bridge's sessions. Anything else is an invalid-params error
that names what is allowed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Collection
from pathlib import Path

from iostack.ports import port_open

INITIATOR_FILE = Path("/etc/iscsi/initiatorname.iscsi")
HOST_RE = re.compile(r"^[A-Za-z0-9.:\[\]-]{1,255}$")
IQN_RE = re.compile(r"^(iqn|eui|naa)\.[A-Za-z0-9.:_-]{1,220}$")
SESSION_RE = re.compile(r"^\S+: \[\d+\] (\S+),\d+ (\S+)")  # tcp: [1] 127.0.0.1:3260,1 iqn...


class InitiatorError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "invalid" or "failed"


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60)  # noqa: S603 - argv built here
    if result.returncode != 0:
        raise InitiatorError("failed", f"{argv[0]} failed: {result.stderr.strip()}")
    return result.stdout


def _iscsiadm() -> str:
    path = shutil.which("iscsiadm")
    if not path:
        raise InitiatorError("failed", "iscsiadm (open-iscsi) is not installed on this host: "
                                       "the kernel initiator methods are unavailable")
    return path


def get_initiator_name(params: dict) -> str:
    if INITIATOR_FILE.exists():
        for line in INITIATOR_FILE.read_text().splitlines():
            if line.startswith("InitiatorName="):
                return line.split("=", 1)[1].strip()
    raise InitiatorError("failed", f"no initiator name: {INITIATOR_FILE} is missing "
                                   "(open-iscsi is not installed)")


def _sendtargets(host: str, port: int) -> list[tuple[str, str, int, int]]:
    """(iqn, ip, port, tpgt) per target, from iscsiadm or else libiscsi."""
    if shutil.which("iscsiadm"):
        out = _run([_iscsiadm(), "-m", "discovery", "-t", "st", "-p", f"{host}:{port}"])
        matches = (re.match(r"^(\S+):(\d+),(\d+)\s+(\S+)$", line.strip())
                   for line in out.splitlines())
        return [(m[4], m[1], int(m[2]), int(m[3])) for m in matches if m]
    try:
        out = _run(["iscsi-ls", "-s", f"iscsi://{host}:{port}"])
    except InitiatorError:
        # iscsi-ls exits non-zero when a portal answers with no targets at all.
        if port_open(host, port):
            return []
        raise InitiatorError("failed", f"portal {host}:{port} is unreachable") from None
    matches = (re.match(r"^Target:(\S+) Portal:(\S+):(\d+),(\d+)$", line.strip())
               for line in out.splitlines())
    return [(m[1], m[2], int(m[3]), int(m[4])) for m in matches if m]


class Initiator:
    """The initiator methods, bound to one bridge's portal and volumes."""

    def __init__(self, portal_host: str, portal_port: int,
                 own_targets: Callable[[], Collection[str]]) -> None:
        self.portal_host = portal_host
        self.portal_port = portal_port
        self.own_targets = own_targets  # the IQNs of the bridge's volumes, now

    def methods(self) -> dict[str, Callable[[dict], object]]:
        return {"get_initiator_name": get_initiator_name,
                "discover_portal": self.discover_portal,
                "login_target": self.login_target,
                "logout_target": self.logout_target,
                "logout_all_targets": self.logout_all_targets,
                "display_session": self.display_session}

    def _portal(self, params: dict) -> tuple[str, int]:
        host = params.get("hostname", self.portal_host)
        port = params.get("port", self.portal_port)
        if not isinstance(host, str) or not HOST_RE.match(host):
            raise InitiatorError("invalid", f"bad hostname {host!r}")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise InitiatorError("invalid", f"bad port {port!r}")
        if (host, port) != (self.portal_host, self.portal_port):
            raise InitiatorError("invalid", f"portal {host}:{port} is not this bridge's "
                                            f"({self.portal_host}:{self.portal_port})")
        return host, port

    def _target(self, params: dict) -> str:
        iqn = params.get("targetname")
        if not isinstance(iqn, str) or not IQN_RE.match(iqn):
            raise InitiatorError("invalid", f"bad targetname {iqn!r}")
        if iqn not in self.own_targets():
            raise InitiatorError("invalid", f"target {iqn} is not one of this bridge's "
                                            "volumes")
        return iqn

    def discover_portal(self, params: dict) -> dict:
        """SendTargets discovery -> {iqn: {ip: {interface, portal: [ip, port, tpgt]}}}."""
        host, port = self._portal(params)
        method = params.get("discovery_method", "sendtargets")
        if method != "sendtargets":
            raise InitiatorError("invalid", f"discovery_method {method!r}: only sendtargets")
        if params.get("auth_method") not in (None, "none"):
            raise InitiatorError("invalid", "CHAP discovery is not supported by this service")
        found: dict = {}
        for iqn, ip, tport, tpgt in _sendtargets(host, port):
            found.setdefault(iqn, {})[ip] = {"interface": "default",
                                             "portal": [ip, tport, tpgt]}
        return found

    def login_target(self, params: dict) -> None:
        host, port = self._portal(params)
        iqn = self._target(params)
        _run([_iscsiadm(), "-m", "node", "-T", iqn, "-p", f"{host}:{port}", "--login"])

    def logout_target(self, params: dict) -> None:
        host, port = self._portal(params)
        iqn = self._target(params)
        _run([_iscsiadm(), "-m", "node", "-T", iqn, "-p", f"{host}:{port}", "--logout"])

    def _sessions(self) -> list[tuple[str, str, str]]:
        """(line, portal, iqn) of the host's sessions to this bridge's targets."""
        own = set(self.own_targets())
        out = _run([_iscsiadm(), "-m", "session"])
        matches = ((line, SESSION_RE.match(line)) for line in out.splitlines())
        return [(line, m[1], m[2]) for line, m in matches if m and m[2] in own]

    def logout_all_targets(self, params: dict) -> None:
        for _, portal, iqn in self._sessions():
            _run([_iscsiadm(), "-m", "node", "-T", iqn, "-p", portal, "--logout"])

    def display_session(self, params: dict) -> list[str]:
        return [line for line, _, _ in self._sessions()]
