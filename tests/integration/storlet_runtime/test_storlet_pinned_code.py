"""An imposed sandboxed filter runs only its pinned code: nothing a tenant registers or
uploads reaches its import path (the storlet daemon's folder comes before the standard
library there)."""

from __future__ import annotations

import json
import time

import pytest
import requests

pytestmark = pytest.mark.integration

# The tenant's json.py: the standard library's json, loaded from its own file, with the
# tenant's code in it (an empty sysmeta -- the noop filter's -- gets a key of the tenant's).
EVIL_JSON = b'''"""The standard library's json with a tenant's code in it (a storlet dependency)."""
import importlib.util
import os
import sys
import sysconfig

_init = os.path.join(sysconfig.get_paths()["stdlib"], "json", "__init__.py")
_spec = importlib.util.spec_from_file_location("json", _init,
                                               submodule_search_locations=[os.path.dirname(_init)])
_real = importlib.util.module_from_spec(_spec)
sys.modules["json"] = _real
_spec.loader.exec_module(_real)
_dumps = _real.dumps


def _evil_dumps(obj, *args, **kwargs):
    return _dumps({"evil": "tenant code ran"} if obj == {} else obj, *args, **kwargs)


_real.dumps = _evil_dumps
'''


def _register(conn, code: bytes, headers: dict[str, str], **extra: str) -> None:
    keep = {k: v for k, v in headers.items() if k.startswith("x-object-meta-storlet-")
            and k != "x-object-meta-storlet-dependency"}
    conn.put_object("storlet", "iostack_noop.py", code, headers={**keep, **extra})
    time.sleep(1.1)  # the proxy's registration cache


def test_a_json_dependency_planted_on_an_imposed_filter_never_runs(
        noop_sandboxed_container, storlet_tenant, iostack, stored):
    conn, container = noop_sandboxed_container("SET NOOP SANDBOXED")
    conn.put_object(container, "before", b"imposed")
    tenant = storlet_tenant.conn
    tenant.put_container("dependency")
    tenant.put_object("dependency", "json.py", EVIL_JSON,
                      headers={"X-Object-Meta-Storlet-Dependency-Version": "1"})
    headers, genuine = tenant.get_object("storlet", "iostack_noop.py")
    url, token = conn.get_auth()
    try:
        # The genuine code, registered again with the tenant's json.py as a dependency.
        _register(tenant, genuine, headers, **{"X-Object-Meta-Storlet-Dependency": "json.py"})
        put = requests.put(f"{url}/{container}/during", data=b"x", timeout=60,
                           headers={"X-Auth-Token": token})
        assert put.status_code == 503 and "has no dependencies" in put.text, put.text
        # The tenant runs that registration itself (its own request: its own business),
        # so the daemon starts with the tenant's json loaded and json.py in its folder...
        storlet_tenant.put("probe", b"x")
        storlet_tenant.get("probe", {"X-Run-Storlet": "iostack_noop.py"})
        # ...then registers the genuine code alone again: the leftover is not imported.
        _register(tenant, genuine, headers)
        after = requests.put(f"{url}/{container}/after", data=b"genuine", timeout=60,
                             headers={"X-Auth-Token": token})
        assert after.status_code == 201, after.text
        record = stored("AUTH_t1", container, "after")[0]["x-object-sysmeta-iostack-pipeline"]
        assert "evil" not in record and json.loads(record)[0]["name"] == "noop"
        assert conn.get_object(container, "after")[1] == b"genuine"
        assert conn.get_object(container, "before")[1] == b"imposed"
    finally:
        tenant.delete_object("dependency", "json.py")
        redeployed = iostack("storlet", "deploy", "noop", "--tenant", "t1")
        assert redeployed.returncode == 0, redeployed.stderr
