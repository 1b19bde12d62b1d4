"""The services the configs name: Redis, RabbitMQ and the controller, reachable and locked.

- **Redis** (each policy store: URL and key prefix): answers with the
  URL's credentials (wrong ones are told apart from an unreachable server);
  refuses a client without them (``redis_open_door``); holds the store's
  ``marker``, without which proxies apply no policy change (they keep their
  copies; one that holds none refuses writes, ``docs/datapath.md``); keeps its data across a restart
  (``appendonly`` or save points; a warning otherwise).
- **RabbitMQ** (each URL of ``iostack_metrics`` and ``iostack_qos``):
  accepts the URL's user on its vhost, and refuses ``guest``/``guest``
  (``amqp_open_door``).
- **The controller** (``--controller URL``): answers ``/v1/health`` (its
  Redis included), accepts the token as an administrator's, its metric
  consumer is connected to RabbitMQ, and it has heard from the proxies
  checked (a worker publishes after its first tenant request, so a quiet
  proxy is a warning, not an error); every proxy worker that reports its
  policy version enforces the store's (a warning names those behind).

A service that lets anyone in is an error unless the operator allowed it
(``--allow-unauthenticated-services``): then a warning.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pika
import pika.exceptions
import redis

from iostack.controller.client import ControllerClient, ControllerError
from iostack.doctor import Finding, error, ok, warning
from iostack.doctor.pipelines import ServiceUse
from iostack.monitoring.bus import connection_parameters
from iostack.policy.connection import connect
from iostack.policy.redis_keys import KeySpace
from iostack.service_probes import amqp_open_door, redact, redis_open_door

TIMEOUT = 3.0


def _used_by(use: ServiceUse) -> str:
    first = use.where[0]
    return first + (f" and {len(use.where) - 1} more" if len(use.where) > 1 else "")


def _open_door(where: str, reason: str, allowed: bool, fix: str) -> Finding:
    what = f"anyone who reaches it can use it: {reason}"
    if allowed:
        return warning(where, what + " (allowed by --allow-unauthenticated-services)", fix)
    return error(where, what, fix)


def check_redis(use: ServiceUse, allow_unauthenticated: bool = False) -> list[Finding]:
    where = f"Redis {redact(use.url)} (prefix {use.key_prefix}, {_used_by(use)})"
    lock = ("give Redis a password (requirepass, or an ACL user) and put it in every "
            "redis_url: redis://:PASSWORD@HOST:PORT/DB")
    client = connect(use.url, socket_timeout=TIMEOUT, socket_connect_timeout=TIMEOUT,
                     decode_responses=True)
    try:
        try:
            client.ping()
        except redis.AuthenticationError as exc:
            said = ("needs a password the URL does not give" if not urlsplit(use.url).password
                    else "refuses the URL's credentials")
            return [error(where, f"Redis {said}: {exc}",
                          "put the password Redis enforces in redis_url (all proxies and "
                          "the controller use the same)")]
        except redis.RedisError as exc:
            return [error(where, f"Redis does not answer: {exc}",
                          "start Redis or fix the host and port in redis_url")]
        reason = redis_open_door(use.url)
        findings = [_open_door(where, reason, allow_unauthenticated, lock) if reason
                    else ok(where, "answers with the URL's password only")]
        return findings + _marker(where, client, KeySpace(use.key_prefix)) + _persistence(
            where, client)
    finally:
        client.close()


def _persistence(where: str, client: redis.Redis) -> list[Finding]:
    try:
        config = client.config_get("appendonly") | client.config_get("save")
    except redis.ResponseError:  # CONFIG denied to this user: a managed Redis
        return [ok(where, "persistence not checked (CONFIG GET refused)")]
    if config.get("appendonly") != "yes" and not config.get("save"):
        return [warning(
            where, "Redis keeps nothing across a restart (appendonly no, no save points): "
                   "after one, writes under byte-changing policies fail until the controller "
                   "restores its journal",
            "set appendonly yes (or save points) in redis.conf")]
    return [ok(where, "persistent (appendonly or save points)")]


def _marker(where: str, client: redis.Redis, keys: KeySpace) -> list[Finding]:
    try:
        marker, version = client.mget(keys.marker, keys.version)
    except redis.RedisError as exc:
        return [error(where, f"the policy store cannot be read: {exc}",
                      "give the proxies' Redis user read access to the key prefix")]
    if not marker:
        return [error(
            where, f"the policy store has no marker ({keys.marker}): proxies apply no policy "
                   "change from it (they keep their copies; one holding none refuses writes)",
            "start the controller on this Redis and key_prefix: it sets the namespace up, "
            "or restores it from <state_dir>/policy-store.json (docs/deploy.md)")]
    return [ok(where, f"policy store marked (version {version or 0})")]


def _policy_versions(where: str, client: ControllerClient) -> list[Finding]:
    """Whether every proxy worker enforces the store's policy version (``policy status``)."""
    try:
        status = client.policy_status()
    except ControllerError as exc:
        return [warning(where, f"policy versions not available ({exc.status}): {exc}",
                        "upgrade the controller")]
    findings = []
    if status["behind"]:
        findings.append(warning(
            where, f"{len(status['behind'])} proxy worker(s) enforce an older policy version "
                   f"than the store's {status['version']}: {', '.join(status['behind'])}",
            "check that those proxies reach Redis (iostack policy status); they keep "
            "enforcing the version they hold"))
    if status["silent"]:
        findings.append(warning(
            where, f"proxy worker(s) stopped reporting their policy version: "
                   f"{', '.join(status['silent'])}",
            "a stopped worker can be ignored; a running one cannot reach Redis"))
    if status["converged"]:
        findings.append(ok(where, f"every reporting proxy worker enforces policy version "
                                  f"{status['version']}"))
    return findings


def check_amqp(use: ServiceUse, allow_unauthenticated: bool = False) -> list[Finding]:
    where = f"RabbitMQ {redact(use.url)} ({_used_by(use)})"
    vhost = urlsplit(use.url).path.lstrip("/") or "%2F"
    try:
        pika.BlockingConnection(connection_parameters(use.url)).close()
    except pika.exceptions.ProbableAuthenticationError:
        return [error(where, "RabbitMQ refuses the URL's user or password",
                      "put a user and password RabbitMQ knows in amqp_url "
                      "(rabbitmqctl add_user, set_permissions)")]
    except pika.exceptions.ProbableAccessDeniedError:
        return [error(where, f"the URL's user may not use vhost {vhost}",
                      f"rabbitmqctl set_permissions -p {vhost} USER '.*' '.*' '.*'")]
    except (pika.exceptions.AMQPError, OSError) as exc:
        return [error(where, f"RabbitMQ does not answer: {exc!r}",
                      "start RabbitMQ or fix the host and port in amqp_url")]
    reason = amqp_open_door(use.url)
    if reason:
        return [_open_door(where, reason, allow_unauthenticated,
                           "give IOStack its own user with a password (rabbitmqctl "
                           "add_user) and delete guest (rabbitmqctl delete_user guest)")]
    return [ok(where, "accepts the URL's user, refuses guest")]


def check_controller(url: str, token: str | None,
                     proxy_sources: dict[str, str]) -> list[Finding]:
    where = f"controller {url}"
    client = ControllerClient(url, token, timeout=TIMEOUT * 2)
    try:
        client.request("GET", "/health")
    except ControllerError as exc:
        if exc.status == 0:
            return [error(where, str(exc), "start the controller, or fix --controller")]
        return [error(where, f"health check failed ({exc.status}): {exc}",
                      "the controller cannot reach its Redis: check its redis_url")]
    findings = [ok(where, "answers, and reaches its Redis")]
    if not token:
        return findings + [warning(where, "no token given: authentication not checked",
                                   "pass --token (or set IOSTACK_TOKEN)")]
    try:
        status = client.monitoring()
    except ControllerError as exc:
        if exc.status in (401, 403):
            return findings + [error(where, f"the token is refused ({exc.status}): {exc}",
                                     "pass the controller's admin_token (or a Keystone "
                                     "token of its admin project)")]
        return findings + [warning(where, f"metrics not available ({exc.status}): {exc}",
                                   "run the controller with its metric loop "
                                   "(python -m iostack.controller.server)")]
    findings.append(ok(where, "accepts the token as an administrator's"))
    findings += _policy_versions(where, client)
    if not status.get("connected"):
        findings.append(error(
            where, "its metric consumer is not connected to RabbitMQ: dynamic policies "
                   "and bandwidth SLOs get no metrics, proxies no QoS assignments",
            "check the controller's amqp_url and RabbitMQ"))
    heard = status.get("sources", {}).get("proxy", [])
    for path, prefix in sorted(proxy_sources.items()):
        if any(source.startswith(prefix) for source in heard):
            findings.append(ok(where, f"hears metrics from {prefix[:-1]} ({path})"))
        else:
            findings.append(warning(
                where, f"has heard no metrics from {prefix[:-1]} ({path}): normal until "
                       "a worker serves its first tenant request; otherwise the proxy "
                       "publishes elsewhere",
                "give iostack_metrics the controller's RabbitMQ (amqp_url) and namespace"))
    return findings
