"""GETs undo a sandboxed filter at the object servers, as Storlets runs GET storlets: only the
decoded bytes reach the proxy (objects of 1 MiB or more; smaller ones are already there)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BODY = b"".join(b"%07d object-node line\n" % i for i in range(100000))  # 2.1 MB


def backend_reads(log: Path, path: str, since: int) -> list[int]:
    """Bytes of each GET sub-request the IOStack middleware made for ``path`` (proxy log)."""
    pattern = re.compile(rf'GET {re.escape(path)} HTTP/1\.0 200 .* (\d+|-) - tx\S+ - [\d.]+ IOS ')
    with log.open("rb") as handle:
        handle.seek(since)
        text = handle.read().decode(errors="replace")
    return [int(m.group(1)) for m in pattern.finditer(text) if m.group(1) != "-"]


def test_a_sandboxed_filter_is_undone_at_the_object_servers(aio, noop_sandboxed_container,
                                                           stored):
    conn, container = noop_sandboxed_container("SET NOOP SANDBOXED")
    conn.put_object(container, "o", BODY)
    headers, raw = stored("AUTH_t1", container, "o")
    assert raw == BODY and '"iostack.runtime":"storlet"' in headers[
        "x-object-sysmeta-iostack-pipeline"]

    log = Path(aio["log_dir"]) / "proxy.log"
    since = log.stat().st_size
    assert conn.get_object(container, "o", headers={"Range": "bytes=5000-5099"})[1] \
        == BODY[5000:5100]
    assert conn.get_object(container, "o")[1] == BODY
    path = f"/v1/AUTH_t1/{container}/o"
    deadline = time.monotonic() + 5
    while len(reads := backend_reads(log, path, since)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    # One storlet run per read, each returning just the decoded range: a read
    # through the proxy's sandbox would fetch the whole stored object instead.
    assert reads == [100, len(BODY)]

    # A small object's stored bytes come with the first GET: decoded at the proxy.
    small = BODY[:20000]
    conn.put_object(container, "small", small)
    since = log.stat().st_size
    assert conn.get_object(container, "small", headers={"Range": "bytes=10-19"})[1] == small[10:20]
    assert conn.get_object(container, "small")[1] == small
    time.sleep(0.5)
    assert backend_reads(log, f"/v1/AUTH_t1/{container}/small", since) == []
