"""Filters that run in the Storlets sandbox, as encoders and views of the data path.

A filter whose metadata says ``extra.runtime == "storlet"`` (code a tenant or
admin uploaded) runs in the tenant's bubblewrap sandbox through
``iostack.storlet_runtime.runner.SandboxRunner``, speaking the sandboxed
filter protocol of ``iostack.storlet_runtime.filter_runner``: ``mode=encode``
answers with ``Iostack-Sysmeta``, ``mode=decode`` takes that sysmeta and a
``range`` and streams the decoded bytes. ``SandboxedEncoder`` and
``SandboxedView`` wrap those two calls in the same ``Encoder`` and
``ByteSource`` shapes as native filters, so sandboxed and native filters
compose in one pipeline, in any order. A view tells the sandbox the length of
the bytes it streams in, so the decode starts before they have all arrived.

The record of a sandboxed filter carries ``runtime``, ``storlet`` and the
``length`` of the bytes it encoded (a view must know its length before it
reads), so a GET needs no policy lookup to decode it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from swift.common.swob import HTTPException

from iostack.filters.base import ByteSource, FilterContext, check_range
from iostack.filters.errors import FilterError

RUNTIME_KEY = "iostack.runtime"
STORLET_KEY = "iostack.storlet"
LENGTH_KEY = "iostack.length"


def _call_params(mode: str, context: FilterContext, **extra: str) -> dict[str, str]:
    return {"mode": mode, "account": context.account, "container": context.container,
            "object": context.obj, **extra}


class SandboxedEncoder:
    """Write path: the body goes through the sandbox; its sysmeta comes back first."""

    def __init__(self, runner: Any, storlet: str, params: dict[str, Any],
                 context: FilterContext) -> None:
        self.runner = runner
        self.storlet = storlet
        self.params = params
        self.context = context
        self.consumed = 0
        self._sysmeta: dict[str, str] | None = None

    def _counted(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.consumed += len(chunk)
            yield chunk

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        try:
            metadata, output = self.runner.run(
                self.context.account, self.storlet,
                _call_params("encode", self.context, params=json.dumps(self.params)),
                self._counted(chunks))
            sysmeta = json.loads(metadata.get("Iostack-Sysmeta", "{}"))
        except FilterError:
            raise
        except Exception as exc:  # noqa: BLE001 - the gateway's errors have many types
            raise FilterError(f"sandboxed filter {self.storlet}: {_reason(exc)}") from exc
        if not isinstance(sysmeta, dict):
            raise FilterError(f"sandboxed filter {self.storlet}: Iostack-Sysmeta is not an object")
        self._sysmeta = {str(k): str(v) for k, v in sysmeta.items()}
        yield from output

    def sysmeta(self) -> dict[str, str]:
        if self._sysmeta is None:
            raise FilterError(f"sandboxed filter {self.storlet} produced no sysmeta")
        return {**self._sysmeta, RUNTIME_KEY: "storlet", STORLET_KEY: self.storlet,
                LENGTH_KEY: str(self.consumed)}


class SandboxedView:
    """Read path: each read streams the lower bytes through the sandbox with a range."""

    def __init__(self, runner: Any, lower: ByteSource, sysmeta: dict[str, str],
                 context: FilterContext) -> None:
        self.runner = runner
        self.lower = lower
        self.context = context
        try:
            self.storlet = sysmeta[STORLET_KEY]
            self._length = int(sysmeta[LENGTH_KEY])
        except (KeyError, ValueError):
            raise FilterError("sandboxed filter record lacks its storlet or length") from None
        self.filter_sysmeta = {k: v for k, v in sysmeta.items() if not k.startswith("iostack.")}

    @property
    def length(self) -> int:
        return self._length

    def read(self, start: int, end: int) -> Iterator[bytes]:
        check_range(start, end, self._length)
        if start == end:
            return
        try:
            _metadata, output = self.runner.run(
                self.context.account, self.storlet,
                _call_params("decode", self.context, sysmeta=json.dumps(self.filter_sysmeta),
                             range=f"{start}-{end}", length=str(self.lower.length)),
                self.lower.read(0, self.lower.length))
        except Exception as exc:  # noqa: BLE001 - the gateway's errors have many types
            raise FilterError(f"sandboxed filter {self.storlet}: {_reason(exc)}") from exc
        yield from self._exactly(output, end - start)

    def _exactly(self, output: Iterable[bytes], expected: int, where: str = "") -> Iterator[bytes]:
        """``output``, checked to hold the ``expected`` number of bytes."""
        received = 0
        for chunk in output:
            received += len(chunk)
            yield chunk
        if received != expected:
            raise FilterError(f"sandboxed filter {self.storlet} returned {received} bytes "
                              f"for a range of {expected}{where}")


def _reason(exc: Exception) -> str:
    """What went wrong, in words: the gateway's HTTP errors say it in their body."""
    if isinstance(exc, HTTPException) and exc.body:
        return exc.body.decode(errors="replace").strip()
    return str(exc)


def is_sandboxed(sysmeta: dict[str, str]) -> bool:
    return sysmeta.get(RUNTIME_KEY) == "storlet"
