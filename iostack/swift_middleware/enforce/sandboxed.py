"""Filters that run in the Storlets sandbox, as encoders and views of the data path.

A filter whose metadata says ``extra.runtime == "storlet"`` (code a tenant or
admin uploaded) runs in the tenant's bubblewrap sandbox through
``iostack.storlet_runtime.host.runner.SandboxRunner``, speaking the sandboxed
filter protocol of ``iostack.storlet_runtime.filter_runner``: ``mode=encode``
answers with ``Iostack-Sysmeta``, ``mode=decode`` takes that sysmeta and a
``range`` and streams the decoded bytes. ``SandboxedEncoder`` and
``SandboxedView`` wrap those two calls in the same ``Encoder`` and
``ByteSource`` shapes as native filters, so sandboxed and native filters
compose in one pipeline, in any order. A view tells the sandbox the length of
the bytes it streams in, so the decode starts before they have all arrived.

The record of a sandboxed filter carries ``runtime``, ``storlet``, the
``length`` of the bytes it encoded (a view must know its length before it
reads) and the SHA-256 of the code that encoded them, so a GET needs no
policy lookup to decode it (the keys: ``iostack.stored_object``).

Trust: the storlet code of a filter lives in the tenant's own ``storlet``
container, which the tenant can overwrite. So the code is pinned to what the
controller recorded (``storlet_code``): an uploaded filter's
``extra.code_sha256``, a library filter's generated storlet. The gateway
hashes the storlet file before it runs it and refuses a mismatch with 503
naming the filter (also on GET, through the record's ``code_sha256``). An
uploaded filter registered for one tenant (``extra.tenant``) runs only for
that tenant's account.

Integrity: the storlet's answer is checked against what it announced. A
decode never passes on a byte past the range it was asked for (the chunk
that would cross it fails the read before anything of it is sent). An
encode must announce ``Iostack-Encoded-Length`` with its sysmeta; a PUT
fails (nothing is committed: the failure comes before the footers) when the
output ends short of it or runs past it, or when the storlet answered
without reading the client's whole body.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from swift.common.swob import HTTPException
from swift.common.utils import close_if_possible

from iostack.filters.base import ByteSource, FilterContext, RangedSource
from iostack.filters.errors import FilterError, FilterUnavailable
from iostack.filters.metadata import FilterMetadata
from iostack.stored_object import CODE_KEY, LENGTH_KEY, RUNTIME_KEY, STORLET_KEY
from iostack.storlet_runtime.host.packaging import filter_storlet, storlet_name

ENCODED_LENGTH = "Iostack-Encoded-Length"


def storlet_code(meta: FilterMetadata, account: str) -> tuple[str, str]:
    """The storlet that runs filter ``meta`` for ``account``, and the SHA-256 its code must have.

    Raises ``FilterUnavailable`` when the controller recorded no code for an
    uploaded filter, or when the filter belongs to another tenant.
    """
    owner = meta.extra.get("tenant")
    if owner and owner != account:
        raise FilterUnavailable(f"filter {meta.name} is tenant {owner}'s own; "
                                f"it does not run for {account}")
    if meta.extra.get("runtime") == "storlet":
        digest = meta.extra.get("code_sha256")
        if not digest:
            raise FilterUnavailable(f"filter {meta.name}: the controller recorded no code "
                                    "for it (upload it with iostack filter upload)")
        return meta.extra.get("storlet") or storlet_name(meta.name), str(digest)
    return storlet_name(meta.name), hashlib.sha256(filter_storlet(meta.name).code).hexdigest()


def _call_params(mode: str, context: FilterContext, **extra: str) -> dict[str, str]:
    return {"mode": mode, "account": context.account, "container": context.container,
            "object": context.obj, **extra}


class SandboxedEncoder:
    """Write path: the body goes through the sandbox; its sysmeta comes back first.

    Built with the filter's metadata (``storlet_code`` says which storlet and
    which code); checks of who may run it happen when the body starts, so
    they answer like any other filter failure.
    """

    def __init__(self, runner: Any, meta: FilterMetadata, params: dict[str, Any],
                 context: FilterContext) -> None:
        self.runner = runner
        self.meta = meta
        self.storlet = meta.extra.get("storlet") or storlet_name(meta.name)
        self.params = params
        self.context = context
        self.consumed = 0
        self.code_sha256 = ""
        self._input_done = False
        self._sysmeta: dict[str, str] | None = None

    def _counted(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.consumed += len(chunk)
            yield chunk
        self._input_done = True

    def encode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        self.storlet, self.code_sha256 = storlet_code(self.meta, self.context.account)
        try:
            metadata, output = self.runner.run(
                self.context.account, self.storlet,
                _call_params("encode", self.context, params=json.dumps(self.params)),
                self._counted(chunks), code_sha256=self.code_sha256)
            sysmeta = json.loads(metadata.get("Iostack-Sysmeta", "{}"))
        except Exception as exc:  # the gateway's errors have many types
            raise _failed(self.storlet, exc) from exc
        if not isinstance(sysmeta, dict):
            raise FilterError(f"sandboxed filter {self.storlet}: Iostack-Sysmeta is not an object")
        try:
            announced = int(metadata[ENCODED_LENGTH])
        except (KeyError, ValueError):
            raise FilterError(f"sandboxed filter {self.storlet} did not announce "
                              f"{ENCODED_LENGTH} with its sysmeta") from None
        self._sysmeta = {str(k): str(v) for k, v in sysmeta.items()}
        yield from exactly(output, announced, f"sandboxed filter {self.storlet} encoding")
        if not self._input_done:
            raise FilterError(f"sandboxed filter {self.storlet} answered after reading "
                              f"{self.consumed} bytes, before the end of the body")

    def sysmeta(self) -> dict[str, str]:
        if self._sysmeta is None:
            raise FilterError(f"sandboxed filter {self.storlet} produced no sysmeta")
        return {**self._sysmeta, RUNTIME_KEY: "storlet", STORLET_KEY: self.storlet,
                LENGTH_KEY: str(self.consumed), CODE_KEY: self.code_sha256}


class SandboxedView(RangedSource):
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
        # Records written before the code was pinned have none: they decode unchecked.
        self.code_sha256 = sysmeta.get(CODE_KEY) or None
        self.filter_sysmeta = {k: v for k, v in sysmeta.items() if not k.startswith("iostack.")}

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        try:
            _metadata, output = self.runner.run(
                self.context.account, self.storlet,
                _call_params("decode", self.context, sysmeta=json.dumps(self.filter_sysmeta),
                             range=f"{start}-{end}", length=str(self.lower.length)),
                self.lower.read(0, self.lower.length), code_sha256=self.code_sha256)
        except Exception as exc:  # the gateway's errors have many types
            raise _failed(self.storlet, exc) from exc
        yield from exactly(output, end - start, f"sandboxed filter {self.storlet} decoding")


def exactly(output: Iterable[bytes], expected: int, what: str) -> Iterator[bytes]:
    """``output``, checked to hold exactly ``expected`` bytes; never a byte past them.

    A chunk that would cross ``expected`` fails the read before any of it is
    passed on, so a client never receives more than the length announced.
    """
    received = 0
    try:
        for chunk in output:
            if received + len(chunk) > expected:
                raise FilterError(f"{what}: the storlet sent more than the {expected} bytes "
                                  "it was asked for")
            received += len(chunk)
            yield chunk
    except FilterError:
        # Close the pipe: a storlet that goes on writing gets EPIPE instead of blocking.
        close_if_possible(output)
        raise
    if received != expected:
        raise FilterError(f"{what}: the storlet sent {received} bytes, not {expected}")


def _failed(storlet: str, exc: Exception) -> FilterError:
    """The gateway's error as a filter error; what the sandbox refused is a 503."""
    if isinstance(exc, FilterError):
        return exc
    unavailable = isinstance(exc, HTTPException) and exc.status_int == 503
    return (FilterUnavailable if unavailable else FilterError)(
        f"sandboxed filter {storlet}: {_reason(exc)}")


def _reason(exc: Exception) -> str:
    """What went wrong, in words: the gateway's HTTP errors say it in their body."""
    if isinstance(exc, HTTPException) and exc.body:
        return exc.body.decode(errors="replace").strip()
    return str(exc)

