"""Python access to libiostack, the C block filter stack.

The frontends (nbdkit plugin, FUSE file, tcmu-runner handler) are C and link
the library directly; Python uses it through ctypes for two things: checking
a stack spec before anything is created (the JSON-RPC service) and driving a
stack over a file in tests and tools.

Paths: the library and the filter directory come from the native build
(``make -C iostack/block_bridge/native``). ``IOSTACK_BLOCK_FILTER_DIR``
overrides the filter directory (a deployment's own filters).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parent / "native"
BUILD_DIR = NATIVE_DIR / "build"
ERRLEN = 256


class StackError(Exception):
    """A stack spec or filter argument was rejected, or stack I/O failed."""


def default_filter_dir() -> Path:
    return Path(os.environ.get("IOSTACK_BLOCK_FILTER_DIR", BUILD_DIR / "filters"))


def ensure_built() -> Path:
    """Run the native build (fast when nothing changed); return the build dir."""
    subprocess.run(["make", "-s", "-C", str(NATIVE_DIR)], check=True)  # noqa: S603, S607 - fixed argv, no shell
    return BUILD_DIR


_lib: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """Load libiostack once, with its function signatures declared."""
    global _lib
    if _lib is None:
        path = BUILD_DIR / "libiostack.so"
        if not path.exists():
            raise StackError(f"{path} is missing: run 'make -C {NATIVE_DIR}'")
        lib = ctypes.CDLL(str(path))
        c_char_p, c_int, c_size_t, c_void_p = (
            ctypes.c_char_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p)
        lib.iostack_open.argtypes = [c_char_p, c_char_p, c_int, c_char_p, c_size_t]
        lib.iostack_open.restype = c_void_p
        lib.iostack_validate.argtypes = [c_char_p, c_char_p, c_char_p, c_size_t]
        lib.iostack_validate.restype = c_int
        for name in ("iostack_read", "iostack_write"):
            getattr(lib, name).argtypes = [c_void_p, c_void_p, c_size_t, ctypes.c_uint64]
            getattr(lib, name).restype = c_int
        lib.iostack_flush.argtypes = [c_void_p]
        lib.iostack_flush.restype = c_int
        lib.iostack_close.argtypes = [c_void_p]
        lib.iostack_close.restype = None
        lib.iostack_depth.argtypes = [c_void_p]
        lib.iostack_depth.restype = c_int
        lib.iostack_filter_name.argtypes = [c_void_p, c_int]
        lib.iostack_filter_name.restype = c_char_p
        lib.iostack_stack_alignment.argtypes = [c_void_p]
        lib.iostack_stack_alignment.restype = ctypes.c_uint
        lib.iostack_serialized.argtypes = [c_void_p]
        lib.iostack_serialized.restype = c_int
        lib.iostack_filter_stats.argtypes = [c_void_p, c_int, c_char_p, c_size_t]
        lib.iostack_filter_stats.restype = c_int
        _lib = lib
    return _lib


def validate(spec: str, filter_dir: Path | str | None = None) -> None:
    """Raise StackError naming the problem unless ``spec`` would open."""
    err = ctypes.create_string_buffer(ERRLEN)
    directory = str(filter_dir or default_filter_dir()).encode()
    if library().iostack_validate(spec.encode(), directory, err, ERRLEN) != 0:
        raise StackError(err.value.decode(errors="replace"))


class Stack:
    """A filter stack over an open file descriptor (not owned)."""

    def __init__(self, spec: str, fd: int, filter_dir: Path | str | None = None) -> None:
        err = ctypes.create_string_buffer(ERRLEN)
        directory = str(filter_dir or default_filter_dir()).encode()
        self._lib = library()
        self._handle = self._lib.iostack_open(spec.encode(), directory, fd, err, ERRLEN)
        if not self._handle:
            raise StackError(err.value.decode(errors="replace"))

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._handle:
            self._lib.iostack_close(self._handle)
            self._handle = None

    def read(self, length: int, offset: int) -> bytes:
        buf = ctypes.create_string_buffer(length)
        self._check(self._lib.iostack_read(self._handle, buf, length, offset), "read")
        return buf.raw

    def write(self, data: bytes, offset: int) -> None:
        self._check(self._lib.iostack_write(self._handle, data, len(data), offset), "write")

    def flush(self) -> None:
        self._check(self._lib.iostack_flush(self._handle), "flush")

    @property
    def filters(self) -> list[str]:
        depth = self._lib.iostack_depth(self._handle)
        return [self._lib.iostack_filter_name(self._handle, i).decode() for i in range(depth)]

    @property
    def alignment(self) -> int:
        return self._lib.iostack_stack_alignment(self._handle)

    @property
    def serialized(self) -> bool:
        """True when the stack runs one request at a time."""
        return bool(self._lib.iostack_serialized(self._handle))

    def stats(self, index: int) -> dict[str, str]:
        """A filter's counters, e.g. ``{"hits": "3", "misses": "1"}``."""
        out = ctypes.create_string_buffer(1024)
        self._check(self._lib.iostack_filter_stats(self._handle, index, out, 1024), "stats")
        return dict(item.split("=", 1) for item in out.value.decode().split() if "=" in item)

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc < 0:
            raise StackError(f"stack {what} failed: {os.strerror(-rc)}")
