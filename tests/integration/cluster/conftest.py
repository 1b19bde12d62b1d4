"""The cluster of a test module: ``iostack aio start --nodes 3``, stopped at the module's end.

``cluster`` starts, once per module, a three-node cluster with two proxies
of the module's ``PROXY_WORKERS`` workers each (its own Redis set under
Sentinel, RabbitMQ and namespaces) and yields its ``aio.json``; once it is
stopped, nothing of it (namespace or interface) is left on the host.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from iostack.aio.netns import namespaces
from iostack.aio.session import StackStartError, started_stack


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory) -> Iterator[dict[str, Any]]:
    state_dir = tmp_path_factory.mktemp("cluster") / "aio"
    plan_names: list[str] = []
    try:
        with started_stack(state_dir, "--nodes", "3", "--proxy-workers",
                           str(request.module.PROXY_WORKERS)) as info:
            plan_names = info["cluster_network"]["namespaces"] + [
                info["cluster_network"]["root_interface"]]
            yield info
    except StackStartError as exc:
        pytest.fail(str(exc))
    # Stopped (a crash of the test included): nothing of the cluster is left on the host.
    left = set(namespaces()) & set(plan_names)
    assert not left, f"namespaces left after stop: {left}"
    assert not any(Path("/sys/class/net", name).exists() for name in plan_names)
