"""Keystone in proxy pipelines: the order of its middlewares, and the service user.

With ``keystoneauth`` in a proxy pipeline:

- ``authtoken`` (keystonemiddleware's ``auth_token``) must sit above it, and
  above ``s3api`` when there is one: authtoken strips identity headers from
  every request, so below ``s3token`` it erases the identity ``s3token`` set
  for an S3 request (which carries no token) and every S3 request fails with
  ``SignatureDoesNotMatch``;
- ``s3token`` sits between ``s3api`` and ``keystoneauth``.

Each distinct service user of ``authtoken`` and ``s3token`` (``auth_type =
password``) logs in at its ``auth_url``, once: a wrong password or an
unreachable Keystone is an error there, not a 401 for every tenant later.
"""

from __future__ import annotations

from typing import Any

from iostack.doctor import Finding, error, ok
from iostack.doctor.pipelines import Pipeline

AUTHTOKEN = "auth_token"
LOGIN_KEYS = ("auth_url", "username", "password", "project_name", "user_domain_name",
              "project_domain_name")


def check_order(pipeline: Pipeline) -> list[Finding]:
    """Order findings for one proxy pipeline that uses keystoneauth."""
    roles = pipeline.roles()
    if "keystoneauth" not in roles:
        return []
    where = pipeline.where()
    auth = roles.index("keystoneauth")
    if AUTHTOKEN not in roles[:auth]:
        return [error(where, "keystoneauth has no authtoken above it: no Keystone token is "
                             "ever validated", "add authtoken (keystonemiddleware) above "
                                               "keystoneauth, and above s3api")]
    findings = []
    if "s3api" in roles and roles.index(AUTHTOKEN) > roles.index("s3api"):
        findings.append(error(
            where, "authtoken sits below s3api: it strips the identity s3token sets for S3 "
                   "requests, so every S3 request fails (SignatureDoesNotMatch)",
            "move authtoken above s3api: authtoken s3api s3token keystoneauth"))
    if "s3api" in roles and not ("s3token" in roles
                                 and roles.index("s3api") < roles.index("s3token") < auth):
        findings.append(error(
            where, "s3api without s3token between it and keystoneauth: Keystone never checks "
                   "S3 signatures", "put s3token right after s3api"))
    return findings


def check_service_users(pipelines: list[Pipeline]) -> list[Finding]:
    """Log each distinct service user of authtoken and s3token in at Keystone."""
    users: dict[tuple[str, ...], list[str]] = {}
    for pipeline in pipelines:
        for stage in pipeline.stages:
            conf = stage.conf
            if stage.role in (AUTHTOKEN, "s3token") and conf.get("auth_type") == "password":
                key = tuple(str(conf.get(k, "")) for k in LOGIN_KEYS)
                users.setdefault(key, []).append(pipeline.where(f"filter:{stage.section}"))
    return [_login(dict(zip(LOGIN_KEYS, key, strict=True)), where)
            for key, where in users.items()]


def _login(conf: dict[str, Any], where: list[str]) -> Finding:
    from keystoneauth1 import exceptions, session
    from keystoneauth1.identity import v3

    place = ", ".join(where)
    auth = v3.Password(auth_url=conf["auth_url"], username=conf["username"],
                       password=conf["password"], project_name=conf["project_name"],
                       user_domain_name=conf["user_domain_name"] or "Default",
                       project_domain_name=conf["project_domain_name"] or "Default")
    try:
        session.Session(auth=auth, timeout=10).get_token()
    except exceptions.Unauthorized:
        return error(place, f"Keystone at {conf['auth_url']} refuses the service user "
                            f"{conf['username']!r} (wrong password, user or project)",
                     "set the service user's password (and project) Keystone has")
    except exceptions.ClientException as exc:
        return error(place, f"cannot log the service user in at {conf['auth_url']}: {exc}",
                     "check auth_url, and that Keystone runs")
    return ok(place, f"the service user {conf['username']!r} logs in at {conf['auth_url']}")
