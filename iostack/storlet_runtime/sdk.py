"""The SDK: the base class tenants write their IOStack filters against.

A filter (``from iostack.storlet_runtime.sdk import Filter``) says what it
does to a stream of bytes each way and what it accepts, and leaves the rest
to the class::

    from iostack.storlet_runtime.sdk import Filter


    class XorFilter(Filter):
        params = ("key:int:0..255=90",)   # NAME:TYPE[:MIN..MAX][=DEFAULT], as --param
        changes_size = False              # output as long as its input
        stages = ("proxy",)               # where it may run: proxy, object

        def encode(self, chunks, params):  # PUT: the tenant's body -> what is stored
            table = bytes(b ^ params["key"] for b in range(256))
            for chunk in chunks:
                yield chunk.translate(table)

        def decode(self, chunks, params):  # GET: what was stored -> the tenant's body
            return self.encode(chunks, params)

- ``encode`` / ``decode`` take an iterator of ``bytes`` and the typed
  parameters and yield ``bytes``: a filter holds only what it needs in
  memory. ``decode`` defaults to ``encode`` (a filter that is its own
  inverse, or one that only reads, writes ``encode`` alone).
- ``params``: the parameters a policy may give (``SET xor WITH key=7``).
  ``iostack filter upload`` reads the declaration from the source (without
  running it) and registers it, so the DSL checks types and ranges at
  compile time; here each value arrives converted to its type (``int``,
  ``float``, ``bool``, ``str``; ``size``, ``rate``, ``duration``... as the
  number the DSL compiled them to), with its default when absent, and is
  checked against its range again.
- ``changes_size`` and ``stages`` are registered with it too: the compiler
  orders and places filters by them.

A subclass is a plain OpenStack Storlets storlet: ``Filter.__call__(self,
in_files, out_files, params)`` reads ``in_files[0]``, sets empty metadata,
writes and closes, as upstream's samples do, so it runs under Storlets
as it is. Under IOStack the runner (``storlets_api``) adds the protocol
around it (lengths, the object's record, ranges) and tells the direction
in ``params["direction"]`` (``put``: encode, ``get``: decode); a plain
Storlets request without one encodes.

Standard library only: this module is imported inside the sandbox.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

CHUNK = 1 << 20
# The declaration of a parameter, as ``iostack filter upload --param`` takes it.
PARAM_SYNTAX = re.compile(r"^(?P<name>[a-z][a-z0-9_]*):(?P<type>[a-z]+)"
                          r"(?::(?P<min>-?[0-9.]+)\.\.(?P<max>-?[0-9.]+))?"
                          r"(?:=(?P<default>.*))?$")
_TRUE, _FALSE = frozenset({"true", "yes", "on", "1"}), frozenset({"false", "no", "off", "0"})


class ParamError(ValueError):
    """A parameter's value is not of its declared type or range; the message names it."""


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _convert(kind: str, text: str) -> Any:
    if kind == "str":
        return text
    if kind == "bool":
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
        raise ValueError("not a boolean")
    if kind == "int":
        return int(_number(text))
    if kind == "float":
        return float(text)
    return _number(text)  # size, rate, duration...: the number the DSL compiled


class Param:
    """One declared parameter: ``key:int:0..255=90``."""

    def __init__(self, declaration: str) -> None:
        match = PARAM_SYNTAX.match(declaration)
        if match is None:
            raise ParamError(f"parameter declaration {declaration!r}: NAME:TYPE[:MIN..MAX]"
                             "[=DEFAULT], e.g. key:int:0..255=90")
        self.name, self.kind, self.default = match["name"], match["type"], match["default"]
        self.minimum = float(match["min"]) if match["min"] else None
        self.maximum = float(match["max"]) if match["max"] else None

    def value(self, text: str | None) -> Any:
        """``text`` (None: absent) as this parameter's typed value; ParamError if it is not one."""
        if text is None:
            if self.default is None:
                return None
            text = self.default
        try:
            value = _convert(self.kind, text)
        except ValueError:
            raise ParamError(f"parameter {self.name}={text!r}: not of type {self.kind}") from None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and (
                (self.minimum is not None and value < self.minimum)
                or (self.maximum is not None and value > self.maximum)):
            raise ParamError(f"parameter {self.name}={text!r}: must be in "
                             f"[{self.minimum:g}, {self.maximum:g}]")
        return value


def _chunks(source: Any) -> Iterator[bytes]:
    while True:
        chunk = source.read(CHUNK)
        if not chunk:
            return
        yield chunk


class Filter:
    """Subclass it and write ``encode`` (and ``decode`` unless it is ``encode``)."""

    params: tuple[str, ...] = ()
    changes_size: bool = True
    stages: tuple[str, ...] = ("proxy", "object")

    def __init__(self, logger: Any) -> None:
        self.logger = logger
        self.declared = [Param(text) for text in self.params]

    def encode(self, chunks: Iterable[bytes], params: dict[str, Any]) -> Iterable[bytes]:
        raise NotImplementedError(f"{type(self).__name__} must define encode(chunks, params)")

    def decode(self, chunks: Iterable[bytes], params: dict[str, Any]) -> Iterable[bytes]:
        return self.encode(chunks, params)

    def typed(self, params: dict[str, str]) -> dict[str, Any]:
        """The declared parameters, converted and checked; undeclared entries as given."""
        typed: dict[str, Any] = dict(params)
        for param in self.declared:
            typed[param.name] = param.value(params.get(param.name))
        return typed

    def __call__(self, in_files: list[Any], out_files: list[Any],
                 params: dict[str, str]) -> None:
        source, sink = in_files[0], out_files[0]
        typed = self.typed(params)
        step = self.decode if params.get("direction") == "get" else self.encode
        sink.set_metadata({})
        for piece in step(_chunks(source), typed):
            if piece:
                sink.write(piece)
        source.close()
        sink.close()
