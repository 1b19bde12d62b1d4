"""The admin console in Debian's Chromium, on the real all-in-one (controller, Swift, broker).

Each test drives the pages as an operator would and saves screenshots as
artifacts (``<state_dir>/artifacts/console``).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from console_helpers import login, tenant_token
from playwright.sync_api import expect

pytestmark = pytest.mark.integration


def test_login_is_required_and_a_bad_token_is_refused(page, aio, shot):
    page.goto("/ui/policies")
    expect(page).to_have_url(re.compile(r"/ui/login$"))
    page.get_by_label("Token", exact=True).fill("not-a-token-at-all-0000")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-error")).to_be_visible()
    shot(page, "login")
    page.errors.clear()  # the refused login's 401 is logged by the browser


def test_editor_marks_the_error_then_saves_and_lists(page, aio, policies, shot):
    login(page, aio["admin_token"])
    container = f"ui-{uuid.uuid4().hex[:6]}"
    editor = page.locator("#policy-text")
    bad = f"FOR CONTAINER t1/{container} DO SET compresion WITH level=3"
    editor.fill(bad)
    mark = page.locator("#check mark.error")
    expect(mark).to_have_count(1)
    column = bad.index("compresion") + 1
    expect(mark).to_have_attribute("data-column", str(column))
    expect(mark).to_have_text("c")
    expect(page.locator("#check .diag.error")).to_contain_text(
        f"column {column}: unknown filter 'compresion' (did you mean compression?)")
    shot(page, "policies-error")
    good = bad.replace("compresion", "compression")
    editor.fill(good)
    expect(page.locator("#check-status")).to_contain_text("Valid: 1 policy")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#flash")).to_contain_text("Added P")
    pid = re.search(r"Added (P\d+)", page.locator("#flash").inner_text()).group(1)
    policies.ids.append(pid)  # removed after the test
    row = page.locator(f"#policy-{pid}")
    expect(row).to_contain_text(good)
    expect(row).to_contain_text("active")
    shot(page, "policies")
    assert page.errors == []


def test_explain_shows_the_filter_and_why(page, aio, policies, shot):
    container = f"ui-{uuid.uuid4().hex[:6]}"
    (pid,) = policies.add(f"FOR CONTAINER t1/{container} DO SET compression WITH level=5 "
                          "TO OBJECT_NAME=~\\.log$")
    login(page, aio["admin_token"])
    page.get_by_role("link", name="Explain").click()
    page.get_by_label("Method").select_option("PUT")
    page.get_by_label("Path").fill(f"/v1/AUTH_t1/{container}/app.log")
    page.get_by_label(re.compile("^Size")).fill("2M")
    page.get_by_role("button", name="Explain", exact=True).click()
    row = page.locator("#pipeline tr[data-filter=compression]")
    expect(row).to_contain_text("level=5")
    expect(row.locator(".why")).to_contain_text(f"{pid} at container level")
    expect(page.locator("#explain-title")).to_contain_text("(2097152 bytes)")
    shot(page, "explain")
    page.get_by_label("Path").fill(f"/v1/AUTH_t1/{container}/app.csv")
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.locator("#no-filter")).to_be_visible()
    assert page.errors == []


def test_put_load_raises_the_chart_and_the_actor_enforces(page, aio, policies, swift_for, shot):
    conn = swift_for("t2")
    container = f"ui-live-{uuid.uuid4().hex[:6]}"
    conn.put_container(container)
    (pid,) = policies.add(f"FOR CONTAINER t2/{container} WHEN PUTS_SEC > 3 DO SET noop")
    login(page, aio["admin_token"])
    page.goto(f"/ui/metrics?target=AUTH_t2/{container}")
    actor = page.locator(f"#actors li[data-policy={pid}]")
    expect(actor).to_have_attribute("data-state", re.compile("waiting|idle"))
    now = page.locator("#now-PUTS_SEC")
    body = b"console load\n" * 100
    deadline = time.monotonic() + 20
    peak = 0.0
    enforced = False
    while time.monotonic() < deadline and not (enforced and peak > 3):
        for i in range(8):  # ~8 PUTs/s, paced
            conn.put_object(container, f"o-{time.monotonic_ns()}-{i}", body)
            time.sleep(0.1)
        text = now.inner_text()
        peak = max(peak, float(text)) if text not in ("", "–") else peak
        enforced = actor.get_attribute("data-state") == "enforced"
    assert peak > 3, f"the PUTS_SEC readout stayed at {peak}"
    expect(actor).to_have_attribute("data-state", "enforced", timeout=10000)
    # The threshold and the enforce marker are drawn on the chart's canvas.
    canvas = page.locator("#plot-PUTS_SEC canvas")
    expect(canvas).to_be_visible()
    shot(page, "metrics")
    assert page.errors == []


def test_rollback_from_history(page, aio, policies, shot):
    container = f"ui-{uuid.uuid4().hex[:6]}"
    first = f"FOR CONTAINER t1/{container} DO SET noop"
    second = f"FOR CONTAINER t1/{container} DO SET compression"
    (kept,) = policies.add(first)
    version = policies.client.history(1)["history"][0]["version"]
    (dropped,) = policies.add(second)
    login(page, aio["admin_token"])
    page.get_by_role("link", name="History").click()
    newest = page.locator("#history tbody tr").first
    expect(newest).to_contain_text(second)
    expect(newest).to_contain_text("admin")
    page.get_by_label("From version", exact=True).select_option(str(version))
    page.get_by_label("To version", exact=True).select_option(str(version + 1))
    page.get_by_role("button", name="Diff").click()
    expect(page.locator("#diff .added").first).to_contain_text(second)
    shot(page, "history")
    # One click shows what the rollback changes; a second one, on that preview, does it.
    page.get_by_role("link", name=f"Roll back to version {version}…", exact=True).click()
    expect(page.locator("#rollback-diff .removed").first).to_contain_text(second)
    expect(page.locator("#later")).to_contain_text("admin")
    expect(page.locator("#others")).to_have_count(0)  # nobody else changed anything
    assert len(policies.client.policies()) >= 2  # the preview changed nothing
    shot(page, "rollback-preview")
    page.get_by_role("button", name=f"Roll back to version {version}", exact=True).click()
    expect(page.locator("#flash")).to_contain_text(f"Rolled back to version {version}")
    expect(page.locator("#history tbody tr").first).to_contain_text(
        f"rollback to version {version}")
    texts = [p["text"] for p in policies.client.policies()]
    assert first in texts and second not in texts
    policies.ids.remove(dropped)  # the rollback removed it
    assert kept in [p["id"] for p in policies.client.policies()]
    assert page.errors == []


def test_a_tenant_sees_only_its_own(page, aio, policies, shot):
    mine = f"ui-{uuid.uuid4().hex[:6]}"
    (own,) = policies.add(f"FOR CONTAINER t1/{mine} DO SET noop")
    (other,) = policies.add(f"FOR CONTAINER t2/{mine} DO SET noop")
    token, account = tenant_token(aio, "t1")
    login(page, token, account)
    expect(page.locator("#who")).to_contain_text(account)
    expect(page.locator(f"#policy-{own}")).to_be_visible()
    expect(page.locator(f"#policy-{other}")).to_have_count(0)
    expect(page.locator("#policy-text")).to_have_count(0)
    expect(page.get_by_role("link", name="History")).to_have_count(0)
    shot(page, "tenant-policies")
    # Pages and data of administrators or of other tenants are refused.
    assert page.goto("/ui/history").status == 403
    assert page.goto("/ui/metrics?target=AUTH_t2").status == 403
    assert page.request.get("/ui/metrics/data?target=AUTH_t2").status == 403
    page.goto("/ui/explain")
    page.get_by_label("Path").fill(f"/v1/AUTH_t2/{mine}/x")
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.locator("#explain-result")).to_contain_text("own account")
    page.get_by_label("Path").fill(f"/v1/{account}/{mine}/x")
    page.get_by_role("button", name="Explain", exact=True).click()
    expect(page.locator("#pipeline tr[data-filter=noop]")).to_contain_text(own)
    page.errors.clear()  # the refused pages' 403s are logged by the browser


def test_every_page_renders_at_desktop_and_phone_width(page, aio, policies, shot):
    policies.add(f"FOR CONTAINER t1/ui-{uuid.uuid4().hex[:6]} WHEN PUTS_SEC > 1000 "
                 "DO SET compression WITH level=9, SET noop")
    login(page, aio["admin_token"])
    for name in ("policies", "explain", "metrics", "qos", "filters", "block", "history"):
        response = page.goto(f"/ui/{name}")
        assert response.status == 200, name
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe" not in csp
        shot(page, f"page-{name}", full_page=False)
        if name == "filters":
            row = page.locator("#filters tr[data-filter=compression]")
            expect(row).to_contain_text("native")
            expect(row).to_contain_text("level: int")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/ui/policies")
    # Nothing wider than the phone's screen but the tables, which scroll in their box.
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"
    shot(page, "phone-policies", full_page=False)
    # Keyboard: the skip link comes first, then the navigation; focus is visible.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Policies"
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/explain$"))
    assert page.errors == []


def bridge_call(aio, method: str, **params):
    """One JSON-RPC call to the all-in-one's block bridge (its own credentials)."""
    import base64
    import json
    import urllib.request

    bridge = aio["block_bridge"]
    basic = base64.b64encode(f"{bridge['user']}:{bridge['password']}".encode()).decode()
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    req = urllib.request.Request(bridge["url"], data=body, method="POST", headers={
        "Content-Type": "application/json", "Authorization": f"Basic {basic}"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # loopback
        reply = json.loads(resp.read())
    assert "error" not in reply, reply
    return reply["result"]


def test_block_page_lists_the_bridges_volumes_groups_and_stacks(page, aio, policies, shot):
    from pathlib import Path

    suffix = uuid.uuid4().hex[:6]
    group, volume = f"gold{suffix}", f"db{suffix}"
    policies.add(f"FOR STORAGE_GROUP {group} DO SET XOR WITH key=0x11\n"
                 f"FOR VOLUME {volume} DO SET BITREV")
    bridge_call(aio, "create_storage_group", name=group, nodes=["node-a", "node-b"],
                policy={"media_tier": "nvme", "fabric": "iscsi", "iops": 300})
    backing = Path(aio["state_dir"]) / "block-images" / f"ui-{suffix}.img"
    with open(backing, "wb") as f:
        f.truncate(8 << 20)
    try:
        created = bridge_call(aio, "create_filtered_volume", name=volume, device=str(backing),
                              storage_group=group)
        login(page, aio["admin_token"])
        page.get_by_role("link", name="Block").click()
        row = page.locator(f"#volumes tr[data-name={volume}]")
        expect(row).to_contain_text(created["iscsi_url"])
        expect(row.locator(".spec")).to_have_text("iops(read=300,write=300)>xor(key=17)>bitrev")
        expect(row).to_contain_text("bitrev")
        group_row = page.locator(f"#groups tr[data-name={group}]")
        expect(group_row).to_contain_text("node-a, node-b")
        expect(group_row).to_contain_text("media tier nvme")
        expect(group_row).to_contain_text("xor(key=17)")
        shot(page, "block")
        assert page.errors == []
    finally:
        bridge_call(aio, "delete_filtered_volume", name=volume)
        bridge_call(aio, "delete_storage_group", name=group)
        backing.unlink(missing_ok=True)


def test_qos_page_shows_assigned_and_achieved_per_tenant_and_proxy(page, aio, policies,
                                                                    swift_for, shot):
    policies.add("FOR TENANT t3 DO SET BANDWIDTH WITH get=30MBps")
    conn = swift_for("t3")
    container = f"ui-qos-{uuid.uuid4().hex[:6]}"
    conn.put_container(container)
    conn.put_object(container, "o", b"q" * (256 << 10))
    login(page, aio["admin_token"])
    row = page.locator("#qos-scopes tr", has_text="AUTH_t3")
    # Per-proxy assignments are those of the last interval: only while t3 reads.
    proxy_row = page.locator("#qos-proxies tr", has_text="AUTH_t3")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for _ in range(5):
            conn.get_object(container, "o")
        page.goto("/ui/qos")
        if row.count() and "30 MB/s" in row.first.inner_text() and proxy_row.count():
            break
    expect(row.first).to_contain_text("cap 30 MB/s")
    cells = row.first.locator("td").all_inner_texts()
    assert cells[0] == "get" and cells[2].endswith("MB/s") and cells[3].endswith("MB/s")
    expect(proxy_row.first).to_contain_text("get")
    expect(page.locator("#capacity")).to_contain_text("GET")
    shot(page, "qos")
    assert page.errors == []
