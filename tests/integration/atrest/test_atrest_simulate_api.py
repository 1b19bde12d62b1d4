"""``/v1/simulate``: the CLI's simulation as a job of the controller, against the real stack."""

from __future__ import annotations

import time

import pytest
import requests

pytestmark = pytest.mark.integration

TEXT = b"2026-11-26,alice,login\n" * 2000


def _wait(url: str, headers: dict[str, str], params: dict | None = None) -> dict:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = requests.get(url, headers=headers, params=params, timeout=30)
        assert job.status_code == 200, job.text
        if job.json()["state"] != "running":
            return job.json()
        time.sleep(0.5)
    raise AssertionError("the simulation did not finish within 120 s")


def test_an_admin_simulates_through_the_api_and_reads_the_result(aio, t1, container):
    for n in range(5):
        t1.put_object(container, f"log-{n}", TEXT)
    admin = {"X-Auth-Token": aio["admin_token"]}
    api = f"{aio['controller_url']}/v1/simulate"
    started = requests.post(api, headers=admin, timeout=30, json={
        "text": f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION"})
    assert started.status_code == 202, started.text
    assert started.headers["Location"] == f"/v1/simulate/{started.json()['job']}"
    done = _wait(f"{aio['controller_url']}{started.headers['Location']}", admin)
    assert done["state"] == "done", done
    result = done["result"]
    assert (result["objects"], result["bytes"], result["changed_objects"]) == (
        5, 5 * len(TEXT), 5)
    assert 0 < result["projected_stored_bytes"] < len(TEXT)
    assert done["started"] <= done["finished"] and "error" not in done
    bad = requests.post(api, headers=admin, timeout=30, json={"text": "FOR CONTAINER x DO SET"})
    assert bad.status_code == 400 and bad.json()["diagnostics"][0]["line"] == 1


def test_a_tenant_simulates_its_own_containers_only_and_reads_its_own_jobs(
        aio, swift_for, container):
    api = f"{aio['controller_url']}/v1/simulate"
    _, t1_token = swift_for("t1").get_auth()
    _, t2_token = swift_for("t2").get_auth()
    own = requests.post(api, headers={"X-Auth-Token": t1_token}, timeout=30, json={
        "account": "AUTH_t1", "text": f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION"})
    assert own.status_code == 202, own.text
    job_url = f"{aio['controller_url']}{own.headers['Location']}"
    assert _wait(job_url, {"X-Auth-Token": t1_token}, {"account": "AUTH_t1"})["state"] == "done"
    # Another tenant's job is not there for t2; another account's containers are refused.
    assert requests.get(job_url, headers={"X-Auth-Token": t2_token}, params={
        "account": "AUTH_t2"}, timeout=30).status_code == 404
    for text in (f"FOR CONTAINER AUTH_t2/{container} DO SET COMPRESSION",
                 "FOR ALL DO SET COMPRESSION"):
        refused = requests.post(api, headers={"X-Auth-Token": t1_token}, timeout=30,
                                json={"account": "AUTH_t1", "text": text})
        assert refused.status_code == 403, refused.text
    # A Swift token for one account is no key to another.
    assert requests.post(api, headers={"X-Auth-Token": t1_token}, timeout=30, json={
        "account": "AUTH_t2", "text": "FOR TENANT AUTH_t2 DO SET COMPRESSION"}).status_code \
        in (401, 403)
