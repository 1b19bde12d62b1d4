"""Data-path test fixtures: a tenant, a fresh container, bytes as stored on the object servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import swiftclient
from swift.common import direct_client, utils
from swift.common.ring import Ring


@pytest.fixture
def t1(swift_for) -> swiftclient.Connection:
    return swift_for("t1")


@pytest.fixture
def container(t1) -> str:
    name = f"dp-{uuid.uuid4().hex[:10]}"
    t1.put_container(name)
    return name


@pytest.fixture(scope="session")
def object_ring(aio) -> Ring:
    utils.set_swift_dir(aio["swift_dir"])
    return Ring(aio["swift_dir"], ring_name="object")


@pytest.fixture(scope="session")
def stored(object_ring) -> Callable[[str, str, str], tuple[dict[str, str], bytes]]:
    """``stored(account, container, obj)``: headers and bytes as an object server holds them."""

    def read(account: str, container: str, obj: str) -> tuple[dict[str, str], bytes]:
        part, nodes = object_ring.get_nodes(account, container, obj)
        headers, body = direct_client.direct_get_object(
            nodes[0], part, account, container, obj, headers={"X-Backend-Iostack-Raw": "true"})
        return {k.lower(): v for k, v in headers.items()}, body

    return read


@pytest.fixture(scope="session")
def overwrite_stored(object_ring) -> Callable[[str, str, str, dict[str, str], bytes], None]:
    """Replace an object's stored bytes on every node, keeping the given metadata (tampering)."""

    def write(account: str, container: str, obj: str, headers: dict[str, str],
              body: bytes) -> None:
        part, nodes = object_ring.get_nodes(account, container, obj)
        keep = {k: v for k, v in headers.items()
                if k.startswith(("x-object-sysmeta-", "x-object-meta-")) or k == "content-type"}
        keep["X-Timestamp"] = utils.Timestamp.now().internal
        for node in nodes:
            direct_client.direct_put_object(node, part, account, container, obj, body,
                                             headers=keep)

    return write
