"""The tgt userspace iSCSI target, driven through ``tgtadm``.

``Tgtd`` runs a private ``tgtd`` in the foreground: its portal on
``host:port`` and its management socket on a private control port
(``/var/run/tgtd/socket.<n>``), so it never touches a system tgtd. Stopping
it removes every target (forced) and then the daemon, as tgtd refuses to
exit on SIGTERM while it serves targets.

Every target requires CHAP with the ``IscsiAccess`` account and accepts the
listed initiator names only. No address is bound: tgt admits an initiator
that matches *any* ACL entry, so binding ``ALL`` addresses (as before)
would open the target to every initiator name. ``tgtadm`` takes the CHAP
password as an argument: it is visible in ``/proc`` for the milliseconds
that one ``tgtadm`` call runs at start, and admits only listed initiators.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from iostack.ports import port_open

from .access import IscsiAccess
from .processes import Daemon, DaemonError, wait_for

SOCKET_DIR = Path("/var/run/tgtd")


class Tgtd:
    def __init__(self, log_path: Path, access: IscsiAccess, host: str = "127.0.0.1",
                 port: int = 3260, control_port: int | None = None) -> None:
        self.access = access
        self.host = host
        self.port = port
        self.control_port = control_port or self._unused_control_port()
        self.daemon = Daemon(
            ["tgtd", "-f", "-C", str(self.control_port), "--iscsi", f"portal={host}:{port}"],
            log_path, f"tgtd on {host}:{port}")

    @staticmethod
    def _unused_control_port() -> int:
        while True:
            candidate = random.randint(10000, 32767)  # noqa: S311 - a port; tgtd caps -C at 32767
            if not (SOCKET_DIR / f"socket.{candidate}").exists():
                return candidate

    def start(self, timeout: float = 10.0) -> None:
        if port_open(self.host, self.port):
            raise DaemonError(f"iSCSI portal {self.host}:{self.port} is already in use")
        self.daemon.start()
        try:
            wait_for(lambda: port_open(self.host, self.port) and self._answers(), timeout,
                     self.daemon.name, self.daemon.alive)
            self._tgtadm("--mode", "account", "--op", "new", "--user", self.access.chap_user,
                         "--password", self.access.chap_password, redact=True)
        except DaemonError as exc:
            self.daemon.stop()
            raise self.daemon.fail(str(exc)) from None

    def _answers(self) -> bool:
        return self._tgtadm("--mode", "target", "--op", "show", check=False).returncode == 0

    def _tgtadm(self, *args: str, check: bool = True,
                redact: bool = False) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["tgtadm", "-C", str(self.control_port), "--lld", "iscsi", *args],  # noqa: S607 - tgtadm from PATH
            capture_output=True, text=True, timeout=30)
        if check and result.returncode != 0:
            shown = " ".join(args[:4]) + " ..." if redact else " ".join(args)
            raise DaemonError(f"tgtadm {shown}: {result.stderr.strip()}")
        return result

    def export(self, tid: int, iqn: str, path: Path, lun: int = 1) -> None:
        """Export ``path`` as LUN ``lun`` of a new target: CHAP and the initiator ACL."""
        self._tgtadm("--mode", "target", "--op", "new", "--tid", str(tid), "--targetname", iqn)
        try:
            self._tgtadm("--mode", "logicalunit", "--op", "new", "--tid", str(tid),
                         "--lun", str(lun), "--backing-store", str(path))
            self._tgtadm("--mode", "account", "--op", "bind", "--tid", str(tid),
                         "--user", self.access.chap_user)
            for name in self.access.initiators:
                self._tgtadm("--mode", "target", "--op", "bind", "--tid", str(tid),
                             "--initiator-name", name)
        except DaemonError:
            self.remove(tid)
            raise

    def remove(self, tid: int) -> None:
        self._tgtadm("--mode", "target", "--op", "delete", "--force", "--tid", str(tid))

    def target_ids(self) -> list[int]:
        out = self._tgtadm("--mode", "target", "--op", "show").stdout
        return [int(line.split()[1].rstrip(":")) for line in out.splitlines()
                if line.startswith("Target ")]

    def url(self, iqn: str, lun: int = 1) -> str:
        return f"iscsi://{self.host}:{self.port}/{iqn}/{lun}"

    def stop(self) -> None:
        if self.daemon.alive():
            try:
                for tid in self.target_ids():
                    self.remove(tid)
                self._tgtadm("--mode", "system", "--op", "delete", check=False)
                self.daemon.proc.wait(5)
            except (DaemonError, subprocess.TimeoutExpired):
                pass  # SIGTERM/SIGKILL below
        self.daemon.stop()
        for leftover in (f"socket.{self.control_port}", f"socket.{self.control_port}.lock"):
            (SOCKET_DIR / leftover).unlink(missing_ok=True)
