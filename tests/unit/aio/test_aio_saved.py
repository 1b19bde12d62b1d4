"""State files a newer release wrote are read by an older one: unknown fields are ignored.

(Seen in an upgrade-then-rollback: the rolled-back release refused to start
on ``ServiceInfo.__init__() got an unexpected keyword argument 'members'``.)
"""

from __future__ import annotations

import json

import pytest

from iostack.aio.netns import NETWORK_FILE, ClusterNetwork
from iostack.aio.processes import ProcessManager
from iostack.aio.saved import from_saved
from iostack.aio.services import SERVICES_FILE, ServiceInfo, Services


def test_a_services_file_with_fields_from_a_later_release_loads(tmp_path):
    path = tmp_path / SERVICES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"redis": {"url": "redis://:pw@127.0.0.1:1/0", "private": True,
                                          "port": 1, "placement_tier": "hot"}}))
    services = Services(tmp_path, ProcessManager(tmp_path), timeout=1)
    assert services.info["redis"] == ServiceInfo("redis://:pw@127.0.0.1:1/0", True, 1)


def test_a_network_plan_with_fields_from_a_later_release_loads(tmp_path):
    path = tmp_path / NETWORK_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"tag": "abcd1234", "subnet": "10.77.0.0/24", "nodes": 3,
                                "mtu": 9000}))
    plan = ClusterNetwork(tmp_path, 3).saved()
    assert (plan.tag, plan.subnet, plan.nodes) == ("abcd1234", "10.77.0.0/24", 3)


def test_a_missing_field_is_still_an_error():
    with pytest.raises(TypeError, match="url"):
        from_saved(ServiceInfo, {"private": True})
