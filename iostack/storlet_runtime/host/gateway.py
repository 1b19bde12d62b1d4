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
  (``iostack.storlet_runtime.host.sandbox``), and ``restart`` takes the scope's
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
  input (at the proxy) is written to the storlet joined into pieces of it;
- the host side sends SBus messages with libsbus's debug lines masked out of
  the process's syslog(3) (``setlogmask``): libsbus logs two per message,
  and where ``/dev/log`` is missing and the process opened the log with
  ``LOG_CONS`` (liberasurecode does, in every Swift server) each one was
  written to the console, ~2.5 ms of CPU per request;
- the scope is a hash of the whole account (``identity.sandbox_scope``,
  from the account Storlets passes as ``options['scope']``), not upstream's
  first 13 characters; each scope runs as its own uid and in its own cgroup,
  and its channels live inside the sandbox (``channels``): every message is
  sent only to a socket of the scope's uid;
- when the request names the code it expects (``storlet_code_sha256``: the
  IOStack data path sends the SHA-256 the controller recorded; at the object
  servers it arrives as ``X-Storlet-Code-Sha256``), the storlet file about
  to run is hashed first and a mismatch is refused with ``503`` naming the
  storlet: a tenant who overwrote an imposed filter in its own ``storlet``
  container gets an error, never a pass-through. Such a pinned storlet runs
  alone: a registration of it that lists dependencies is refused, and any
  other file in its folder (the daemon's import path, shared by every
  registration of the same main class) is removed and its daemon restarted
  before it runs (``_only_pinned_files``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import syslog
import time
from typing import Any

from storlets.gateway.common.exceptions import StorletTimeout
from storlets.gateway.common.stob import FileDescriptorIterator, StorletData, StorletResponse
from storlets.gateway.gateways.container.gateway import StorletGatewayContainer
from storlets.gateway.gateways.container.runtime import RunTimePaths, RunTimeSandbox
from storlets.sbus import SBus
from swift.common.swob import HTTPBadRequest, HTTPServiceUnavailable

from iostack.storlet_runtime.host import channels
from iostack.storlet_runtime.host.cgroups import scope_cgroup
from iostack.storlet_runtime.host.channels import ChannelError
from iostack.storlet_runtime.host.config import SandboxConfig, sandbox_config
from iostack.storlet_runtime.host.identity import sandbox_scope, scope_uid
from iostack.storlet_runtime.host.packaging import code_mismatch, keep_only
from iostack.storlet_runtime.host.sandbox import (
    ScopeSandbox,
    check_reachable,
    process_start_time,
)
from iostack.storlet_runtime.host.sbus_limits import SBUS_MAX_MESSAGE, execute_message_size
from iostack.storlet_runtime.pipes import PIPE_PIECE, joined

# Well within the daemon factory's 300 s idle exit (upstream's LISTEN_TIMEOUT).
DAEMON_RECHECK = 60.0


def run_dir(gateway_conf: dict[str, Any]) -> str:
    """Where pid records and locks live (host side only, never mounted in a sandbox)."""
    host_root = gateway_conf.get("host_root", "/var/lib/storlets")
    return gateway_conf.get("sandbox_run_dir", os.path.join(host_root, "sandboxes"))


def sandbox_uid(conf: dict[str, Any], cfg: SandboxConfig, scope: str) -> int | None:
    """The host uid ``scope``'s sandbox runs as; None: as this server (it is not root)."""
    if cfg.uid_base is None:
        return None
    return scope_uid(cfg.uid_table, run_dir(conf), scope, cfg.uid_base, cfg.uid_count)


class SandboxPaths(RunTimePaths):
    """Upstream's paths, with the host side of the channels inside the running sandbox."""

    def __init__(self, scope: str, conf: dict[str, Any], sandbox: ScopeSandbox,
                 uid: int) -> None:
        super().__init__(scope, conf)
        self.sandbox = sandbox
        self.uid = uid

    @property
    def host_pipe_dir(self) -> str:
        found = self.sandbox.channel_dir()
        if found is None:
            # No sandbox: a path that cannot exist, so upstream's ping fails and it restarts.
            return os.path.join(self.sandbox.run_dir, f"{self.scope}.not-running")
        channels.expect(found, self.uid)
        return found

    def create_host_pipe_dir(self) -> str:
        """Nothing to make on the host (upstream's restart calls it): bwrap makes the tmpfs."""
        return self.host_pipe_dir


class BwrapRunTimeSandbox(RunTimeSandbox):
    """A scope's sandbox: the Storlets agent under bubblewrap."""

    # Per server process: a storlet daemon (run dir/scope/storlet) -> the daemon's host pid,
    # its start time, and when the daemon factory last confirmed it (time.monotonic()).
    known_daemons: dict[str, tuple[int, int, float]] = {}
    # How a scope's sandbox is started, found and torn down (docker_gateway: a container).
    scope_class: type[ScopeSandbox] = ScopeSandbox

    def __init__(self, scope: str, conf: dict[str, Any], logger: Any) -> None:
        super().__init__(scope, conf, logger)
        self.config = sandbox_config(conf)
        # The host side of SBus loads the library through this class attribute,
        # and sends through the channel check.
        SBus.SBUS_SO_NAME = self.config.libsbus_path
        channels.install()
        # libsbus logs two debug lines through syslog(3) for every message it sends. Where
        # /dev/log is missing and the process opened the log with LOG_CONS (liberasurecode,
        # loaded by Swift, does) each went to the console: ~2.5 ms of CPU per request.
        syslog.setlogmask(syslog.LOG_UPTO(syslog.LOG_INFO))
        self.run_dir = run_dir(conf)
        self.process = self.scope_class(self.run_dir, scope)
        self.uid = sandbox_uid(conf, self.config, scope)
        self.paths = SandboxPaths(scope, conf, self.process,
                                  os.geteuid() if self.uid is None else self.uid)
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
        storlet_dir = self.paths.host_storlet_base_dir
        os.makedirs(storlet_dir, 0o755, exist_ok=True)
        check_reachable(storlet_dir, self.uid)
        cfg = self.config
        # Under a name per stack: two stacks on one host may serve the same account.
        stack = hashlib.sha256(os.path.realpath(self.run_dir).encode()).hexdigest()[:8]
        cgroup = scope_cgroup(f"{cfg.cgroup_root}/{stack}", self.scope, cfg.pids_limit,
                              cfg.cgroup_memory, cfg.cpus)
        pid = self.process.start(cfg, self.uid, cgroup, self.stderr_path, storlet_dir,
                                 self._get_container_name(self.scope),
                                 self.storlet_daemon_factory_debug_level)
        self.logger.info(f"started storlet sandbox for scope {self.scope} (pid {pid}, "
                         f"uid {self.uid}; {cgroup.describe()})")

    def activate_storlet_daemon(self, sreq: Any, cache_updated: bool = True) -> None:
        """Make sure the storlet's daemon runs; upstream's SBus status check only when needed."""
        key = f"{self.run_dir}/{self.scope}/{sreq.storlet_main}"
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

    def _scope_to(self, scope: str) -> None:
        self.scope = scope
        self.uid = sandbox_uid(self.conf, self.sandbox_config, scope)
        self.paths = SandboxPaths(scope, self.conf,
                                  self.sandbox.scope_class(run_dir(self.conf), scope),
                                  os.geteuid() if self.uid is None else self.uid)

    def invocation_flow(self, sreq: Any) -> Any:
        # Storlets built this gateway with the account cut to 13 characters; the
        # whole account comes with the request (callers that name a scope
        # themselves, such as the sandbox CLI and tests, send none).
        account = sreq.options.get("scope")
        self._scope_to(sandbox_scope(account) if account else self.scope)
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
        except ChannelError as exc:
            self.logger.error(f"scope {self.scope}: {exc}; tearing its sandbox down")
            self.sandbox(self.scope, self.conf, self.logger).stop()
            raise HTTPServiceUnavailable(body=(
                f"Storlet {sreq.storlet_id}: its sandbox's channel is not the sandbox's own "
                f"({exc}); the sandbox was stopped.\n").encode()) from None
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
        storlet_dir = self.paths.get_host_storlet_dir(sreq.storlet_main)
        if updated and self.uid is not None:
            os.chown(storlet_dir, self.uid, self.uid)
            os.chmod(storlet_dir, 0o500)
            for name in os.listdir(storlet_dir):
                path = os.path.join(storlet_dir, name)
                os.chown(path, self.uid, self.uid)
                os.chmod(path, 0o400)
        expected = sreq.options.get("storlet_code_sha256")
        if expected:
            updated = self._only_pinned_files(sreq, storlet_dir) or updated
            why = code_mismatch(os.path.join(storlet_dir, sreq.storlet_id), expected)
            if why is not None:
                self.logger.error(f"storlet {sreq.storlet_id} of scope {self.scope}: {why}, "
                                  f"expected {expected}; refusing to run it")
                raise HTTPServiceUnavailable(body=(
                    f"Filter code of storlet {sreq.storlet_id} is not the code the "
                    f"controller recorded (SHA-256 {expected}): {why}. Refusing to run "
                    "it.\n").encode())
        return updated

    def _only_pinned_files(self, sreq: Any, storlet_dir: str) -> bool:
        """Leave the pinned storlet's folder holding its one file; True if anything went.

        The folder is the storlet daemon's import path, before the standard
        library, and it is shared by every registration of the storlet: a
        tenant's registration with a dependency (``json.py``) would otherwise
        leave it there for the pinned code to import. A pinned filter has no
        dependencies (a registration listing one is refused); the daemon
        restarts when something was removed, so nothing it imported from
        there stays loaded.
        """
        if sreq.dependencies:
            raise HTTPServiceUnavailable(body=(
                f"Filter code of storlet {sreq.storlet_id} is pinned and has no dependencies, "
                f"but its registration lists {', '.join(sreq.dependencies)}. Refusing to "
                "run it.\n").encode())
        removed = keep_only(storlet_dir, sreq.storlet_id)
        if removed:
            self.logger.warning(f"storlet {sreq.storlet_id} of scope {self.scope}: removed "
                                f"{', '.join(removed)} (other registrations') from its folder")
        return bool(removed)

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

