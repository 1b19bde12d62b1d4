"""Settings of the bubblewrap sandbox, read from the Storlets gateway config.

Storlets hands every gateway the ``[DEFAULT]`` section of the file named by
``storlet_gateway_conf`` as a plain dict. Upstream keys keep their meaning
(``host_root``, ``pipes_dir``, ``storlets_dir``, ``log_dir``, ``cache_dir``,
``storlet_timeout``, ``sandbox_ping_interval``,
``restart_linux_container_timeout``, ``container_mem_limit``,
``container_pids_limit``); the sandbox adds:

``libsbus_path``
    The ``libsbus.so`` built by ``iostack/storlet_runtime/native`` (default
    ``<checkout>/build/storlet_runtime/libsbus.so``). The gateway loads it and
    binds it read-only where the agent expects it inside the sandbox.
``seccomp_filter_path``
    The compiled seccomp program bwrap installs before it starts the agent
    (``--seccomp``), built by the same Makefile with libseccomp (default
    ``<checkout>/build/storlet_runtime/sandbox-seccomp.bpf``; see
    ``native/sandbox_seccomp.c`` for the system calls it refuses).
``bwrap_path`` / ``prlimit_path`` / ``sandbox_python``
    Executables: bubblewrap, util-linux ``prlimit`` (sets the rlimits before
    bwrap starts) and the interpreter the agent runs on inside the sandbox
    (the system ``/usr/bin/python3``, because ``/usr`` is what is mounted).
``sandbox_python_path``
    Host directories (``:``-separated) bound read-only into the sandbox and
    put on the agent's ``PYTHONPATH``; default: the site-packages directory
    holding ``storlets`` (and the filters' libraries: zstandard, cryptography).
``sandbox_python_packages``
    Package directories (``:``-separated) bound read-only one by one, so a
    package can be shared without the directory around it; default: the
    ``iostack`` package (its checkout also holds the all-in-one's state and
    secrets, which must stay outside).
``sandbox_uid_base`` / ``sandbox_uid_count``
    The reserved host uid range scopes get their own uid from when the
    server runs as root (default 1700000000, 65536 uids; see
    ``identity``). A server that is not root runs sandboxes as itself.
``sandbox_uid_table``
    The host-wide table of those uids (default
    ``/var/lib/iostack/sandbox-uids.json``).
``sandbox_memory_limit``
    Address-space limit per sandboxed process (``RLIMIT_AS``; default 1G).
    (Upstream's ``container_mem_limit`` only accepts bare numbers, so the
    sandbox has its own key that takes units.)
``sandbox_cpu_seconds``
    CPU seconds per sandboxed process (``RLIMIT_CPU``; default 60). Storlets
    forks one process per request, so this bounds every request's CPU.
``container_pids_limit``
    Processes of the scope: its cgroup's ``pids.max`` and its uid's
    ``RLIMIT_NPROC`` (default 128).
``sandbox_cgroup_memory``
    Memory of the whole scope (its cgroup's ``memory.max`` or
    ``memory.limit_in_bytes``; default: ``sandbox_memory_limit``).
``sandbox_cpus``
    CPU time of the whole scope, in cores (its cgroup's CPU quota; default 1).
``sandbox_cgroup_root``
    Name of the cgroup the scopes' cgroups are made under (default
    ``iostack-storlets``), below the server's own cgroup, one level per
    stack (see ``cgroups``).
``sandbox_tmp_size``
    Size of the private ``/tmp`` (default 64M).
``sandbox_channel_size``
    Size of the tmpfs the scope's channels (SBus sockets, the log socket)
    live on inside the sandbox (default 1M).
``sandbox_file_size``
    Largest file a sandboxed process may write (``RLIMIT_FSIZE``; default 64M).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from iostack.storlet_runtime.host.identity import DEFAULT_UID_TABLE

CHECKOUT = Path(__file__).resolve().parents[3]
DEFAULT_LIBSBUS = CHECKOUT / "build" / "storlet_runtime" / "libsbus.so"
DEFAULT_SECCOMP = CHECKOUT / "build" / "storlet_runtime" / "sandbox-seccomp.bpf"

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class SandboxConfigError(ValueError):
    """A gateway config value the sandbox cannot use; the message names the key."""


def parse_size(key: str, value: str | int) -> int:
    """``"512M"`` -> bytes (binary units, as Docker's ``mem_limit``)."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(value)
    if not match:
        raise SandboxConfigError(f"{key}: expected a size such as 512M, got {value!r}")
    return int(match.group(1)) * _UNITS[match.group(2).lower()]


def _positive_int(conf: Mapping[str, str], key: str, default: int) -> int:
    raw = conf.get(key, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise SandboxConfigError(f"{key}: expected a whole number, got {raw!r}") from None
    if value <= 0:
        raise SandboxConfigError(f"{key}: must be positive, got {value}")
    return value


def _path_list(conf: Mapping[str, str], key: str, default: str) -> tuple[str, ...]:
    return tuple(p for p in str(conf.get(key, default)).split(":") if p)


def _package_dir(module: str) -> str:
    return str(Path(importlib.import_module(module).__file__).resolve().parent)


@dataclass(frozen=True)
class SandboxConfig:
    libsbus_path: str
    bwrap_path: str
    prlimit_path: str
    python: str
    python_path: tuple[str, ...]
    python_packages: tuple[str, ...]
    seccomp_path: str
    uid_base: int | None  # None: run as the server's own user (it is not root)
    uid_count: int
    uid_table: str
    mem_limit: int
    cpu_seconds: int
    pids_limit: int
    cgroup_memory: int
    cpus: float
    cgroup_root: str
    tmp_size: int
    channel_size: int
    file_size: int

    @classmethod
    def from_gateway_conf(cls, conf: Mapping[str, str]) -> SandboxConfig:
        if "sandbox_user" in conf:
            raise SandboxConfigError(
                "sandbox_user: no longer used; each scope runs as its own uid from "
                "sandbox_uid_base/sandbox_uid_count")
        uid_base = _positive_int(conf, "sandbox_uid_base", 1_700_000_000)
        uid_count = _positive_int(conf, "sandbox_uid_count", 65536)
        if uid_base + uid_count > 0xFFFFFFFF:
            raise SandboxConfigError("sandbox_uid_base + sandbox_uid_count exceeds the uid space")
        mem_limit = parse_size("sandbox_memory_limit", conf.get("sandbox_memory_limit", "1G"))
        try:
            cpus = float(conf.get("sandbox_cpus", 1))
        except ValueError:
            raise SandboxConfigError(
                f"sandbox_cpus: expected a number of cores, got {conf['sandbox_cpus']!r}") from None
        if cpus <= 0:
            raise SandboxConfigError(f"sandbox_cpus: must be positive, got {cpus}")
        cgroup_root = str(conf.get("sandbox_cgroup_root", "iostack-storlets"))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", cgroup_root) or cgroup_root in (".", ".."):
            raise SandboxConfigError(f"sandbox_cgroup_root: a plain name, got {cgroup_root!r}")
        return cls(
            libsbus_path=str(conf.get("libsbus_path", DEFAULT_LIBSBUS)),
            bwrap_path=str(conf.get("bwrap_path", "/usr/bin/bwrap")),
            prlimit_path=str(conf.get("prlimit_path", "/usr/bin/prlimit")),
            python=str(conf.get("sandbox_python", "/usr/bin/python3")),
            python_path=_path_list(conf, "sandbox_python_path",
                                   str(Path(_package_dir("storlets")).parent)),
            python_packages=_path_list(conf, "sandbox_python_packages", _package_dir("iostack")),
            seccomp_path=str(conf.get("seccomp_filter_path", DEFAULT_SECCOMP)),
            uid_base=uid_base if os.geteuid() == 0 else None,
            uid_count=uid_count,
            uid_table=str(conf.get("sandbox_uid_table", DEFAULT_UID_TABLE)),
            mem_limit=mem_limit,
            cpu_seconds=_positive_int(conf, "sandbox_cpu_seconds", 60),
            pids_limit=_positive_int(conf, "container_pids_limit", 128),
            cgroup_memory=parse_size("sandbox_cgroup_memory",
                                     conf.get("sandbox_cgroup_memory", mem_limit)),
            cpus=cpus,
            cgroup_root=cgroup_root,
            tmp_size=parse_size("sandbox_tmp_size", conf.get("sandbox_tmp_size", "64M")),
            channel_size=parse_size("sandbox_channel_size",
                                    conf.get("sandbox_channel_size", "1M")),
            file_size=parse_size("sandbox_file_size", conf.get("sandbox_file_size", "64M")),
        )


@functools.lru_cache(maxsize=16)
def _cached(items: tuple[tuple[str, str], ...]) -> SandboxConfig:
    return SandboxConfig.from_gateway_conf(dict(items))


def sandbox_config(conf: Mapping[str, str]) -> SandboxConfig:
    """``SandboxConfig`` of a gateway config, parsed once (the gateway is built per request)."""
    return _cached(tuple(sorted((str(k), str(v)) for k, v in conf.items())))
