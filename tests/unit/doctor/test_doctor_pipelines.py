"""The doctor's config loading and pipeline rules on hand-written configs (no services).

The integration tests (``tests/integration/doctor``) run the same checks on the
all-in-one's configs and broken copies of them, with the real services.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iostack.cli import main
from iostack.doctor import pipelines

PROXY = """\
[DEFAULT]
bind_port = 8080

[pipeline:main]
pipeline = catch_errors gatekeeper proxy-logging cache listing_formats s3api keystoneauth
    iostack_metrics iostack_qos iostack_select copy slo dlo versioned_writes symlink
    iostack iostack_cache proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:s3api]
use = egg:swift#s3api
[filter:keystoneauth]
use = egg:swift#keystoneauth
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
[filter:versioned_writes]
use = egg:swift#versioned_writes
[filter:symlink]
use = egg:swift#symlink
[filter:iostack_metrics]
use = egg:iostack#iostack_metrics
amqp_url = amqp://iostack:pw@10.0.0.2:5672/iostack
[filter:iostack_qos]
paste.filter_factory = iostack.swift_middleware.qos:filter_factory
amqp_url = amqp://iostack:pw@10.0.0.2:5672/iostack
redis_url = redis://:pw@10.0.0.1:6379/0
[filter:iostack_select]
use = egg:iostack#iostack_select
redis_url = redis://:pw@10.0.0.1:6379/0
[filter:iostack]
use = egg:iostack#iostack_proxy
redis_url = redis://:pw@10.0.0.1:6379/0
[filter:iostack_cache]
use = egg:iostack#iostack_cache
redis_url = redis://:pw@10.0.0.1:6379/0
cache_dir = /nonexistent/cache
"""


def write(tmp_path: Path, text: str, name: str = "proxy-server.conf") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_keystone_proxy_in_order_has_no_error(tmp_path):
    loaded = pipelines.load(write(tmp_path, PROXY), "proxy")
    # A paste.filter_factory line is recognised by its module, like an egg entry point.
    assert loaded.find("iostack_qos").section == "iostack_qos"
    assert loaded.added == []
    findings = pipelines.check(loaded)
    assert [f.level for f in findings if f.level != "ok"] == ["warning"]  # no key_file
    assert "no key_file" in findings[0].what


def test_swift_completes_the_pipeline_before_the_order_is_checked(tmp_path):
    text = PROXY.replace(" gatekeeper ", " ").replace(" copy ", " ")
    loaded = pipelines.load(write(tmp_path, text), "proxy")
    assert sorted(loaded.added) == ["copy", "gatekeeper"]
    # Swift puts gatekeeper right after catch_errors, copy right after keystoneauth.
    assert loaded.roles()[:2] == ["catch_errors", "gatekeeper"]
    assert loaded.roles()[loaded.roles().index("keystoneauth") + 1] == "copy"
    errors = [f.what.split(":")[0] for f in pipelines.check(loaded) if f.level == "error"]
    assert errors == ["copy sits above iostack_metrics", "copy sits above iostack_qos",
                      "copy sits above iostack_select"]


def test_an_auth_middleware_is_required(tmp_path):
    text = PROXY.replace(" keystoneauth\n", "\n")
    errors = [f for f in pipelines.check(pipelines.load(write(tmp_path, text), "proxy"))
              if f.level == "error"]
    assert [f.what.split(":")[0] for f in errors] == ["no auth middleware (tempauth or "
                                                      "keystoneauth)"]


@pytest.mark.parametrize(("text", "kind", "message"), [
    (None, "proxy", "does not exist"),
    ("[app:main]\nuse = egg:swift#proxy\n", "proxy", "has no [pipeline:main]"),
    (PROXY, "object", "runs egg:swift#proxy, not the object server"),
    (PROXY.replace("egg:iostack#iostack_select", "egg:iostack#iostack_selekt"), "proxy",
     "Swift cannot load"),
])
def test_configs_that_cannot_be_checked(tmp_path, text, kind, message):
    path = str(tmp_path / "missing.conf") if text is None else write(tmp_path, text)
    with pytest.raises(pipelines.ConfigLoadError, match=message.replace("[", r"\[")):
        pipelines.load(path, kind)


def test_nothing_to_check_exits_2(tmp_path, capsys):
    assert main(["doctor", "--swift-dir", str(tmp_path)]) == 2
    assert f"no proxy-server or object-server config under {tmp_path}" in capsys.readouterr().err


def test_with_no_arguments_and_no_stack_it_says_what_it_looked_for(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.setenv("IOSTACK_STATE_DIR", str(tmp_path))  # no aio.json there
    monkeypatch.setattr("iostack.doctor.cli.DEFAULT_SWIFT_DIR", str(tmp_path / "etc-swift"))
    assert main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert f"no proxy-server or object-server config under {tmp_path / 'etc-swift'} and no " \
           "all-in-one running" in err


def test_with_no_arguments_it_takes_the_stacks_swift_dirs_and_controller(tmp_path, monkeypatch):
    from iostack.doctor.cli import running_stack

    monkeypatch.setenv("IOSTACK_STATE_DIR", str(tmp_path))
    assert running_stack() == ([], None, None)
    (tmp_path / "aio.json").write_text(
        '{"swift_dir": "/s/etc", "controller_url": "http://127.0.0.1:9", "admin_token": "t",'
        ' "nodes": [{"swift_dir": "/s/node1"}, {"swift_dir": "/s/node2"}]}')
    assert running_stack() == (["/s/etc", "/s/node1", "/s/node2"], "http://127.0.0.1:9", "t")
