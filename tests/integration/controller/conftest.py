"""A controller process of our own on the all-in-one's real Redis (and Swift, for tenant auth).

It uses a private key prefix, so these tests neither see nor disturb the
policies of the all-in-one's own controller, which other components' tests
may be using at the same time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
import redis

from iostack.ports import free_port

TOKEN = "integration-admin-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def controller(aio, tmp_path_factory):
    state = tmp_path_factory.mktemp("controller")
    prefix = f"iostack-it-{uuid.uuid4().hex[:8]}:"
    port = free_port()
    config = {"host": "127.0.0.1", "port": port, "redis_url": aio["redis_url"],
              "amqp_url": aio["amqp_url"], "admin_token": TOKEN, "state_dir": str(state),
              "key_prefix": prefix, "swift_url": aio["swift_url"], "tenants": ["t1", "t2"]}
    path = state / "controller.json"
    path.write_text(json.dumps(config))
    log = open(state / "controller.log", "wb")  # closed below
    proc = subprocess.Popen(  # fixed argv
        [sys.executable, "-m", "iostack.controller.server", "--config", str(path)],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(url + "/v1/health", timeout=1):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"controller did not start: {(state / 'controller.log').read_text()}")
            time.sleep(0.1)
    yield {"url": url, "token": TOKEN, "prefix": prefix, "redis_url": aio["redis_url"],
           "aio": aio, "state": state}
    proc.terminate()
    proc.wait(timeout=10)
    log.close()
    client = redis.Redis.from_url(aio["redis_url"])
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


@pytest.fixture
def api(controller):
    """A client for our controller; every test starts with no policies."""
    from iostack.controller.client import ControllerClient

    client = ControllerClient(controller["url"], controller["token"])
    for record in client.policies():
        client.delete_policy(record["id"])
    return client


@pytest.fixture
def cli(controller):
    """Run ``iostack`` (the installed entry point) against our controller."""
    env = dict(os.environ, IOSTACK_URL=controller["url"], IOSTACK_TOKEN=controller["token"])
    exe = os.path.join(os.path.dirname(sys.executable), "iostack")

    def run(*args, env_extra=None):
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60,
                              env=env | (env_extra or {}), check=False)

    return run
