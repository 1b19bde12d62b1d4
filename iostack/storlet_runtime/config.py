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
``sandbox_user``
    Host user (name or number) the sandbox runs as when the server runs as
    root (default ``nobody``). Never root: the kernel does not apply the
    process-count limit to root.
``sandbox_memory_limit``
    Address-space limit per sandboxed process (``RLIMIT_AS``; default 1G).
    (Upstream's ``container_mem_limit`` only accepts bare numbers, so the
    sandbox has its own key that takes units.)
``sandbox_cpu_seconds``
    CPU seconds per sandboxed process (``RLIMIT_CPU``; default 60). Storlets
    forks one process per request, so this bounds every request's CPU.
``container_pids_limit``
    Processes of the sandbox user (``RLIMIT_NPROC``; default 128).
``sandbox_tmp_size``
    Size of the private ``/tmp`` (default 64M).
``sandbox_file_size``
    Largest file a sandboxed process may write (``RLIMIT_FSIZE``; default 64M).
"""

from __future__ import annotations

import functools
import importlib
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_LIBSBUS = CHECKOUT / "build" / "storlet_runtime" / "libsbus.so"

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


def _user_ids(user: str) -> tuple[int, int]:
    try:
        entry = pwd.getpwuid(int(user)) if user.isdigit() else pwd.getpwnam(user)
    except KeyError:
        if user.isdigit():  # a bare uid needs no passwd entry
            return int(user), int(user)
        raise SandboxConfigError(f"sandbox_user: no such user {user!r}") from None
    return entry.pw_uid, entry.pw_gid


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
    uid: int | None  # None: run as the server's own user (it is not root)
    gid: int | None
    mem_limit: int
    cpu_seconds: int
    pids_limit: int
    tmp_size: int
    file_size: int

    @classmethod
    def from_gateway_conf(cls, conf: Mapping[str, str]) -> SandboxConfig:
        if os.geteuid() == 0:
            uid, gid = _user_ids(str(conf.get("sandbox_user", "nobody")))
            if uid == 0:
                raise SandboxConfigError("sandbox_user: the sandbox must not run as root")
        else:
            uid = gid = None
        return cls(
            libsbus_path=str(conf.get("libsbus_path", DEFAULT_LIBSBUS)),
            bwrap_path=str(conf.get("bwrap_path", "/usr/bin/bwrap")),
            prlimit_path=str(conf.get("prlimit_path", "/usr/bin/prlimit")),
            python=str(conf.get("sandbox_python", "/usr/bin/python3")),
            python_path=_path_list(conf, "sandbox_python_path",
                                   str(Path(_package_dir("storlets")).parent)),
            python_packages=_path_list(conf, "sandbox_python_packages", _package_dir("iostack")),
            uid=uid,
            gid=gid,
            mem_limit=parse_size("sandbox_memory_limit", conf.get("sandbox_memory_limit", "1G")),
            cpu_seconds=_positive_int(conf, "sandbox_cpu_seconds", 60),
            pids_limit=_positive_int(conf, "container_pids_limit", 128),
            tmp_size=parse_size("sandbox_tmp_size", conf.get("sandbox_tmp_size", "64M")),
            file_size=parse_size("sandbox_file_size", conf.get("sandbox_file_size", "64M")),
        )


@functools.lru_cache(maxsize=16)
def _cached(items: tuple[tuple[str, str], ...]) -> SandboxConfig:
    return SandboxConfig.from_gateway_conf(dict(items))


def sandbox_config(conf: Mapping[str, str]) -> SandboxConfig:
    """``SandboxConfig`` of a gateway config, parsed once (the gateway is built per request)."""
    return _cached(tuple(sorted((str(k), str(v)) for k, v in conf.items())))
