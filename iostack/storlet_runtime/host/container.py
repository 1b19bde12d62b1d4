"""What a scope's container is made of, and how it is found again (no engine calls here).

``container_mounts`` and ``container_limits`` are the read-only binds and the
limits ``docker_gateway`` starts a scope's container with;
``ContainerScope`` tracks the running container by its init process (the
agent) and its pid record, as ``sandbox.ScopeSandbox`` tracks a bubblewrap
sandbox, so listing, tear-down by pid and the channels check are the same
for both runtimes; ``held_limits`` reads the limits the kernel holds for it
from its cgroups. Importing this module neither imports Storlets' runtime
(which monkey-patches the process with eventlet) nor the Docker SDK (imported
where used).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from storlets.gateway.common.exceptions import StorletRuntimeException

from iostack.storlet_runtime.host.cgroups import CGROUP_FS
from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.host.sandbox import (
    SANDBOX_CHANNEL_DIR,
    SANDBOX_LIB_DIR,
    SANDBOX_PACKAGE_DIR,
    SANDBOX_PYTHON_DIR,
    SANDBOX_STORLET_DIR,
    ScopeSandbox,
    process_start_time,
)


def container_mounts(cfg: SandboxConfig, host_storlet_dir: str) -> tuple[list[Any], str]:
    """The read-only binds of a scope's container, and its ``PYTHONPATH``."""
    from docker.types import Mount

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
    from docker.types import Ulimit

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

    def start_container(self, client: Any, run: dict[str, Any],
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
