"""One bubblewrap sandbox per Storlets scope: its command line, start, and tear-down by pid.

The sandbox runs Storlets' agent (its daemon factory, through
``daemon_factory``, which starts one storlet daemon per storlet; the daemon,
``daemon``, runs each request in a process of its own, forked ahead) with:

- new user, pid, ipc, uts, cgroup and network namespaces: no network at all,
  not even a usable loopback; no nested user namespaces; all capabilities
  dropped;
- a read-only root built from scratch: ``/usr`` (read-only), ``/proc``, a
  minimal ``/dev``, a private size-limited ``/tmp``, and only the scope's
  storlet directory (``/var/lib/storlets``, read-only), ``libsbus.so``, the
  agent's Python path and single packages (``iostack``) under
  ``/usr/local/lib/storlets``; ``/etc``, ``/root``, the Swift configs, the
  all-in-one's state and the devices are simply not there;
- the channels (``/mnt/channels``: SBus sockets and the log socket) on a
  size-capped ``0700`` tmpfs that exists only inside the sandbox: nothing on
  the host disk, nothing any other local user can open. The server reaches
  it through the sandbox's root, ``/proc/<pid>/root/mnt/channels``
  (``SandboxPaths``), which the kernel lets only root and the scope's own
  uid traverse; ``channels`` checks every socket before a message is sent;
- no ``/dev/log``: ``agent`` binds a log socket in the channels and copies
  what the agent logs to the sandbox's stderr (the scope's ``sandbox.log``);
- a seccomp program (``--seccomp``, built by ``native/``) refusing ptrace,
  mount, keyctl, bpf and the like;
- its own host uid per scope (``identity``) and its own cgroup (``cgroups``:
  processes, memory, CPU of the whole sandbox), joined before bwrap starts;
- rlimits set by ``prlimit`` before bwrap starts, inherited by every process
  inside: address space, CPU seconds, process count (per uid, so per
  scope), file size, no core dumps.

Tear-down is by pid, never by name: ``<run_dir>/<scope>.json`` records the
pid of the outer bwrap process and its start time (so a recycled pid is never
signalled). Killing it kills the sandbox's pid-1 (``--die-with-parent``), and
the kernel then kills everything else in the pid namespace. The same happens
when the Swift worker that started the sandbox exits.

``<run_dir>/<scope>.lock`` serialises starts across greenthreads and worker
processes, so concurrent cold starts of one scope end with one sandbox.

A sandbox that exits (agent idle exit, tear-down) stays a zombie of the
worker that started it until that worker next checks, starts or stops a
sandbox: then it is reaped (``os.waitpid`` with ``WNOHANG``). No thread waits
for it: under eventlet's monkey-patching such a thread is a green loop that
polls ``waitpid`` every 10 ms in every worker that ever started a sandbox.
A zombie is never mistaken for a live sandbox (``process_start_time``).

``find_daemon`` finds the host pid of a storlet daemon inside the sandbox
(the daemon factory's child running that storlet), so the gateway can check
that it is still alive with one read of ``/proc`` instead of asking the
daemon factory over SBus on every request.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import BinaryIO

from iostack.storlet_runtime.host.cgroups import ScopeCgroup, join
from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.host.flock import held

SANDBOX_LIB_DIR = "/usr/local/lib/storlets"
SANDBOX_PYTHON_DIR = SANDBOX_LIB_DIR + "/python"
SANDBOX_PACKAGE_DIR = SANDBOX_LIB_DIR + "/packages"
SANDBOX_STORLET_DIR = "/var/lib/storlets"
SANDBOX_CHANNEL_DIR = "/mnt/channels"
SANDBOX_TMP = "/tmp"  # noqa: S108 - a private tmpfs, mounted by bwrap for the sandbox alone
FACTORY_PIPE = SANDBOX_CHANNEL_DIR + "/factory_pipe"
LOG_SOCKET = SANDBOX_CHANNEL_DIR + "/log"
FACTORY_MODULE = "iostack.storlet_runtime.daemon_factory"
AGENT_MODULE = "iostack.storlet_runtime.agent"
DAEMON_MODULE = "iostack.storlet_runtime.daemon"

# The sandboxes this process started and has not reaped yet, by pid (see the docstring).
_unreaped: dict[int, subprocess.Popen] = {}


def reap_exited() -> None:
    """Reap the sandboxes this process started that have exited (never blocks)."""
    for pid, proc in list(_unreaped.items()):
        if proc.poll() is not None:
            del _unreaped[pid]



def open_private_log(path: str | Path) -> BinaryIO:
    """The scope's ``sandbox.log`` for appending, readable by its owner only: what a
    tenant's code logs is the tenant's (it was created 0644, readable by every local
    user). One left by an earlier version with a wider mode is narrowed."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")

class SandboxStartError(RuntimeError):
    """The sandbox could not be started (lock timeout, missing executable...)."""


def bwrap_command(cfg: SandboxConfig, scope: str, host_storlet_dir: str, container_name: str,
                  log_level: str, seccomp_fd: int) -> list[str]:
    """The full argv (prlimit, bwrap, agent) that starts ``scope``'s sandbox.

    ``seccomp_fd`` is an open descriptor of the seccomp program, inherited by bwrap.
    """
    limits = [
        cfg.prlimit_path, f"--as={cfg.mem_limit}", f"--cpu={cfg.cpu_seconds}",
        f"--nproc={cfg.pids_limit}", f"--fsize={cfg.file_size}", "--core=0", "--",
    ]
    isolation = [
        cfg.bwrap_path, "--unshare-all", "--unshare-user", "--disable-userns",
        "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--hostname", f"storlets-{scope}", "--seccomp", str(seccomp_fd),
    ]
    filesystem = ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        if os.path.lexists(f"/usr/{link}"):
            filesystem += ["--symlink", f"usr/{link}", f"/{link}"]
    filesystem += [
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(cfg.tmp_size), "--tmpfs", SANDBOX_TMP,
        # Hide the host's /usr/local and lay out only what the agent needs there.
        "--tmpfs", "/usr/local",
        "--ro-bind", cfg.libsbus_path, f"{SANDBOX_LIB_DIR}/libsbus.so",
    ]
    python_dirs = [f"{SANDBOX_PYTHON_DIR}/{i}" for i in range(len(cfg.python_path))]
    for host_dir, inside in zip(cfg.python_path, python_dirs, strict=True):
        filesystem += ["--ro-bind", host_dir, inside]
    for package in cfg.python_packages:
        filesystem += ["--ro-bind", package, f"{SANDBOX_PACKAGE_DIR}/{os.path.basename(package)}"]
    if cfg.python_packages:
        python_dirs.insert(0, SANDBOX_PACKAGE_DIR)
    filesystem += [
        "--perms", "0700", "--size", str(cfg.channel_size), "--tmpfs", SANDBOX_CHANNEL_DIR,
        "--ro-bind", host_storlet_dir, SANDBOX_STORLET_DIR,
        # The agent logs to /dev/log; it lands on the log socket ``agent`` binds.
        "--symlink", LOG_SOCKET, "/dev/log",
        "--remount-ro", "/usr/local", "--remount-ro", "/",
    ]
    environment = [
        "--clearenv",
        "--setenv", "PYTHONPATH", ":".join(python_dirs),
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", SANDBOX_TMP,
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--chdir", SANDBOX_TMP,
    ]
    agent = [cfg.python, "-m", AGENT_MODULE, LOG_SOCKET, "--",
             cfg.python, "-m", FACTORY_MODULE, FACTORY_PIPE, log_level, container_name]
    return limits + isolation + filesystem + environment + ["--"] + agent


def check_reachable(path: str, uid: int | None) -> None:
    """Raise if the sandbox user cannot reach ``path`` (bwrap binds with its rights).

    A private parent directory (e.g. ``0700``) makes bwrap fail with a bare
    "Permission denied"; this names the directory instead.
    """
    if uid is None:
        return
    current = Path(path).resolve()
    for directory in (current, *current.parents):
        st = directory.stat()
        bits = 0o001 if st.st_uid != uid and st.st_gid != uid else \
            (0o100 if st.st_uid == uid else 0o010)
        if not st.st_mode & bits:
            raise SandboxStartError(
                f"the sandbox user (uid {uid}) cannot enter {directory} "
                f"(mode {st.st_mode & 0o777:o}); put the storlet directories elsewhere "
                "or make it traversable")


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def _children(pid: int) -> list[int]:
    children = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                children += [int(child) for child in f.read().split()]
    return children


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


class ScopeSandbox:
    """The bwrap process of one scope, tracked through a pid record and a lock file."""

    def __init__(self, run_dir: str | Path, scope: str) -> None:
        self.run_dir = Path(run_dir)
        self.scope = scope
        self.record_path = self.run_dir / f"{scope}.json"
        self.lock_path = self.run_dir / f"{scope}.lock"

    def lock(self, timeout: float) -> contextlib.AbstractContextManager[None]:
        """Exclusive per-scope lock; polls so that eventlet servers are not blocked."""
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return held(self.lock_path, timeout, lambda: SandboxStartError(
            f"scope {self.scope}: sandbox lock held for over {timeout}s"), poll=0.02)

    def record(self) -> dict:
        """The pid record of the last start ({} if none)."""
        try:
            record = json.loads(self.record_path.read_text())
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def running_pid(self) -> int | None:
        """Pid of the recorded bwrap process if it is still that process and alive."""
        record = self.record()
        try:
            pid, started = int(record["pid"]), int(record["start_time"])
        except (ValueError, KeyError, TypeError):
            return None
        reap_exited()
        return pid if process_start_time(pid) == started else None

    def channel_dir(self) -> str | None:
        """The host's way into the running sandbox's channels, or None if none runs.

        The channels tmpfs exists only in the sandbox's mount namespace; the
        bwrap process's first child (the pid namespace's init) has the
        sandbox's root, so ``/proc/<it>/root`` leads there.
        """
        pid = self.running_pid()
        children = _children(pid) if pid is not None else []
        return f"/proc/{children[0]}/root{SANDBOX_CHANNEL_DIR}" if children else None

    def find_daemon(self, storlet_main: str) -> tuple[int, int] | None:
        """Host pid and start time of the storlet daemon running ``storlet_main``, if any.

        It is the daemon factory's child whose command line is the storlet
        daemon's for that storlet; its own children (one per request) have
        the same command line but another parent.
        """
        pid = self.running_pid()
        if pid is None:
            return None
        pending = [pid]
        while pending:
            parent = pending.pop()
            children = _children(parent)
            if FACTORY_MODULE in _argv(parent)[:3]:
                for child in children:
                    argv = _argv(child)
                    if DAEMON_MODULE in argv[:3] and storlet_main in argv[3:4]:
                        started = process_start_time(child)
                        return None if started is None else (child, started)
                return None
            pending += children
        return None

    def start(self, cfg: SandboxConfig, uid: int | None, cgroup: ScopeCgroup,
              stderr_path: str | Path, host_storlet_dir: str, container_name: str,
              log_level: str) -> int:
        """Start the sandbox (caller holds the lock and has stopped any previous one).

        The child joins the scope's cgroup and, when ``uid`` is given, drops
        to that uid (and the group of the same number) before it execs
        ``prlimit`` and bwrap, so everything in the sandbox starts counted
        and unprivileged.
        """
        reap_exited()
        for exe in (cfg.prlimit_path, cfg.bwrap_path, cfg.libsbus_path, cfg.seccomp_path):
            if not os.path.exists(exe):
                raise SandboxStartError(
                    f"scope {self.scope}: {exe} is missing (install bubblewrap and "
                    "libseccomp-dev; build with make -C iostack/storlet_runtime/native)")
        procs_files = cgroup.procs_files

        def enter() -> None:  # in the child, between fork and exec
            join(procs_files)
            if uid is not None:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)

        Path(stderr_path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        seccomp_fd = os.open(cfg.seccomp_path, os.O_RDONLY)
        try:
            argv = bwrap_command(cfg, self.scope, host_storlet_dir, container_name, log_level,
                                 seccomp_fd)
            with open_private_log(stderr_path) as err:
                proc = subprocess.Popen(  # noqa: S603 - argv built from config, no shell
                    argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, close_fds=True,
                    pass_fds=(seccomp_fd,), start_new_session=True,
                    preexec_fn=enter,  # preexec_fn: must run as root before the exec
                )
        finally:
            os.close(seccomp_fd)
        started = process_start_time(proc.pid)
        record = {"pid": proc.pid, "start_time": started, "scope": self.scope, "uid": uid,
                  "limits": cgroup.describe(), "cgroups": [str(d) for d in cgroup.dirs],
                  "started_at": time.time()}
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.record_path)
        _unreaped[proc.pid] = proc
        return proc.pid

    def stop(self, timeout: float = 5.0) -> bool:
        """Kill the recorded sandbox by pid, remove its cgroups; True if one was running."""
        pid = self.running_pid()
        cgroups = ScopeCgroup(None, dirs=[Path(d) for d in self.record().get("cgroups", [])])
        with contextlib.suppress(FileNotFoundError):
            self.record_path.unlink()
        if pid is None:
            cgroups.remove()
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError as exc:
            if exc.errno != errno.ESRCH:
                raise
        deadline = time.monotonic() + timeout
        while process_start_time(pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        reap_exited()
        cgroups.remove()
        return True
