"""One request, one policy lookup; and explain agrees with the data path on TO conditions."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from swiftclient.exceptions import ClientException

from iostack.aio.inprocess import lookups_in_subprocess
from iostack.controller.client import ControllerClient

pytestmark = pytest.mark.integration


def test_each_request_makes_one_policy_lookup_and_no_round_trip(aio):
    for actions in (None, "SET ENCRYPTION"):
        counts = lookups_in_subprocess(Path(aio["state_dir"]) / "aio.json", actions)
        # A COPY is two requests on the data path: the COPY and the PUT it sends.
        # Every lookup is answered from the worker's local copy: no round trip to Redis.
        assert counts.pop("COPY object") == [2, 0], counts
        assert {tuple(c) for c in counts.values()} == {(1, 0)}, counts


def _explained(aio, method: str, path: str, **kwargs) -> list[str]:
    admin = ControllerClient(aio["controller_url"], aio["admin_token"])
    return [e["filter"] for e in admin.explain(method, path, kwargs.get("size"),
                                               kwargs.get("headers", {}))["pipeline"]]


def test_select_and_explain_agree_on_tag_conditions(aio, t1, container, policies):
    t1.put_object(container, "hot.csv", b"a,b\n1,2\n3,4\n", headers={"X-Object-Meta-Class": "hot"})
    t1.put_object(container, "cold.csv", b"a,b\n1,2\n3,4\n")
    policies.add(f"FOR CONTAINER AUTH_t1/{container} "
                 "DO SET CSV_SELECT WITH columns=b TO OBJECT_TAG=class:hot")
    time.sleep(0.3)
    path = f"/v1/AUTH_t1/{container}"
    assert "csv_select" in _explained(aio, "GET", f"{path}/hot.csv",
                                      headers={"X-Object-Meta-Class": "hot"})
    assert "csv_select" not in _explained(aio, "GET", f"{path}/cold.csv")
    assert t1.get_object(container, "hot.csv")[1] == b"b\n2\n4\n"
    assert t1.get_object(container, "cold.csv")[1] == b"a,b\n1,2\n3,4\n"


def test_qos_and_explain_agree_on_size_conditions(aio, swift_for, policies):
    t2 = swift_for("t2")
    name = f"qsz-{uuid.uuid4().hex[:8]}"
    t2.put_container(name)
    t2.put_object(name, "big", b"x" * 5000)
    t2.put_object(name, "small", b"x" * 10)
    policies.add(f"FOR CONTAINER AUTH_t2/{name} "
                 "DO SET BANDWIDTH WITH ops=1, wait=0 TO OBJECT_SIZE > 1K")
    time.sleep(0.3)
    path = f"/v1/AUTH_t2/{name}"
    assert "bandwidth" in _explained(aio, "GET", f"{path}/big", size=5000)
    assert "bandwidth" not in _explained(aio, "GET", f"{path}/small", size=10)

    def statuses(obj: str) -> list[int]:
        out = []
        for _ in range(4):
            try:
                t2.get_object(name, obj)
                out.append(200)
            except ClientException as exc:
                out.append(exc.http_status)
        return out

    assert statuses("small") == [200] * 4
    assert 429 in statuses("big")
