"""Storlets written to the plain OpenStack Storlets API, run as IOStack filters unchanged.

A Python storlet for OpenStack Storlets is a class built with a logger whose
``__call__(self, in_files, out_files, params)`` reads ``in_files[0]``, calls
``out_files[0].set_metadata(...)`` and ``write``\\ s and ``close``\\ s the
output. It knows nothing of IOStack's sandboxed-filter protocol
(``filter_runner``: ``mode``, ``Iostack-Sysmeta``, ``Iostack-Encoded-Length``,
ranges). ``iostack filter upload`` appends to the uploaded module a class
that hands every call to ``StorletsApiRunner`` (``wrapped_code``), which
speaks that protocol around the author's storlet:

- the author's storlet gets the filter's parameters as plain ``params``
  entries (``params["prefix"]``, as Storlets passes ``X-Storlet-Parameter``
  values; on GET those the object was written with, kept in its sysmeta),
  plus ``direction``: ``put`` when the object is written (encode),
  ``get`` when it is read (decode). A self-inverse storlet (rot13, XOR) or
  one that only reads ignores it; one that transforms differently each way
  reads it. The protocol's own entries (``mode``, ``range``...) are there too
  and win over a filter parameter of the same name;
- encode: the output is spooled to the sandbox's private ``/tmp`` and
  announced with its length (``Iostack-Encoded-Length``) and the sysmeta
  ``{"length": <bytes read>, "params": <the filter's parameters, JSON>}``;
  what the storlet sets as its own metadata is not stored (an IOStack
  filter's record is the proxy's);
- decode: the storlet decodes the whole stored body (it cannot seek) and the
  runner passes on only the asked ``range``, streaming, so a range costs no
  spool; the input left unread is drained, so the server never blocks;
- a storlet that does speak the protocol (it announces ``Iostack-Encoded-Length``
  or ``Iostack-Length`` in its metadata) is passed through untouched;
- a call without ``mode`` (a plain ``X-Run-Storlet`` request) runs the
  storlet exactly as Storlets would.

No Swift, no eventlet here: this runs inside the sandbox.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from typing import Any

from iostack.storlet_runtime.filter_runner import end_request_process
from iostack.storlet_runtime.pipes import PIPE_PIECE, widen

DIRECTIONS = {"encode": "put", "decode": "get"}
PROTOCOL_KEYS = ("Iostack-Encoded-Length", "Iostack-Length")
WRAPPER_CLASS = "IOStackStorletsApi"

_WRAPPER = '''

# Added by `iostack filter upload`: the IOStack protocol around the storlet above
# (iostack.storlet_runtime.storlets_api); the storlet itself is unchanged.
from iostack.storlet_runtime.storlets_api import StorletsApiRunner as _IOStackRunner  # noqa: E402


class {wrapper}:
    def __init__(self, logger):
        self._iostack_runner = _IOStackRunner({cls}, logger)

    def __call__(self, in_files, out_files, params):
        self._iostack_runner(in_files, out_files, params)
'''


def wrapped_code(code: bytes, cls: str) -> bytes:
    """The uploaded module ``code`` with the class that runs its storlet ``cls`` appended."""
    return code.rstrip(b"\n") + b"\n" + _WRAPPER.format(wrapper=WRAPPER_CLASS, cls=cls).encode()


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def storlet_params(params: dict[str, str]) -> dict[str, str]:
    """What the author's storlet sees: filter parameters flat, ``direction``, the protocol's.

    A decode gets the parameters its object was encoded with, which the
    encode kept in the sysmeta (a GET carries no policy parameters).
    """
    given = _json_object(params.get("params")) if params["mode"] == "encode" \
        else _json_object(_json_object(params.get("sysmeta")).get("params"))
    flat = {str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in (given.items() if isinstance(given, dict) else ())}
    return {**flat, **params, "direction": DIRECTIONS[params["mode"]]}


def decode_range(params: dict[str, str]) -> tuple[int, int | None]:
    """``(start, end)`` the decode must pass on; ``end`` None: to the end of the output."""
    text = params.get("range")
    if not text:
        return 0, None
    start, _, end = text.partition("-")
    return int(start), int(end)


class _Input:
    """The author's ``in_files[0]``, counting what it reads (the encode's sysmeta records it)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.real.read(size)
        self.read_bytes += len(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self.real.readline(size)
        self.read_bytes += len(data)
        return data

    def __iter__(self):
        return iter(self.readline, b"")

    def __getattr__(self, name: str) -> Any:  # get_metadata, fileno, close...
        return getattr(self.real, name)

    def drain(self) -> None:
        """Read what the server still sends: it must never block on a full pipe."""
        while self.real.read(PIPE_PIECE):
            pass


class _Output:
    """The author's ``out_files[0]``: IOStack's protocol on the real output around it."""

    def __init__(self, real: Any, params: dict[str, str], source: _Input) -> None:
        self.real = real
        self.source = source
        self.mode = params["mode"]
        self.passthrough = False
        self.written = 0
        self.start, self.end = decode_range(params) if self.mode == "decode" else (0, None)
        self.sysmeta = params.get("sysmeta") or "{}"
        self.params = params.get("params") or "{}"
        self.spool = tempfile.TemporaryFile(dir="/tmp") if self.mode == "encode" else None
        self._announced = False
        self.closed = False

    def fileno(self) -> int:
        return self.real.fileno() if self.passthrough else self.spool.fileno()

    def set_metadata(self, metadata: dict[str, str]) -> None:
        if self.written or self._announced:
            raise OSError("metadata must be set once, before the body")
        if any(key in metadata for key in PROTOCOL_KEYS):
            self.passthrough = True  # the storlet speaks IOStack's protocol itself
            self.real.set_metadata(metadata)
            self._announced = True
        # Otherwise the storlet's own metadata is not kept: the record is the proxy's.

    def get_metadata(self) -> dict[str, str]:
        return self.real.get_metadata()

    def _announce_decode(self) -> None:
        if not self._announced:
            length = json.loads(self.sysmeta).get("length")
            self.real.set_metadata({"Iostack-Length": str(length)} if length else {})
            widen(self.real.fileno())
            self._announced = True

    def write(self, data: bytes) -> None:
        if self.passthrough:
            self.real.write(data)
        elif self.spool is not None:
            self.spool.write(data)
        else:
            self._announce_decode()
            offset, self.written = self.written, self.written + len(data)
            last = len(data) if self.end is None else max(0, min(len(data), self.end - offset))
            piece = data[max(0, self.start - offset):last]
            if piece:
                self.real.write(piece)
            return
        self.written += len(data)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Complete the answer: the spooled encoding, announced, or the end of the decoding."""
        if self.closed:
            return
        self.closed = True
        if self.spool is not None and not self.passthrough:
            sysmeta = {"length": str(self.source.read_bytes), "params": self.params}
            self.real.set_metadata({"Iostack-Encoded-Length": str(self.spool.tell()),
                                    "Iostack-Sysmeta": json.dumps(sysmeta)})
            self.spool.seek(0)
            widen(self.real.fileno())
            shutil.copyfileobj(self.spool, self.real, PIPE_PIECE)
            self.spool.close()
        elif not self.passthrough:
            self._announce_decode()
        self.real.close()


class StorletsApiRunner:
    """Runs a Storlets-API storlet class under IOStack's sandboxed-filter protocol."""

    def __init__(self, storlet_class: type, logger: Any) -> None:
        self.logger = logger
        self.storlet = storlet_class(logger)

    def __call__(self, in_files: list[Any], out_files: list[Any], params: dict[str, str]) -> None:
        if params.get("mode") not in DIRECTIONS:  # a plain Storlets request
            self.storlet(in_files, out_files, params)
            return
        source = _Input(in_files[0])
        output = _Output(out_files[0], params, source)
        try:
            self.storlet([source, *in_files[1:]], [output, *out_files[1:]],
                         storlet_params(params))
            output.close()  # if the storlet did not
            if params["mode"] == "decode":
                source.drain()
        finally:
            in_files[0].close()
            out_files[0].close()
        end_request_process(self.logger)  # the answer is complete: skip the teardown
