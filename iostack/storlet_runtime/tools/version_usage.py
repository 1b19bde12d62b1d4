"""Which stored objects were encoded by which pinned version of an uploaded filter.

Each upload of a filter's code is a version named by its content
(``packaging.pinned_storlet_name``), and each object a sandboxed filter
encoded records the storlet and the SHA-256 of the code that encoded it
(``iostack.storlet`` / ``iostack.code_sha256`` in its pipeline record); it
decodes with exactly that version for as long as it exists. ``count_versions``
finds the objects of some accounts that reference a filter's versions, so
``iostack filter show`` can show them and ``iostack filter rm`` can refuse to
remove a filter whose versions are still in use.

It is a scan: every container of the accounts (the reserved-name ones of
object versioning and the ``+segments`` of S3 multipart included) is listed
and every object's metadata read through Swift's internal client, which
sees the sysmeta a client never does. Its cost grows with the number of
objects; a stored-data index would replace it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from swift.common import utils
from swift.common.internal_client import InternalClient

from iostack.filters.errors import IntegrityError
from iostack.stored_object import CODE_KEY, PIPELINE_HEADER, STORLET_KEY, load_pipeline
from iostack.storlet_runtime.host.swift_conf import internal_client_conf_path


def internal_client(swift_dir: str | Path) -> InternalClient:
    """Swift's internal client of the stack whose configs are in ``swift_dir``."""
    utils.set_swift_dir(str(swift_dir))
    return InternalClient(str(internal_client_conf_path(Path(swift_dir))),
                          "iostack-filter-usage", 3)


def referenced_versions(metadata: dict[str, str], storlets: set[str]) -> set[str]:
    """The SHA-256 of each of ``storlets`` that an object's record says encoded it."""
    text = {k.lower(): v for k, v in metadata.items()}.get(PIPELINE_HEADER.lower())
    try:
        entries = load_pipeline(text) if text else []
    except IntegrityError:  # a damaged record names no version
        return set()
    return {entry.meta.get(CODE_KEY, "") for entry in entries
            if entry.meta.get(STORLET_KEY) in storlets}


def count_versions(client: InternalClient, accounts: Iterable[str],
                   storlets: set[str]) -> Counter[str]:
    """How many objects of ``accounts`` each version (SHA-256) of ``storlets`` encoded."""
    counts: Counter[str] = Counter()
    for account in accounts:
        for container in client.iter_containers(account):
            name = container["name"]
            for obj in client.iter_objects(account, name):
                metadata = client.get_object_metadata(account, name, obj["name"],
                                                      acceptable_statuses=(2, 404))
                counts.update(referenced_versions(metadata, storlets))
    return counts
