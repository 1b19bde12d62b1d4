"""``iostack doctor`` against the all-in-one's generated configs, and broken copies of them.

The stack's own configs, Redis, RabbitMQ and controller give no error. Each
broken copy (written under the test's tmp dir, the stack untouched) gives
the finding that names its fault: a middleware missing or out of place, a
Redis URL without password or with a wrong one, a Redis anyone can use, an
unreachable or refusing RabbitMQ, a policy store without its marker, a
required key missing, a value the middleware refuses, a wrong token.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from configparser import ConfigParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from swift_confs import pipeline, read_conf, set_pipeline, write_conf

from iostack.doctor import Finding
from iostack.doctor.cli import diagnose
from iostack.doctor.pipelines import READERS, find_configs
from iostack.ports import free_port, wait_until

pytestmark = pytest.mark.integration

Edit = Callable[[dict[str, ConfigParser]], None]


@pytest.fixture
def broken(aio, tmp_path) -> Callable[[Edit], tuple[list[str], list[str]]]:
    """``broken(edit)``: copies of the stack's proxy and object configs, edited by ``edit``
    (given ``{"proxy": ConfigParser, "object": ConfigParser}``); their paths."""
    swift_dir = Path(aio["swift_dir"])

    def copy(edit: Edit) -> tuple[list[str], list[str]]:
        confs = {kind: read_conf(swift_dir / f"{kind}-server.conf") for kind in ("proxy", "object")}
        edit(confs)
        for kind, conf in confs.items():
            write_conf(conf, tmp_path / f"{kind}-server.conf")
        return [str(tmp_path / "proxy-server.conf")], [str(tmp_path / "object-server.conf")]

    return copy


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]


def only_error(findings: list[Finding], text: str) -> Finding:
    """The one error, which says ``text``."""
    found = errors(findings)
    assert [text in f.what for f in found] == [True], found
    return found[0]


def set_in_readers(conf: ConfigParser, key: str, value: str) -> None:
    """Set ``key`` in every middleware that reads the policy store."""
    for name in conf.sections():
        if conf[name].get("use", "").split("#")[-1] in READERS:
            conf[name][key] = value


def with_netloc(url: str, netloc: str) -> str:
    return urlsplit(url)._replace(netloc=netloc).geturl()


# -- the stack as generated ---------------------------------------------------------------


def stack_configs(aio: dict[str, Any]) -> tuple[list[str], list[str]]:
    swift_dir = aio["swift_dir"]
    return find_configs(swift_dir, "proxy"), find_configs(swift_dir, "object")


def test_the_all_in_one_has_no_error_and_the_controller_hears_its_proxy(aio, swift_for):
    proxies, objects = stack_configs(aio)
    assert proxies and objects
    tenant = swift_for("t1")
    tenant.head_account()  # a worker publishes after its first tenant request
    tenant.put_container("doctor")
    tenant.put_object("doctor", "o", b"x")  # and reports its policy version after its first write
    heard: list[Finding] = []
    versions: list[Finding] = []

    def check() -> bool:
        findings = diagnose(proxies, objects, aio["controller_url"], aio["admin_token"])
        assert errors(findings) == []
        assert not any("keeps nothing across a restart" in f.what for f in findings)
        heard[:] = [f for f in findings if f.level == "ok" and "hears metrics from" in f.what]
        versions[:] = [f for f in findings if f.level == "ok"
                       and "every reporting proxy worker enforces policy version" in f.what]
        return bool(heard) and bool(versions)

    assert wait_until(check, 20, 1), f"heard from the proxy: {heard}, versions: {versions}"
    assert any(f"{urlsplit(aio['swift_url']).netloc}" in f.what for f in heard)


def test_the_command_exits_0_and_1_and_says_how_to_fix(aio, broken):
    proxies, objects = stack_configs(aio)
    good = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "doctor", "--swift-dir", aio["swift_dir"],
         "--controller", aio["controller_url"], f"--token={aio['admin_token']}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "0 errors" in good.stdout
    proxy, obj = broken(lambda c: set_pipeline(c["object"], [
        n for n in pipeline(c["object"]) if n != "iostack"]))
    bad = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "doctor", "--proxy-conf", *proxy,
         "--object-conf", *obj, "--json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    [finding] = [f for f in json.loads(bad.stdout) if f["level"] == "error"]
    assert finding["where"] == f"{obj[0]} [pipeline:main]"
    assert "no iostack_object middleware" in finding["what"]
    assert "egg:iostack#iostack_object" in finding["fix"]


def test_with_no_arguments_it_checks_the_running_all_in_one(aio):
    env = {k: v for k, v in os.environ.items() if k not in ("IOSTACK_URL", "IOSTACK_TOKEN")}
    found = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "doctor"], capture_output=True, text=True,
        timeout=120, check=False, env=env | {"IOSTACK_STATE_DIR": aio["state_dir"]})
    assert found.returncode == 0, found.stdout + found.stderr
    assert f"checking the running all-in-one: {aio['swift_dir']}" in found.stdout
    assert "controller not checked" not in found.stdout  # its URL and token came along
    assert "0 errors" in found.stdout


# -- pipelines --------------------------------------------------------------------------


def test_a_missing_proxy_middleware(broken):
    proxy, obj = broken(lambda c: set_pipeline(c["proxy"], [
        n for n in pipeline(c["proxy"]) if n != "iostack"]))
    findings = diagnose(proxy, obj)
    found = only_error(findings, "no iostack_proxy middleware")
    assert found.where == f"{proxy[0]} [pipeline:main]"
    assert all(f.fix for f in findings if f.level != "ok")


def moved(kind: str, name: str, above: str) -> Edit:
    """An edit that moves ``name`` right above ``above`` in the ``kind`` server's pipeline."""
    def edit(confs: dict[str, ConfigParser]) -> None:
        names = [n for n in pipeline(confs[kind]) if n != name]
        names.insert(names.index(above), name)
        set_pipeline(confs[kind], names)
    return edit


def test_enforcement_above_copy_and_large_objects(broken):
    proxy, obj = broken(moved("proxy", "iostack", above="copy"))
    found = only_error(diagnose(proxy, obj), "iostack sits above copy, slo, dlo, "
                                             "versioned_writes, symlink")
    assert "move iostack below" in found.fix


def test_metrics_below_auth(broken):
    proxy, obj = broken(moved("proxy", "iostack_metrics", above="tempauth"))
    only_error(diagnose(proxy, obj), "iostack_metrics sits above tempauth")


def test_swift_encryption_goes_below_iostack(broken):
    def encryption(at: str) -> Edit:
        def edit(confs):
            proxy = confs["proxy"]
            proxy["filter:keymaster"] = {"use": "egg:swift#keymaster",
                                         "encryption_root_secret": "a" * 44}
            proxy["filter:encryption"] = {"use": "egg:swift#encryption"}
            names = pipeline(proxy)
            names[names.index(at):names.index(at)] = ["keymaster", "encryption"]
            set_pipeline(proxy, names)
        return edit

    proxy, obj = broken(encryption("proxy-server"))
    findings = diagnose(proxy, obj)
    assert errors(findings) == []
    assert any(f.level == "warning" and "not encrypted by Swift" in f.what for f in findings)
    proxy, obj = broken(encryption("iostack"))
    found = errors(diagnose(proxy, obj))
    assert {f.what.split(":")[0] for f in found} == {
        "keymaster sits above iostack, iostack_cache",
        "encryption sits above iostack, iostack_cache"}


def test_selection_below_storlets_and_iostack_on_the_object_server(broken):
    proxy, obj = broken(moved("object", "iostack_select", above="object-server"))
    assert {f.what.split(":")[0] for f in errors(diagnose(proxy, obj))} == {
        "storlet_handler sits above iostack_select", "iostack sits above iostack_select"}


def test_swift_adds_what_is_missing_and_the_order_is_checked_after(broken):
    # Without copy in the pipeline Swift's proxy inserts it right after tempauth: above
    # the metric middleware, which then counts a COPY's sub-requests instead of the COPY.
    proxy, obj = broken(lambda c: set_pipeline(c["proxy"], [
        n for n in pipeline(c["proxy"]) if n != "copy"]))
    findings = diagnose(proxy, obj)
    assert any(f.level == "warning" and f.what.startswith("copy is not listed")
               for f in findings)
    assert {f.what.split(":")[0] for f in errors(findings)} == {
        "copy sits above iostack_metrics", "copy sits above iostack_qos",
        "copy sits above iostack_select", "copy sits above storlet_handler"}


def test_conf_d_directories_and_several_object_servers_are_reported_per_file(aio, tmp_path):
    swift_dir = tmp_path / "swift"
    proxy = read_conf(Path(aio["swift_dir"]) / "proxy-server.conf")
    iostack = ConfigParser(interpolation=None)
    iostack.optionxform = str
    for section in [s for s in proxy.sections() if s.startswith("filter:iostack")]:
        # DEFAULT's values show in every section: they stay in the first file only.
        iostack[section] = {k: v for k, v in proxy[section].items() if k not in proxy.defaults()}
        proxy.remove_section(section)
    write_conf(proxy, swift_dir / "proxy-server.conf.d" / "00-proxy.conf")
    write_conf(iostack, swift_dir / "proxy-server.conf.d" / "10-iostack.conf")
    good = read_conf(Path(aio["swift_dir"]) / "object-server.conf")
    write_conf(good, swift_dir / "object-server" / "1.conf")
    set_pipeline(good, [n for n in pipeline(good) if n != "iostack"])
    write_conf(good, swift_dir / "object-server" / "2.conf")
    proxies, objects = find_configs(str(swift_dir), "proxy"), find_configs(str(swift_dir),
                                                                            "object")
    assert proxies == [str(swift_dir / "proxy-server.conf.d")]
    assert objects == [str(swift_dir / "object-server" / n) for n in ("1.conf", "2.conf")]
    found = only_error(diagnose(proxies, objects), "no iostack_object middleware")
    assert found.where == f"{objects[1]} [pipeline:main]"


# -- required keys and values ----------------------------------------------------------------


def test_missing_redis_and_amqp_urls(broken):
    def drop(confs):
        del confs["proxy"]["filter:iostack"]["redis_url"]
        del confs["object"]["filter:iostack_metrics"]["amqp_url"]

    proxy, obj = broken(drop)
    found = errors(diagnose(proxy, obj))
    assert sorted((f.where, f.what.split(":")[0]) for f in found) == [
        (f"{obj[0]} [filter:iostack_metrics]", "amqp_url is not set"),
        (f"{proxy[0]} [filter:iostack]", "redis_url is not set"),
        ("proxies", "IOStack middlewares read different policy stores")]


def test_a_value_the_middleware_refuses(broken):
    def edit(confs):
        confs["proxy"]["filter:iostack_cache"]["validate"] = "sometimes"
        confs["object"]["filter:iostack_metrics"]["stage"] = "proxy"
        confs["proxy"]["filter:iostack"]["key_file"] = "/nonexistent/root.key"

    proxy, obj = broken(edit)
    found = errors(diagnose(proxy, obj))
    assert sorted(f.what for f in found) == [
        "stage = proxy in the object server's pipeline: its metrics would count as the "
        "proxies'",
        "the iostack_cache middleware refuses its config: iostack_cache: validate must be "
        "none or head, got 'sometimes'",
        "the iostack_proxy middleware refuses its config: key file /nonexistent/root.key "
        "does not exist (create it with iostack.filters.tenant_keys.create_key_file)"]


# -- services -----------------------------------------------------------------------------


def test_redis_url_without_password_or_with_a_wrong_one(aio, broken):
    parts = urlsplit(aio["redis_url"])
    host = parts.netloc.rpartition("@")[2]
    proxy, obj = broken(lambda c: set_in_readers(c["proxy"], "redis_url",
                                                 with_netloc(aio["redis_url"], host)))
    only_error(diagnose(proxy, obj), "Redis needs a password the URL does not give")
    proxy, obj = broken(lambda c: set_in_readers(
        c["proxy"], "redis_url", with_netloc(aio["redis_url"], f":wrong-{uuid.uuid4()}@{host}")))
    found = only_error(diagnose(proxy, obj), "Redis refuses the URL's credentials")
    assert "wrong-" not in found.where  # passwords are not printed


def test_a_redis_anyone_can_use(broken, redis_server):
    url = redis_server()
    proxy, obj = broken(lambda c: set_in_readers(c["proxy"], "redis_url", url))
    findings = diagnose(proxy, obj)
    assert {f.what for f in errors(findings)} >= {
        "anyone who reaches it can use it: the URL has no password"}
    assert any(f.level == "warning" and "keeps nothing across a restart" in f.what
               for f in findings)  # the fixture's Redis: save "", no appendonly
    allowed = diagnose(proxy, obj, allow_unauthenticated=True)
    assert not any("anyone who reaches it" in f.what for f in errors(allowed))
    assert any("allowed by --allow-unauthenticated-services" in f.what
               for f in allowed if f.level == "warning")


def test_a_policy_store_without_its_marker(broken):
    prefix = f"doctor-{uuid.uuid4().hex[:8]}:"
    proxy, obj = broken(lambda c: set_in_readers(c["proxy"], "key_prefix", prefix))
    found = only_error(diagnose(proxy, obj), f"the policy store has no marker ({prefix}marker)")
    assert "start the controller" in found.fix


def test_rabbitmq_unreachable_or_refusing_the_password(aio, broken):
    parts = urlsplit(aio["amqp_url"])
    user = parts.netloc.rpartition("@")[0].split(":")[0]
    dead = with_netloc(aio["amqp_url"], f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:"
                                         f"{free_port()}")
    wrong = with_netloc(aio["amqp_url"], f"{user}:wrong@{parts.netloc.rpartition('@')[2]}")
    for url, text in ((dead, "RabbitMQ does not answer"),
                      (wrong, "RabbitMQ refuses the URL's user or password")):
        def edit(confs, url=url):
            for kind in ("proxy", "object"):
                for section in confs[kind].sections():
                    if "amqp_url" in confs[kind][section]:
                        confs[kind][section]["amqp_url"] = url

        proxy, obj = broken(edit)
        found = only_error(diagnose(proxy, obj), text)
        assert found.where.endswith("and 2 more)")  # both proxy middlewares, the object's


def test_controller_unreachable_or_token_refused(aio, broken):
    proxies, objects = stack_configs(aio)
    found = only_error(diagnose(proxies, objects, f"http://127.0.0.1:{free_port()}", "x"),
                       "cannot reach the controller")
    assert "start the controller" in found.fix
    only_error(diagnose(proxies, objects, aio["controller_url"], "not-the-token-at-all"),
               "the token is refused")
