"""The block filters as the controller sees them, and policy -> stack spec.

``block_filters()`` returns a ``FilterMetadata`` per shipped block filter
(``extra["domain"] == "block"``), for the controller's filter registry, so
``FOR VOLUME v DO SET XOR WITH key=0x5a`` and ``FOR STORAGE_GROUP g DO SET
IOPS WITH read=500`` check against real parameter names, types and ranges.
``runs_before`` encodes where each filter belongs in a stack (write path,
top first): rate limits on top (they meter what the volume's user does),
then the read caches (hits skip decryption), then the byte transforms,
and the prefetcher last (it reads the device itself).

``spec_from_pipeline`` turns the controller's resolved pipeline for a
volume (``Resolution.to_json()["pipeline"]``: ordered ``{filter, params}``)
into the stack spec the frontends load, and ``validate_params`` is the data
path's own check of one filter's parameters (through libiostack).

``CATALOG`` publishes ``block_filters`` and ``block_validators`` to the
controller through the entry point ``iostack.filter_catalogs`` (block).

``redact_spec`` and ``redact_text`` hide the values of ``secret`` parameters
(the aes_xts key) in what the bridge shows: volume listings, errors, logs.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from iostack.filters.catalogs import FilterCatalog
from iostack.filters.metadata import FilterMetadata, Param

from .native_lib import StackError, validate

_VALUE = re.compile(r"^[A-Za-z0-9_.:+-]+$")
_ITEM = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*\((.*)\)\s*$", re.S)
REDACTED = "***"

_TRANSFORMS = ("xor", "bitrev", "aes_xts", "nop")
_CACHES = ("ccache", "dcache")


def _meta(name: str, description: str, params: tuple[Param, ...] = (),
          runs_before: tuple[str, ...] = (), **extra: Any) -> FilterMetadata:
    return FilterMetadata(
        name=name, description=description, params=params,
        methods=frozenset({"GET", "PUT"}), runs_before=runs_before,
        extra={"domain": "block", "library": f"{name}.so", **extra})


def block_filters() -> list[FilterMetadata]:
    below_limits = (*_CACHES, *_TRANSFORMS, "prefetch")
    below_caches = (*_TRANSFORMS, "prefetch")
    return [
        _meta("nop", "passes blocks through unchanged (framework overhead)",
              runs_before=("prefetch",)),
        _meta("xor", "obfuscates every byte with a one-byte key",
              (Param("key", "int", 0x5A, 0, 255, description="XOR key byte"),),
              runs_before=("prefetch",)),
        _meta("bitrev", "mirrors the bit order of every byte", runs_before=("prefetch",)),
        _meta("aes_xts", "AES-XTS encryption per sector, length-preserving (libcrypto)",
              (Param("key", "secret", description="64 or 128 hex digits (AES-128/256-XTS)"),
               Param("sector", "size", 512, 512, 65536, unit="B",
                     description="encryption unit; the stack aligns I/O to it")),
              runs_before=("prefetch",), alignment_param="sector"),
        _meta("iops", "limits read and write operations per second",
              (Param("read", "rate", 0, 0, unit="ops", description="0: unlimited"),
               Param("write", "rate", 0, 0, unit="ops", description="0: unlimited")),
              runs_before=(*below_limits, "bw")),
        _meta("bw", "limits read and write bytes per second",
              (Param("read", "rate", 0, 0, unit="B/s", description="0: unlimited"),
               Param("write", "rate", 0, 0, unit="B/s", description="0: unlimited")),
              runs_before=below_limits),
        _meta("ccache", "compressed in-memory read cache (zlib), LRU within a memory cap",
              (Param("size", "size", 64 << 20, 4096, unit="B", description="memory cap"),
               Param("level", "int", 1, 1, 9, description="zlib level")),
              runs_before=below_caches),
        _meta("dcache", "deduplicated in-memory read cache (SHA-256), LRU within a cap",
              (Param("size", "size", 64 << 20, 4096, unit="B", description="memory cap"),),
              runs_before=below_caches),
        _meta("prefetch", "sequential read-ahead; must be the bottom filter",
              (Param("window", "size", 512 << 10, 4096, 64 << 20, unit="B"),
               Param("trigger", "int", 2, 1, 1024,
                     description="sequential reads before prefetching")),
              reads_device=True),
    ]


def _format(name: str, key: str, value: Any) -> str:
    if isinstance(value, bool):
        raise StackError(f"{name}: parameter {key} cannot be a boolean")
    if isinstance(value, float):
        value = math.ceil(value) if not value.is_integer() else int(value)
    text = str(value)
    if not _VALUE.match(text) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
        raise StackError(f"{name}: parameter {key}={text!r} has characters a stack "
                         "spec cannot carry")
    return f"{key}={text}"


def filter_spec(name: str, params: Mapping[str, Any]) -> str:
    """``xor`` + ``{"key": 90}`` -> ``xor(key=90)``."""
    if not re.match(r"^[A-Za-z0-9_-]+$", name):
        raise StackError(f"bad filter name {name!r}")
    args = ",".join(_format(name, k, v) for k, v in sorted(params.items()) if v is not None)
    return f"{name.lower()}({args})" if args else name.lower()


def spec_from_pipeline(pipeline: Iterable[Mapping[str, Any]]) -> str:
    """The controller's ordered pipeline for a volume -> a stack spec."""
    return ">".join(filter_spec(e["filter"], e.get("params") or {}) for e in pipeline)


def validate_params(name: str) -> Callable[[dict[str, Any]], None]:
    """A validator for the controller's vocabulary: loads the filter with the
    given parameters and raises ValueError with the filter's own reason."""
    def check(params: dict[str, Any]) -> None:
        try:
            validate(filter_spec(name, params))
        except StackError as exc:
            raise ValueError(str(exc)) from None
    return check


def block_validators() -> dict[str, Callable[[dict[str, Any]], None]]:
    return {meta.name: validate_params(meta.name) for meta in block_filters()}


# The controller's view of the block filters (entry point ``iostack.filter_catalogs``).
CATALOG = FilterCatalog(block_filters, block_validators)


@functools.cache
def _secret_params() -> dict[str, frozenset[str]]:
    return {meta.name: frozenset(p.name for p in meta.params if p.secret)
            for meta in block_filters()}


def _secret_args(item: str) -> tuple[str, list[tuple[str, str, str]], frozenset[str]]:
    """``aes_xts(key=ab,sector=512)`` -> ("aes_xts", [(arg text, key, value)], secret
    keys); no arguments for a filter without secret parameters. Arguments are
    ``k=v`` or Konnector's ``k v``, comma-separated, as the native parser takes them."""
    match = _ITEM.match(item)
    secret = _secret_params().get(match.group(1).lower()) if match else None
    if not secret:
        return item, [], frozenset()
    args = []
    for arg in match.group(2).split(","):
        key, _, value = arg.strip().replace("=", " ", 1).partition(" ")
        args.append((arg, key, value.strip()))
    return match.group(1), args, secret


def redact_spec(spec: str) -> str:
    """The spec with every secret parameter's value shown as ``***``."""
    items = []
    for item in spec.split(">"):
        name, args, secret = _secret_args(item)
        if secret:
            shown = (f"{key}={REDACTED}" if key in secret else arg for arg, key, _ in args)
            item = f"{name}({','.join(shown)})"
        items.append(item)
    return ">".join(items)


def redact_text(text: str, spec: str) -> str:
    """``text`` (an error, a log line) with the spec's secret values masked.
    Values under 4 characters are left: no key is that short, and masking
    them would garble the text."""
    for item in spec.split(">"):
        _, args, secret = _secret_args(item)
        for _, key, value in args:
            if key in secret and len(value) >= 4:
                text = text.replace(value, REDACTED)
    return text
