"""Order of Keystone's middlewares in a proxy pipeline (``iostack.doctor.keystone``)."""

from __future__ import annotations

import pytest

from iostack.doctor.keystone import check_order
from iostack.doctor.pipelines import Pipeline, Stage


def proxy(*roles: str) -> Pipeline:
    return Pipeline("proxy-server.conf", "proxy",
                    [Stage(role, role, {}) for role in (*roles, "proxy_server")], {})


@pytest.mark.parametrize("roles, expected", [
    (("auth_token", "s3api", "s3token", "keystoneauth"), []),
    (("auth_token", "keystoneauth"), []),
    (("tempauth",), []),
    (("s3api", "s3token", "auth_token", "keystoneauth"), ["authtoken sits below s3api"]),
    (("auth_token", "s3api", "keystoneauth"), ["s3api without s3token"]),
    (("auth_token", "s3token", "s3api", "keystoneauth"), ["s3api without s3token"]),
    (("s3api", "s3token", "keystoneauth"), ["keystoneauth has no authtoken above it"]),
])
def test_keystone_order(roles, expected):
    found = [f.what for f in check_order(proxy(*roles))]
    assert len(found) == len(expected)
    assert all(text in what for text, what in zip(expected, found, strict=True))
