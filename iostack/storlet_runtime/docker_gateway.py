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
execute messages) is ``gateway``'s, through ``ContainerScope``, which tracks
the container's init process as ``ScopeSandbox`` tracks bwrap's.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import Mount, Ulimit
from storlets.gateway.common.exceptions import StorletRuntimeException
from storlets.gateway.gateways.docker.gateway import DockerStorletGateway
from storlets.gateway.gateways.docker.runtime import DockerRunTimeSandbox

from iostack.storlet_runtime.cgroups import CGROUP_FS
from iostack.storlet_runtime.config import SandboxConfig
from iostack.storlet_runtime.gateway import BwrapRunTimeSandbox, BwrapStorletGateway
from iostack.storlet_runtime.sandbox import (
    AGENT_MODULE,
    FACTORY_MODULE,
    FACTORY_PIPE,
    LOG_SOCKET,
    SANDBOX_CHANNEL_DIR,
    SANDBOX_LIB_DIR,
    SANDBOX_PACKAGE_DIR,
    SANDBOX_PYTHON_DIR,
    SANDBOX_STORLET_DIR,
    SANDBOX_TMP,
    ScopeSandbox,
    process_start_time,
)

LABEL = "managed_by"
STACK_LABEL = "iostack_run_dir"
_clients: dict[str, docker.DockerClient] = {}


def engine_client(url: str | None) -> docker.DockerClient:
    """One Docker SDK client per engine URL and process (``None``: the environment's)."""
    key = url or ""
    if key not in _clients:
        _clients[key] = (docker.DockerClient(base_url=url, timeout=30) if url
                         else docker.from_env(timeout=30))
    return _clients[key]


def container_mounts(cfg: SandboxConfig, host_storlet_dir: str) -> tuple[list[Mount], str]:
    """The read-only binds of a scope's container, and its ``PYTHONPATH``."""
    mounts = [Mount(SANDBOX_STORLET_DIR, host_storlet_dir, type="bind", read_only=True),
              Mount(f"{SANDBOX_LIB_DIR}/libsbus.so", cfg.libsbus_path, type="bind",
                    read_only=True)]
    python_dirs = [f"{SANDBOX_PYTHON_DIR}/{i}" for i in range(len(cfg.python_path))]
    mounts += [Mount(inside, host_dir, type="bind", read_only=True)
               for host_dir, inside in zip(cfg.python_path, python_dirs, strict=True)]
    mounts += [Mount(f"{SANDBOX_PACKAGE_DIR}/{os.path.basename(p)}", p, type="bind",
                     read_only=True) for p in cfg.python_packages]
    if cfg.python_packages:
        python_dirs.insert(0, SANDBOX_PACKAGE_DIR)
    return mounts, ":".join(python_dirs)


def container_limits(cfg: SandboxConfig) -> dict[str, Any]:
    """The engine's limits of a scope's container (``containers.run`` arguments)."""
    return {
        "mem_limit": cfg.cgroup_memory, "memswap_limit": cfg.cgroup_memory,
        "pids_limit": cfg.pids_limit,
        "cpu_period": 100_000, "cpu_quota": int(cfg.cpus * 100_000),
        "ulimits": [Ulimit(name="cpu", soft=cfg.cpu_seconds, hard=cfg.cpu_seconds),
                    Ulimit(name="nproc", soft=cfg.pids_limit, hard=cfg.pids_limit),
                    Ulimit(name="fsize", soft=cfg.file_size, hard=cfg.file_size),
                    Ulimit(name="core", soft=0, hard=0),
                    Ulimit(name="nofile", soft=1024, hard=1024)],
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def container_cgroups(pid: int) -> tuple[int, dict[str, Path]]:
    """The cgroup version and the directories of ``pid``'s groups: ``{"": dir}`` (v2), or
    per controller (``pids``, ``memory``, ``cpu``; v1). Empty once the process is gone."""
    groups: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/cgroup", encoding="ascii") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(","):
                    groups[name] = path.lstrip("/")
    except OSError:
        return 0, {}
    if "" in groups and (CGROUP_FS / "cgroup.controllers").exists():
        return 2, {"": CGROUP_FS / groups[""]}
    return 1, {name: CGROUP_FS / name / groups[name] for name in ("pids", "memory", "cpu")
               if name in groups}


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return "?"


def held_limits(pid: int) -> str:
    """The cgroup limits the kernel holds for ``pid`` (what the engine really applied)."""
    version, dirs = container_cgroups(pid)
    if version == 2:
        base = dirs[""]
        pids, memory, cpu = (_read(base / "pids.max"), _read(base / "memory.max"),
                             _read(base / "cpu.max"))
    elif version == 1:
        pids = _read(dirs.get("pids", Path("?")) / "pids.max")
        memory = _read(dirs.get("memory", Path("?")) / "memory.limit_in_bytes")
        cpu_dir = dirs.get("cpu", Path("?"))
        cpu = f"{_read(cpu_dir / 'cpu.cfs_quota_us')} {_read(cpu_dir / 'cpu.cfs_period_us')}"
    else:
        return "unknown (the container is gone)"
    memory = f"{int(memory) >> 20}M" if memory.isdigit() else memory
    return f"container, cgroup v{version}: pids {pids}, memory {memory}, cpu {cpu}"


class ContainerScope(ScopeSandbox):
    """A scope's container, tracked by its init process (the agent), as bwrap's sandbox is."""

    def channel_dir(self) -> str | None:
        pid = self.running_pid()
        return f"/proc/{pid}/root{SANDBOX_CHANNEL_DIR}" if pid is not None else None

    def start_container(self, client: docker.DockerClient, run: dict[str, Any],
                        uid: int | None) -> int:
        """Run the container (caller holds the lock, the previous one is stopped)."""
        container = client.containers.run(**run)
        container.reload()
        pid = int(container.attrs["State"]["Pid"])
        if not pid:
            raise StorletRuntimeException(f"scope {self.scope}: its container did not start")
        record = {"pid": pid, "start_time": process_start_time(pid), "scope": self.scope,
                  "uid": uid, "container": container.id, "name": run["name"],
                  "limits": held_limits(pid),
                  # The engine's groups: read (pids.current...), removed by the engine.
                  "cgroups": [str(d) for d in container_cgroups(pid)[1].values()],
                  "started_at": time.time()}
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.record_path)
        return pid


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
            "command": ["-m", AGENT_MODULE, "--address-space", str(cfg.mem_limit), LOG_SOCKET,
                        "--", cfg.python, "-m", FACTORY_MODULE, FACTORY_PIPE,
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
