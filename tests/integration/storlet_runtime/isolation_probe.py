"""A storlet that reports, as a JSON body, what it can do from inside the sandbox.

Uploaded by the isolation tests; the ``check`` parameter selects the probe:

- ``network`` (``port``): connect to a TCP listener on the host's loopback;
- ``files`` (``paths``, comma-separated): which host paths are visible;
- ``secrets``: walk the sandbox's own file tree (all but /proc, /sys, /dev and
  the distribution's /usr) for anything that looks like host state or keys;
- ``write`` (``paths``): which paths can be created and written;
- ``caps``: the capability sets from /proc/self/status;
- ``memory`` (``mib``): try to allocate that much;
- ``forkbomb``: fork until refused (children exit after two seconds);
- ``loop``: spin forever (the request must time out);
- ``echo``: copy the input (shows the sandbox still serves).
"""

import errno
import json
import os
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


SECRET_NAMES = {".iostack", ".iostack-test", "aio.json", "swift.conf", "secrets.json", ".git",
                "srv", "node"}
SECRET_SUFFIXES = ("-server.conf", ".key", ".ring.gz")


def _secrets(params):
    found = []
    for top in ("/", "/usr/local"):
        for root, dirs, files in os.walk(top):
            if top == "/" and root == "/":
                dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr")]
            found += [os.path.join(root, name) for name in dirs + files
                      if name in SECRET_NAMES or name.endswith(SECRET_SUFFIXES)]
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


def _loop(params):
    while True:
        pass


CHECKS = {"network": _network, "files": _files, "secrets": _secrets, "write": _write, "caps": _caps,
          "memory": _memory, "forkbomb": _forkbomb, "loop": _loop}


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
