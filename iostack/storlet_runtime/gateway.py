"""Storlets gateway whose per-scope sandbox is bubblewrap instead of a container engine.

Select it in the ``storlet_handler`` filter sections of the proxy and object
servers::

    [filter:storlet_handler]
    use = egg:storlets#storlet_handler
    storlet_gateway_module = bwrap
    storlet_gateway_conf = /path/to/storlet-gateway.conf

``bwrap`` is this class's entry point in the ``storlets.gateways`` namespace
(``docker`` and ``podman``, Storlets' own, stay selectable where an engine
exists). Everything but starting the sandbox is upstream code: SBus, the
daemon factory, the Python storlet daemon, caching storlet code per scope,
the invocation protocol and its timeout.

What this gateway adds on top of ``StorletGatewayContainer``:

- ``BwrapRunTimeSandbox._restart`` starts the agent under bubblewrap
  (``iostack.storlet_runtime.sandbox``), and ``restart`` takes the scope's
  lock and re-checks liveness first, so concurrent cold starts (greenthreads
  or worker processes) share one sandbox;
- an execute message that would not fit SBus' 4096-byte datagram (it carries
  the parameters and the object's user metadata; the storlet daemon dies on a
  larger one) is refused with ``400`` before the sandbox is touched;
- a request that times out gets a 503 that says so, and tears the scope's
  sandbox down by pid, so nothing a runaway storlet left behind (children, a
  fork bomb) survives; the next request starts a fresh sandbox. (At the
  object node the proxy turns any 5xx into its own 503 and, with several
  replicas, first tries the other object servers);
- the storlet files copied into the scope's directory are handed to the
  sandbox user (upstream writes them ``0600`` as the server's user), and a
  re-uploaded storlet of unchanged size replaces the old one (upstream only
  notices a size change);
- no SBus round trip to the daemon factory per request: upstream asks it
  whether the storlet daemon runs before every execute. Each server process
  remembers the daemon it last saw started or confirmed (its host pid and
  start time, ``ScopeSandbox.find_daemon``) and, while the storlet's files
  are unchanged, checks that very process in ``/proc`` instead (what the
  factory itself checks, with ``waitpid``). A daemon that died, a
  re-uploaded storlet or a torn-down sandbox take upstream's path again.
  The factory is still asked every ``DAEMON_RECHECK`` seconds: it exits,
  with every daemon, after 300 s without a command;
- bodies cross the pipes in 1 MiB pieces, not 64 KiB ones (``pipes``): the
  storlet's output is read in pieces of up to that size, and a streamed
  input (at the proxy) is written to the storlet joined into pieces of it.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any

from storlets.gateway.common.exceptions import StorletTimeout
from storlets.gateway.common.stob import FileDescriptorIterator, StorletData, StorletResponse
from storlets.gateway.gateways.container.gateway import StorletGatewayContainer
from storlets.gateway.gateways.container.runtime import RunTimeSandbox
from storlets.sbus import SBus
from swift.common.swob import HTTPBadRequest, HTTPServiceUnavailable

from iostack.storlet_runtime.config import sandbox_config
from iostack.storlet_runtime.pipes import PIPE_PIECE, joined
from iostack.storlet_runtime.sandbox import (
    ScopeSandbox,
    bwrap_command,
    check_reachable,
    process_start_time,
)
from iostack.storlet_runtime.sbus_limits import SBUS_MAX_MESSAGE, execute_message_size

# Well within the daemon factory's 300 s idle exit (upstream's LISTEN_TIMEOUT).
DAEMON_RECHECK = 60.0


def run_dir(gateway_conf: dict[str, Any]) -> str:
    """Where pid records and locks live (host side only, never mounted in a sandbox)."""
    host_root = gateway_conf.get("host_root", "/var/lib/storlets")
    return gateway_conf.get("sandbox_run_dir", os.path.join(host_root, "sandboxes"))


class BwrapRunTimeSandbox(RunTimeSandbox):
    """A scope's sandbox: the Storlets agent under bubblewrap."""

    # Per server process: a storlet daemon's socket (host path) -> the daemon's host pid,
    # its start time, and when the daemon factory last confirmed it (time.monotonic()).
    known_daemons: dict[str, tuple[int, int, float]] = {}

    def __init__(self, scope: str, conf: dict[str, Any], logger: Any) -> None:
        super().__init__(scope, conf, logger)
        self.config = sandbox_config(conf)
        # The host side of SBus loads the library through this class attribute.
        SBus.SBUS_SO_NAME = self.config.libsbus_path
        self.process = ScopeSandbox(run_dir(conf), scope)
        self.stderr_path = os.path.join(self.paths.host_log_root_dir, scope, "sandbox.log")

    def restart(self) -> None:
        """Bring the scope's sandbox up once, however many requests find it down at once."""
        with self.process.lock(self.sandbox_wait_timeout + self.sandbox_stop_timeout + 5):
            # Another request may have started it while this one waited for the lock.
            # (Upstream also restarts after failing to stop a storlet daemon; skipping
            # then is harmless: starting the daemon again answers "already running".)
            if self.process.running_pid() is not None and self.ping():
                return
            super().restart()

    def _restart(self, container_image_name: str) -> None:
        # Storlets names the image after the scope; there are no images here, only the scope.
        del container_image_name
        self.process.stop(self.sandbox_stop_timeout)
        self.paths.create_host_pipe_dir()
        storlet_dir = self.paths.host_storlet_base_dir
        os.makedirs(storlet_dir, 0o755, exist_ok=True)
        for directory in (self.paths.host_pipe_dir, storlet_dir):
            check_reachable(directory, self.config.uid, self.config.gid)
        argv = bwrap_command(
            self.config, self.scope, self.paths.host_pipe_dir, storlet_dir,
            self._get_container_name(self.scope), self.storlet_daemon_factory_debug_level,
        )
        pid = self.process.start(argv, self.config, self.stderr_path)
        self.logger.info(f"started storlet sandbox for scope {self.scope} (pid {pid})")

    def activate_storlet_daemon(self, sreq: Any, cache_updated: bool = True) -> None:
        """Make sure the storlet's daemon runs; upstream's SBus status check only when needed."""
        key = self.paths.get_host_storlet_pipe(sreq.storlet_main)
        known = self.known_daemons.pop(key, None)
        if (known is not None and not cache_updated
                and time.monotonic() - known[2] < DAEMON_RECHECK
                and process_start_time(known[0]) == known[1]):
            self.known_daemons[key] = known
            return
        super().activate_storlet_daemon(sreq, cache_updated)
        daemon = self.process.find_daemon(sreq.storlet_main)
        if daemon is not None:
            self.known_daemons[key] = (*daemon, time.monotonic())

    def stop(self) -> bool:
        """Tear the scope's sandbox down by pid."""
        with self.process.lock(self.sandbox_wait_timeout + self.sandbox_stop_timeout + 5):
            return self.process.stop(self.sandbox_stop_timeout)


class WideFileDescriptorIterator(FileDescriptorIterator):
    """Upstream's iterator over the storlet's output (same timeout and cancel), wider reads."""

    def __next__(self) -> bytes:
        return self.next(PIPE_PIECE)


class WideStorletData(StorletData):
    @property
    def data_iter(self) -> WideFileDescriptorIterator:
        if self._data_iter is None:
            self._data_iter = WideFileDescriptorIterator(self.data_fd, self.timeout, self.cancel)
        return self._data_iter


class BwrapStorletGateway(StorletGatewayContainer):
    sandbox = BwrapRunTimeSandbox

    def __init__(self, conf: dict[str, Any], logger: Any, scope: str) -> None:
        super().__init__(conf, logger, scope)
        self.sandbox_config = sandbox_config(conf)

    def invocation_flow(self, sreq: Any) -> Any:
        size = execute_message_size(sreq, self.paths.get_sbox_storlet_dir(sreq.storlet_main))
        if size > SBUS_MAX_MESSAGE:
            raise HTTPBadRequest(
                body=(f"Storlet parameters and object metadata too large: the request "
                      f"needs {size} bytes, at most {SBUS_MAX_MESSAGE} fit.\n").encode())
        if not sreq.data.has_fd:
            sreq.data = StorletData(sreq.data.user_metadata,
                                    data_iter=joined(sreq.data.data_iter))
        try:
            output = super().invocation_flow(sreq).data
        except StorletTimeout:
            self.logger.warning(f"storlet {sreq.storlet_main} timed out in scope {self.scope}; "
                                "tearing its sandbox down")
            self.sandbox(self.scope, self.conf, self.logger).stop()
            # Upstream would answer a bare 503; say what happened instead.
            raise HTTPServiceUnavailable(body=(
                f"Storlet {sreq.storlet_id} did not answer within {self.storlet_timeout:g} s "
                "and was stopped.\n").encode()) from None
        return StorletResponse(WideStorletData(output.user_metadata, data_fd=output.data_fd,
                                               timeout=output.timeout, cancel=output.cancel))

    def update_container_from_cache(self, sreq: Any) -> bool:
        updated = super().update_container_from_cache(sreq)
        updated = self._refresh_newer_uploads(sreq) or updated
        uid, gid = self.sandbox_config.uid, self.sandbox_config.gid
        if updated and uid is not None:
            storlet_dir = self.paths.get_host_storlet_dir(sreq.storlet_main)
            os.chown(storlet_dir, uid, gid)
            os.chmod(storlet_dir, 0o500)
            for name in os.listdir(storlet_dir):
                path = os.path.join(storlet_dir, name)
                os.chown(path, uid, gid)
                os.chmod(path, 0o400)
        return updated

    def _refresh_newer_uploads(self, sreq: Any) -> bool:
        """Copy cached files that are newer than the sandbox's copies.

        Upstream refreshes the sandbox's copy only when the cached file is
        *older* or of another size, so re-uploading a storlet of the same size
        would keep the old code running.
        """
        storlet_dir = self.paths.get_host_storlet_dir(sreq.storlet_main)
        refreshed = False
        for name, cache_dir in ([(sreq.storlet_id, self.paths.host_storlet_cache_dir)]
                                + [(dep, self.paths.host_dependency_cache_dir)
                                   for dep in sreq.dependencies]):
            cached, placed = os.path.join(cache_dir, name), os.path.join(storlet_dir, name)
            if os.path.isfile(cached) and os.path.isfile(placed) \
                    and os.stat(cached).st_mtime > os.stat(placed).st_mtime:
                shutil.copy2(cached, placed)
                refreshed = True
        return refreshed

