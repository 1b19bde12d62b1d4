"""A cgroup per scope: processes, memory and CPU of a whole sandbox.

rlimits are per process (address space, CPU seconds) or per uid (process
count); a cgroup bounds the sandbox as a whole, whatever it forks. The
gateway makes one per scope, sets its limits and starts the sandbox inside
it (the process joins before it execs bwrap, so nothing escapes by forking
early). Which hierarchy is used depends on the host:

- **cgroup v2** (``/sys/fs/cgroup/cgroup.controllers`` exists):
  ``/sys/fs/cgroup/<sandbox_cgroup_root>/<stack>/<scope>`` with ``pids.max``,
  ``memory.max`` (and ``memory.swap.max`` 0) and ``cpu.max``; the
  controllers are enabled in ``cgroup.subtree_control`` on the way down.
- **cgroup v1** (``/sys/fs/cgroup/<controller>`` directories, as on the
  development machines): the same group under each of ``pids``, ``memory``
  and ``cpu`` (``<own group>/<sandbox_cgroup_root>/<stack>/<scope>``), each
  below the server's own group of that controller (the
  memory hierarchy there is nested under the machine's own group);
  ``pids.max``, ``memory.limit_in_bytes`` (and ``memsw`` where swap is
  accounted), ``cpu.cfs_quota_us``.
- **neither writable** (a server that is not root, a read-only cgroupfs):
  no cgroup; the sandbox keeps its rlimits (``prlimit``: address space and
  CPU seconds per process, processes per uid, file size). ``limits`` says
  which hold, and ``iostack storlet sandbox list`` shows it per scope.

A controller that is missing or refuses a write is left out and named in
``limits``; the others still apply. The group is removed when the sandbox
is torn down (``remove``; the kernel refuses while processes remain, then
the next start reuses it).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("pids", "memory", "cpu")
CPU_PERIOD_US = 100_000


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under ``""`` its v2 path."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="ascii") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(","):
                paths[name] = path
    return paths


def _write(path: Path, value: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(value)


@dataclass
class ScopeCgroup:
    """The cgroup(s) of one scope: where its processes go and which limits hold."""

    version: int | None  # 2, 1, or None (no usable cgroup)
    dirs: list[Path] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def describe(self) -> str:
        if self.version is None:
            return "no cgroup: rlimits only (" + "; ".join(self.missing) + ")"
        text = f"cgroup v{self.version}: " + ", ".join(self.limits)
        return text + (f" (not applied: {', '.join(self.missing)})" if self.missing else "")

    def remove(self) -> None:
        """Remove the scope's group(s); a group still holding processes stays."""
        for directory in self.dirs:
            with contextlib.suppress(OSError):
                directory.rmdir()


def scope_cgroup(root: str, scope: str, pids: int, memory: int, cpus: float,
                 fs: Path = CGROUP_FS) -> ScopeCgroup:
    """Create (or reuse) ``scope``'s cgroup with these limits, on whatever the host has."""
    if (fs / "cgroup.controllers").exists():
        return _v2(fs, root, scope, pids, memory, cpus)
    if any((fs / name).is_dir() for name in V1_CONTROLLERS):
        return _v1(fs, root, scope, pids, memory, cpus)
    return ScopeCgroup(None, missing=[f"no cgroup filesystem at {fs}"])


def _v2(fs: Path, root: str, scope: str, pids: int, memory: int, cpus: float) -> ScopeCgroup:
    # From the top of the hierarchy: a group holding processes (the server's own) may not
    # hand controllers down to children ("no internal processes"); the root may.
    levels = [fs]
    for part in f"{root}/{scope}".split("/"):
        levels.append(levels[-1] / part)
    try:
        wanted = {"pids", "memory", "cpu"} & set((fs / "cgroup.controllers").read_text().split())
        for directory in levels[1:]:
            directory.mkdir(exist_ok=True)
        for directory in levels[:-1]:
            _write(directory / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted)))
    except OSError as exc:
        return ScopeCgroup(None, missing=[f"cgroup v2 at {fs} not writable ({exc.strerror})"])
    group = ScopeCgroup(2, dirs=[levels[-1]])
    quota = max(1000, int(cpus * CPU_PERIOD_US))
    settings = [("pids.max", str(pids)), ("memory.max", str(memory)),
                ("memory.swap.max", "0"), ("cpu.max", f"{quota} {CPU_PERIOD_US}")]
    for name, value in settings:
        _apply(group, levels[-1] / name, value, name)
    return group


def _v1(fs: Path, root: str, scope: str, pids: int, memory: int, cpus: float) -> ScopeCgroup:
    group = ScopeCgroup(1)
    own = _own_cgroups()
    quota = max(1000, int(cpus * CPU_PERIOD_US))
    settings = {
        "pids": [("pids.max", str(pids))],
        "memory": [("memory.limit_in_bytes", str(memory)),
                   ("memory.memsw.limit_in_bytes", str(memory))],
        "cpu": [("cpu.cfs_period_us", str(CPU_PERIOD_US)), ("cpu.cfs_quota_us", str(quota))],
    }
    for controller in V1_CONTROLLERS:
        base = fs / controller
        if not base.is_dir():
            group.missing.append(f"{controller} (not mounted)")
            continue
        directory = base / own.get(controller, "/").lstrip("/") / root / scope
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            group.missing.append(f"{controller} ({exc.strerror})")
            continue
        group.dirs.append(directory)
        for name, value in settings[controller]:
            optional = name.startswith("memory.memsw")  # only where swap is accounted
            if optional and not (directory / name).exists():
                continue
            _apply(group, directory / name, value, name)
    if not group.dirs:
        return ScopeCgroup(None, missing=group.missing)
    return group


def _apply(group: ScopeCgroup, path: Path, value: str, label: str) -> None:
    try:
        _write(path, value)
        group.limits.append(f"{label}={value}")
    except OSError as exc:
        group.missing.append(f"{label}: {exc.strerror}")


def join(procs_files: list[str]) -> None:
    """Move the calling process into the given cgroups (before it forks or execs anything)."""
    pid = str(os.getpid())
    for path in procs_files:
        _write(Path(path), pid)
