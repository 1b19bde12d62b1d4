"""A storlet that reports, as a JSON body, what it can do from inside the sandbox.

Uploaded by the isolation tests; the ``check`` parameter selects the probe:

- ``network`` (``port``): connect to a TCP listener on the host's loopback;
- ``files`` (``paths``, comma-separated): which host paths are visible;
- ``users``: the user names of the sandbox's ``/etc/passwd`` (none without one);
- ``secrets``: walk the sandbox's own file tree (all but /proc, /sys, /dev and
  the distribution's /usr) for anything that looks like host state or keys;
- ``write`` (``paths``): which paths can be created and written;
- ``caps``: the capability sets from /proc/self/status;
- ``memory`` (``mib``): try to allocate that much;
- ``forkbomb``: fork until refused (children exit after two seconds);
- ``loop``: spin forever (the request must time out);
- ``syscalls``: what ptrace, keyctl, bpf, mount and unshare answer;
- ``channels``: what ``/dev/log`` and ``/mnt/channels`` are;
- ``memhog`` (``children``, ``mib``): children each touch that much memory;
  reports how each ended (the scope's memory cgroup kills some);
- ``bomb``: a real fork bomb (every child forks too); never answers;
- ``echo``: copy the input (shows the sandbox still serves).
"""

import ctypes
import errno
import json
import os
import platform
import socket
import time


def _network(params):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect(("127.0.0.1", int(params["port"])))
        return {"connected": True}
    except OSError as exc:
        return {"connected": False, "error": errno.errorcode.get(exc.errno, str(exc))}
    finally:
        sock.close()


def _files(params):
    return {path: os.path.exists(path) for path in params["paths"].split(",")}


def _users(params):
    try:
        with open("/etc/passwd") as f:
            return {"names": [line.split(":")[0] for line in f if ":" in line]}
    except FileNotFoundError:
        return {"names": []}


SECRET_NAMES = {".iostack", ".iostack-test", "aio.json", "swift.conf", "secrets.json", ".git",
                "srv"}
# Swift's devices live in .../srv/node; a package's "node" (playwright's driver) is not one.
SECRET_DIRS = ("/srv/node",)
SECRET_SUFFIXES = ("-server.conf", ".key", ".ring.gz")


def _secrets(params):
    found = []
    for top in ("/", "/usr/local"):
        for root, dirs, files in os.walk(top):
            if top == "/" and root == "/":
                dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
            found += [os.path.join(root, name) for name in dirs + files
                      if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES)]
            found += [os.path.join(root, name) for name in dirs
                      if os.path.join(root, name).endswith(SECRET_DIRS)]
    return {"found": found}


def _write(params):
    result = {}
    for path in params["paths"].split(","):
        try:
            with open(path, "wb") as f:
                f.write(b"probe")
            result[path] = "written"
        except OSError as exc:
            result[path] = errno.errorcode.get(exc.errno, str(exc))
    return result


def _caps(params):
    with open("/proc/self/status") as f:
        return {line.split(":")[0]: line.split(":")[1].strip()
                for line in f if line.startswith("Cap")}


def _memory(params):
    try:
        block = bytearray(int(params["mib"]) << 20)
        return {"allocated": len(block)}
    except MemoryError:
        return {"allocated": 0, "error": "MemoryError"}


def _forkbomb(params):
    forks = 0
    while forks < 100000:
        try:
            pid = os.fork()
        except OSError as exc:
            return {"forks": forks, "refused": errno.errorcode.get(exc.errno, str(exc))}
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        forks += 1
    return {"forks": forks, "refused": None}


# System call numbers (no C library wrapper for keyctl and bpf).
SYSCALLS = {"x86_64": {"ptrace": 101, "keyctl": 250, "bpf": 321, "mount": 165, "unshare": 272},
            "aarch64": {"ptrace": 117, "keyctl": 219, "bpf": 280, "mount": 40, "unshare": 97}}
ARGS = {"ptrace": (0, 0, 0, 0),  # PTRACE_TRACEME: allowed to anyone without seccomp
        "keyctl": (0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring: likewise
        "bpf": (0, 0, 0), "mount": (0, 0, 0, 0, 0), "unshare": (0x20000,)}


def _syscalls(params):
    libc = ctypes.CDLL(None, use_errno=True)
    result = {}
    for name, number in SYSCALLS[platform.machine()].items():
        ctypes.set_errno(0)
        rc = libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) for a in ARGS[name]])
        result[name] = "ok" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
    return result


def _channels(params):
    st = os.stat("/mnt/channels")
    with open("/proc/self/mountinfo") as f:
        fs = [line.split(" - ")[1].split()[0] for line in f if line.split()[4] == "/mnt/channels"]
    return {"dev_log": os.readlink("/dev/log") if os.path.islink("/dev/log") else None,
            "mode": oct(st.st_mode & 0o777), "fs": fs}


def _memhog(params):
    children = []
    for _ in range(int(params["children"])):
        pid = os.fork()
        if pid == 0:
            block = bytearray(int(params["mib"]) << 20)
            for i in range(0, len(block), 4096):  # touch every page: it must be resident
                block[i] = 1
            time.sleep(1)
            os._exit(0)
        children.append(pid)
    ends = []
    for pid in children:
        _, status = os.waitpid(pid, 0)
        ends.append(os.waitstatus_to_exitcode(status))
    if any(end != 0 for end in ends):
        raise RuntimeError(f"memory hog children ended with {ends}")
    return {"ends": ends}


def _bomb(params):
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)


def _loop(params):
    while True:
        pass


CHECKS = {"network": _network, "files": _files, "users": _users, "secrets": _secrets,
          "write": _write, "caps": _caps, "memory": _memory, "forkbomb": _forkbomb,
          "loop": _loop, "syscalls": _syscalls, "channels": _channels, "memhog": _memhog,
          "bomb": _bomb}


class Probe:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        source, sink = in_files[0], out_files[0]
        sink.set_metadata({})
        check = params.get("check", "echo")
        if check == "echo":
            body = source.read()
        else:
            body = json.dumps(CHECKS[check](params)).encode()
        source.close()
        sink.write(body)
        sink.close()
