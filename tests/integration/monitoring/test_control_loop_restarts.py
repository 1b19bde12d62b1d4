"""The control loop survives restarts of the broker and of the controller.

A private all-in-one with an empty RabbitMQ URL, so it starts its own broker
(restarting the session's shared broker would disturb every other stack on
it); ``iostack aio start`` again brings back whatever was stopped, on the same
port with the same credentials.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import swiftclient
from loop_helpers import BODY, Writer, paced, wait_for_state

from iostack.aio.processes import ProcessManager
from iostack.aio.session import aio_command

pytestmark = pytest.mark.integration


# Its own broker (an empty URL), and a short hold time.
PRIVATE_STACK_ARGS = ("--actor-hold", "2", "--amqp-url", "")


@pytest.fixture(scope="module")
def stack(private_stack):
    state_dir = Path(private_stack["state_dir"])

    def restart() -> None:
        again = aio_command("start", state_dir, "--json")
        assert again.returncode == 0, again.stderr

    return private_stack | {"restart": restart, "processes": ProcessManager(state_dir)}


@pytest.fixture
def client(private_admin):
    return private_admin


@pytest.fixture
def writer(stack):
    creds = stack["tenants"]["t1"]
    conn = swiftclient.Connection(authurl=stack["auth_url"], user=creds["user"],
                                  key=creds["key"], retries=0)
    container = f"restart-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    return Writer(conn, container)


def test_broker_restart_never_fails_the_data_path_and_metrics_resume(stack, client, writer):
    assert "rabbitmq" in stack["processes"].names(), "the stack should run its own broker"
    (record,) = client.add_policies("FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET COMPRESSION")[
        "policies"]
    assert stack["processes"].stop("rabbitmq")
    slowest = 0.0

    def timed_put(_i: int) -> None:
        nonlocal slowest
        began = time.monotonic()
        writer.put()
        slowest = max(slowest, time.monotonic() - began)

    paced(8, 3, timed_put)  # every PUT answers 201 (put_object raises otherwise)
    assert slowest < 1.0, f"a PUT took {slowest:.2f}s with the broker down"
    assert not client.monitoring()["connected"]
    stack["restart"]()
    deadline = time.monotonic() + 20
    while not client.monitoring()["connected"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert client.monitoring()["connected"], "the controller did not reconnect"
    # The proxies reconnect too: load now reaches the actor again.
    paced(8, 6, writer.put)
    wait_for_state(client, record["id"], "tenant:AUTH_t1", "enforced", 10)
    for _, name in writer.written:
        assert writer.conn.get_object(writer.container, name)[1] == BODY


def test_a_restarted_controller_resumes_its_actors(stack, client, writer):
    (kept, transient) = [p["id"] for p in client.add_policies(
        f"FOR CONTAINER t1/{writer.container} WHEN PUTS_SEC > 3 DO SET NOOP\n"
        f"FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET COMPRESSION TRANSIENT")["policies"]]
    container_target = f"container:AUTH_t1/{writer.container}"
    paced(8, 3, writer.put)
    before = wait_for_state(client, kept, container_target, "enforced", 5)
    wait_for_state(client, transient, "tenant:AUTH_t1", "enforced", 5)
    assert stack["processes"].stop("controller")
    stack["restart"]()
    # Load has stopped: the resumed TRANSIENT actor reverts after its hold time ...
    wait_for_state(client, transient, "tenant:AUTH_t1", "reverted", 15)
    # ... and the other one keeps what it applied before the restart, untouched.
    after = wait_for_state(client, kept, container_target, "enforced", 1)
    assert after["applied"] == before["applied"]
    assert client.policy(kept)["status"] == "enforced"
