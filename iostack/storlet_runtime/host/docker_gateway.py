"""Storlets' ``docker`` gateway, made to hold the bubblewrap sandbox's guarantees.

Select it (entry point ``iostack_docker``) where a container engine with a
Docker-compatible API runs (Docker, or Podman's ``podman system service``)::

    [filter:storlet_handler]
    storlet_gateway_module = iostack_docker
    storlet_gateway_conf = /path/to/storlet-gateway.conf

with, in the gateway config, besides the sandbox's own keys (``config``):

``docker_url``
    The engine's API (``unix:///run/podman/podman.sock``; default: the
    environment's, as ``docker.from_env()``).
``default_container_image_name``
    The storlet image (``engine_image``: Debian's Python and its libraries,
    built locally; no registry). Storlets, IOStack and the filters'
    packages are bound read-only from the host, as in bubblewrap.

Storlets' ``DockerRunTimeSandbox._restart`` starts the container with the
server's own uid (root, for Swift), binds a ``0777`` host directory for the
channels and the host's ``/dev/log``, keeps a writable root, and first looks
for an image per scope. This subclass keeps its engine calls
(``containers.run`` with ``network_disabled``, ``mem_limit``,
``pids_limit``, the CPU quota, ``auto_remove``, the ``managed_by=storlets``
label) and changes what the guarantees need:

- the scope's own uid (``identity``) and group, all capabilities dropped,
  ``no-new-privileges``, the engine's seccomp profile (the all-in-one's
  refuses what bubblewrap's refuses: ``engine_seccomp``);
- no network (``network_mode=none``);
- a read-only root: the image, a private size-limited ``/tmp``, the scope's
  storlet directory read-only at ``/var/lib/storlets``, ``libsbus.so`` and
  the Python path read-only under ``/usr/local/lib/storlets``;
- the channels on a ``0700`` tmpfs owned by the scope's uid inside the
  container (``/dev`` too is a tmpfs of that uid, for the agent's
  ``/dev/log`` link to the log socket there, never the host's syslog),
  reached from the host through the container's init,
  ``/proc/<pid>/root/mnt/channels``, and checked socket by socket before a
  message is sent (``channels``), exactly as for bubblewrap;
- limits: memory (``sandbox_cgroup_memory``, no swap), processes
  (``container_pids_limit``: cgroup and ``RLIMIT_NPROC``), CPU
  (``sandbox_cpus``), and per process CPU seconds, file size and no core
  dumps (the engine's ulimits), address space (the agent, ``agent``);
- one image, no per-scope lookup; a container name per stack and start.

Everything else (locking concurrent starts, the pid record, tear-down by
pid, the known-daemon shortcut, timeouts, pinned code, the size check of
execute messages) is ``gateway``'s, through ``container.ContainerScope``,
which tracks the container's init process as ``ScopeSandbox`` tracks bwrap's.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Any

from storlets.gateway.common.exceptions import StorletRuntimeException
from storlets.gateway.gateways.docker.gateway import DockerStorletGateway
from storlets.gateway.gateways.docker.runtime import DockerRunTimeSandbox

from iostack.storlet_runtime.host.container import (
    ContainerScope,
    container_limits,
    container_mounts,
)
from iostack.storlet_runtime.host.gateway import BwrapRunTimeSandbox, BwrapStorletGateway
from iostack.storlet_runtime.host.sandbox import (
    AGENT_MODULE,
    FACTORY_MODULE,
    FACTORY_PIPE,
    LOG_SOCKET,
    SANDBOX_CHANNEL_DIR,
    SANDBOX_TMP,
)

LABEL = "managed_by"
STACK_LABEL = "iostack_run_dir"
# Docker SDK clients by engine URL. (The SDK is imported where it is used: after Storlets'
# runtime has monkey-patched the process with eventlet, so its HTTP stack is green.)
_clients: dict[str, Any] = {}


def engine_client(url: str | None) -> Any:
    """One Docker SDK client per engine URL and process (``None``: the environment's)."""
    import docker

    key = url or ""
    if key not in _clients:
        _clients[key] = (docker.DockerClient(base_url=url, timeout=30) if url
                         else docker.from_env(timeout=30))
    return _clients[key]


class EngineRunTimeSandbox(BwrapRunTimeSandbox, DockerRunTimeSandbox):
    """A scope's sandbox: the Storlets agent in a container of the engine."""

    scope_class = ContainerScope

    def __init__(self, scope: str, conf: dict[str, Any], logger: Any) -> None:
        super().__init__(scope, conf, logger)
        self.engine_url = conf.get("docker_url")
        self.image = self.default_container_image_name

    def _restart(self, container_image_name: str) -> None:
        # Upstream tries an image per scope first; there is one image, built at set-up.
        del container_image_name
        import docker.errors

        self.process.stop(self.sandbox_stop_timeout)
        if os.geteuid() != 0:
            raise StorletRuntimeException(
                "the container runtime runs each scope as its own uid: the server must be root")
        storlet_dir = self.paths.host_storlet_base_dir
        os.makedirs(storlet_dir, 0o755, exist_ok=True)
        cfg = self.config
        uid = self.uid
        stack = hashlib.sha256(os.path.realpath(self.run_dir).encode()).hexdigest()[:8]
        name = f"storlets-{stack}-{self.scope}-{uuid.uuid4().hex[:6]}"
        mounts, python_path = container_mounts(cfg, storlet_dir)
        run = {
            "image": self.image, "name": name, "detach": True, "auto_remove": True,
            "entrypoint": [cfg.python],
            "command": ["-m", AGENT_MODULE, "--address-space", str(cfg.mem_limit), "--container",
                        LOG_SOCKET, "--", cfg.python, "-m", FACTORY_MODULE, FACTORY_PIPE,
                        self.storlet_daemon_factory_debug_level, name],
            "environment": {"PYTHONPATH": python_path, "PATH": "/usr/bin:/bin",
                            "HOME": SANDBOX_TMP, "PYTHONDONTWRITEBYTECODE": "1"},
            "working_dir": SANDBOX_TMP, "user": f"{uid}:{uid}",
            "hostname": f"storlets-{self.scope}",
            "network_disabled": True, "network_mode": "none",
            "read_only": True, "cap_drop": ["ALL"], "security_opt": ["no-new-privileges"],
            "tmpfs": {SANDBOX_TMP: f"size={cfg.tmp_size},mode=1777",
                      SANDBOX_CHANNEL_DIR: f"size={cfg.channel_size},mode=0700,U",
                      # The sandbox's uid links /dev/log to its log socket (agent).
                      "/dev": "size=1m,mode=0755,U"},
            "mounts": mounts, "stop_signal": "SIGKILL",
            "labels": {LABEL: "storlets", STACK_LABEL: os.path.realpath(self.run_dir)},
            **container_limits(cfg),
        }
        try:
            pid = self.process.start_container(engine_client(self.engine_url), run, uid)
        except docker.errors.ImageNotFound:
            raise StorletRuntimeException(f"storlet image {self.image} is not in the engine "
                                          "(iostack aio start builds it)") from None
        except (docker.errors.APIError, docker.errors.DockerException) as exc:
            self.logger.error(f"scope {self.scope}: the engine refused its container: {exc}")
            raise StorletRuntimeException("container engine error") from None
        self.logger.info(f"started storlet container {name} for scope {self.scope} "
                         f"(pid {pid}, uid {uid}; {self.process.record().get('limits')})")


class EngineStorletGateway(BwrapStorletGateway, DockerStorletGateway):
    sandbox = EngineRunTimeSandbox
