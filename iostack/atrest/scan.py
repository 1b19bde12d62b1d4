"""Which stored objects a target names, as listings give them.

A target is ``ACCOUNT``, ``ACCOUNT/CONTAINER`` or ``ACCOUNT/CONTAINER/OBJECT``
(or ``/v1/...``), a policy target (``tenant:AUTH_t1``, ``container:*/logs``),
or nothing for every known account. Containers of every kind are listed,
Swift's reserved ones (object versions) and S3's ``+segments`` included:
their objects are stored objects too; a container target includes its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from eventlet import GreenPool
from swift.common.request_helpers import get_reserved_name

from iostack.atrest.inspect import stored_object
from iostack.atrest.swift_access import SwiftAccess
from iostack.policy.view import OBJECT_VERSIONS, S3_SEGMENTS_SUFFIX

HEAD_CONCURRENCY = 8


@dataclass(frozen=True)
class Target:
    """Accounts (None: every known one), then optionally a container (``*``: any) and object."""

    account: str | None
    container: str | None = None
    obj: str | None = None

    @classmethod
    def parse(cls, text: str | None) -> Target:
        if not text or text in ("*", "global:*"):
            return cls(None)
        kind, sep, rest = text.partition(":")
        if sep and kind in ("tenant", "container", "object"):
            text = rest
        parts = text.removeprefix("/v1/").strip("/").split("/", 2)
        if not parts[0]:
            raise ValueError(f"not a target: {text!r} (ACCOUNT[/CONTAINER[/OBJECT]])")
        account = None if parts[0] == "*" else parts[0]
        return cls(account, *(p or None for p in parts[1:]))

    def __str__(self) -> str:
        return "/".join(p for p in (self.account or "*", self.container, self.obj) if p)


def containers(access: SwiftAccess, target: Target,
               known_accounts: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(account, container) pairs the target covers, in listing order."""
    accounts = [target.account] if target.account else sorted(set(known_accounts))
    for account in accounts:
        if target.container and target.container != "*":
            yield account, target.container
            if not target.obj:
                # Where Swift keeps the container's old versions and S3 its
                # multipart parts: the tenant's data too, under its policy.
                yield account, get_reserved_name(OBJECT_VERSIONS, target.container)
                yield account, target.container + S3_SEGMENTS_SUFFIX
            continue
        for entry in access.containers(account):
            yield account, entry["name"]


def objects(access: SwiftAccess, target: Target, known_accounts: Iterable[str],
            marker: tuple[str, str, str] | None = None
            ) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(account, container, listing entry) of every object the target covers.

    ``marker`` (account, container, object) resumes after that object.
    """
    for account, container in containers(access, target, known_accounts):
        start = ""
        if marker:
            if (account, container) < marker[:2]:
                continue
            if (account, container) == marker[:2]:
                start = marker[2]
        if target.obj:
            if not start or target.obj > start:
                headers = access.stored_headers(account, container, target.obj)
                if headers is not None:
                    found = stored_object(account, container, target.obj, headers)
                    yield account, container, {
                        "name": target.obj, "bytes": found.logical_bytes, "hash": found.etag,
                        "content_type": found.content_type}
            continue
        for entry in access.objects(account, container, marker=start):
            yield account, container, entry


def with_headers(access: SwiftAccess, listed: Iterable[tuple[str, str, dict[str, Any]]],
                 concurrency: int = HEAD_CONCURRENCY
                 ) -> Iterator[tuple[str, str, dict[str, Any], dict[str, str] | None]]:
    """The listed objects with their stored headers (None: deleted since), in listing order.

    The raw HEADs run ``concurrency`` at a time on green threads: each waits
    mostly on an object server.
    """
    pool = GreenPool(concurrency)

    def head(item: tuple[str, str, dict[str, Any]]):
        account, container, entry = item
        return account, container, entry, access.stored_headers(account, container,
                                                                 entry["name"])

    yield from pool.imap(head, listed)
