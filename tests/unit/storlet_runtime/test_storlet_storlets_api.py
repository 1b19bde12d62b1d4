"""Storlets-API storlets under IOStack's protocol (``storlets_api``), with Storlets' file shapes.

Fakes of Storlets' input and output files; the same storlets run in the real
sandbox in ``tests/integration/storlet_runtime/test_storlet_api_filters.py``.
"""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import pytest

from iostack.storlet_runtime.host.deploy import check_python_storlet
from iostack.storlet_runtime.sdk import Filter, ParamError
from iostack.storlet_runtime.storlets_api import WRAPPER_CLASS, StorletsApiRunner, wrapped_code
from iostack.storlet_runtime.tools.template import filter_template

SAMPLES = Path(__file__).resolve().parents[2] / "integration" / "storlet_runtime"
DEV_NULL = open("/dev/null", "rb")  # noqa: SIM115 (for the whole module)
BODY = b"".join(b"line %05d of Some Text\n" % i for i in range(3000))


def _load(module: str, path: Path | None = None):
    spec = importlib.util.spec_from_file_location(module, path or SAMPLES / f"{module}.py")
    namespace = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(namespace)
    return namespace


class InFile:
    """Like Storlets' ``StorletInputFile``."""

    def __init__(self, data: bytes) -> None:
        self.data = io.BytesIO(data)
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        return self.data.read(size)

    def get_metadata(self) -> dict[str, str]:
        return {"Content-Type": "text/plain"}

    def fileno(self) -> int:
        return DEV_NULL.fileno()  # not a pipe: the runner's widening does nothing

    def close(self) -> None:
        self.closed = True


class OutFile:
    """Like Storlets' ``StorletOutputFile``: metadata once, before the body."""

    def __init__(self) -> None:
        self.metadata: dict[str, str] | None = None
        self.body = io.BytesIO()
        self.closed = False

    def set_metadata(self, md: dict[str, str]) -> None:
        assert self.metadata is None, "metadata sent twice"
        self.metadata = md

    def write(self, data: bytes) -> None:
        assert self.metadata is not None, "body before metadata"
        assert not self.closed
        self.body.write(data)

    def fileno(self) -> int:
        return DEV_NULL.fileno()  # not a pipe: the runner's widening does nothing

    def close(self) -> None:
        self.closed = True


class Log:
    def debug(self, msg: str) -> None:
        pass


def _run(cls, data: bytes, **params: str) -> OutFile:
    out = OutFile()
    StorletsApiRunner(cls, Log())([InFile(data)], [out], params)
    assert out.closed
    return out


def _round_trip(cls, params: dict, byte_range: str | None = None) -> tuple[bytes, bytes]:
    stored = _run(cls, BODY, mode="encode", params=json.dumps(params))
    assert stored.metadata["Iostack-Encoded-Length"] == str(len(stored.body.getvalue()))
    sysmeta = stored.metadata["Iostack-Sysmeta"]
    assert json.loads(sysmeta) == {"length": str(len(BODY)), "params": json.dumps(params)}
    extra = {"range": byte_range} if byte_range else {}
    # A GET carries no policy parameters: the decode gets those the object was written with.
    decoded = _run(cls, stored.body.getvalue(), mode="decode", sysmeta=sysmeta, **extra)
    assert decoded.metadata == {"Iostack-Length": str(len(BODY))}
    return stored.body.getvalue(), decoded.body.getvalue()


def test_a_self_inverse_storlet_round_trips_and_its_stored_bytes_are_transformed():
    rot13 = _load("rot13_storlet").Rot13Storlet
    stored, decoded = _round_trip(rot13, {})
    assert decoded == BODY
    assert stored == BODY.translate(_load("rot13_storlet").TABLE) != BODY


@pytest.mark.parametrize("byte_range", ["0-1", "100-2000", f"{len(BODY) - 7}-{len(BODY)}",
                                        "5-5"])
def test_decode_passes_on_exactly_the_range_asked_for(byte_range):
    start, end = map(int, byte_range.split("-"))
    _, decoded = _round_trip(_load("rot13_storlet").Rot13Storlet, {}, byte_range)
    assert decoded == BODY[start:end]


def test_parameters_arrive_flat_and_the_direction_tells_put_from_get():
    shift = _load("shift_storlet").ShiftStorlet
    stored, decoded = _round_trip(shift, {"by": 3})
    assert stored[:4] == bytes((b + 3) % 256 for b in BODY[:4])
    assert decoded == BODY


def test_an_empty_body_round_trips():
    out = _run(_load("rot13_storlet").Rot13Storlet, b"", mode="encode", params="{}")
    assert out.metadata["Iostack-Encoded-Length"] == "0"
    back = _run(_load("rot13_storlet").Rot13Storlet, b"", mode="decode",
                sysmeta=out.metadata["Iostack-Sysmeta"], range="0-0")
    assert back.body.getvalue() == b""


def test_a_storlet_that_speaks_the_protocol_is_passed_through():
    zlib_filter = _load("zlib_filter").ZlibFilter
    stored = _run(zlib_filter, BODY, mode="encode", params="{}")
    assert json.loads(stored.metadata["Iostack-Sysmeta"]) == {"len": str(len(BODY))}
    assert int(stored.metadata["Iostack-Encoded-Length"]) < len(BODY) / 5
    back = _run(zlib_filter, stored.body.getvalue(), mode="decode", range="10-20",
                sysmeta=stored.metadata["Iostack-Sysmeta"])
    assert back.body.getvalue() == BODY[10:20]


def test_a_plain_storlets_request_runs_the_storlet_as_storlets_would():
    out = _run(_load("rot13_storlet").Rot13Storlet, b"Hello")
    assert out.metadata == {"Content-Type": "text/plain", "transformed-by": "rot13"}
    assert out.body.getvalue() == b"Uryyb"


def test_the_uploaded_module_gets_a_class_that_runs_the_authors_storlet(tmp_path):
    code = (SAMPLES / "rot13_storlet.py").read_bytes()
    wrapped = wrapped_code(code, "Rot13Storlet")
    storlet = check_python_storlet("iostack_x.py", wrapped, f"iostack_x.{WRAPPER_CLASS}")
    assert storlet.code.startswith(code.rstrip(b"\n"))  # the author's lines keep their numbers
    (tmp_path / "iostack_x.py").write_bytes(wrapped)
    module = _load("iostack_x", tmp_path / "iostack_x.py")
    out = OutFile()
    getattr(module, WRAPPER_CLASS)(Log())([InFile(b"abc")], [out],
                                          {"mode": "encode", "params": "{}"})
    assert out.body.getvalue() == b"nop"


def test_the_template_filter_new_writes_round_trips_with_its_parameter(tmp_path):
    (tmp_path / "my_xor.py").write_text(filter_template("my_xor"))
    check_python_storlet("my_xor.py", (tmp_path / "my_xor.py").read_bytes())
    cls = _load("my_xor", tmp_path / "my_xor.py").MyXorFilter
    stored, decoded = _round_trip(cls, {"key": 7})
    assert stored[:3] == bytes(b ^ 7 for b in BODY[:3])
    assert decoded == BODY


class Shift(Filter):
    """Not its own inverse: the runner must pick decode on GET."""

    params = ("by:int:0..255=1", "loud:bool=false")

    def encode(self, chunks, params):
        table = bytes((b + params["by"]) % 256 for b in range(256))
        for chunk in chunks:
            yield (chunk.upper() if params["loud"] else chunk).translate(table)

    def decode(self, chunks, params):
        table = bytes((b - params["by"]) % 256 for b in range(256))
        for chunk in chunks:
            yield chunk.translate(table)


def test_an_sdk_filter_gets_typed_parameters_and_decode_on_get():
    stored, decoded = _round_trip(Shift, {"by": 3})
    assert stored[:5] == bytes((b + 3) % 256 for b in BODY[:5])
    assert decoded == BODY
    _, part = _round_trip(Shift, {"by": 200}, "17-4000")
    assert part == BODY[17:4000]
    stored, _ = _round_trip(Shift, {})  # the declared default
    assert stored[:5] == bytes(b + 1 for b in BODY[:5])


@pytest.mark.parametrize(("params", "message"), [
    ({"by": 256}, r"by='256': must be in \[0, 255\]"),
    ({"by": "x"}, "by=.x.: not of type int"),
    ({"loud": "maybe"}, "loud=.maybe.: not of type bool"),
])
def test_an_sdk_filter_refuses_a_parameter_out_of_its_declaration(params, message):
    with pytest.raises(ParamError, match=message):
        _run(Shift, BODY, mode="encode", params=json.dumps(params))


def test_an_sdk_filter_runs_as_a_plain_storlet_too():
    out = OutFile()
    Shift(Log())([InFile(b"abc")], [out], {"by": "1", "loud": "true"})
    assert (out.metadata, out.body.getvalue(), out.closed) == ({}, b"BCD", True)
    with pytest.raises(ParamError, match="parameter declaration 'by:int:x'"):
        type("Bad", (Filter,), {"params": ("by:int:x",)})(Log())


def test_an_sdk_filter_must_write_encode():
    with pytest.raises(NotImplementedError, match="Lazy must define encode"):
        _run(type("Lazy", (Filter,), {}), BODY, mode="encode", params="{}")
