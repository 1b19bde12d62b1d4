"""The request view: names decoded once, where writes land, authorization first, memoized work."""

from __future__ import annotations

from swift.common.swob import HTTPForbidden, HTTPOk, Request

from iostack.filters.library import builtin_metadata
from iostack.monitoring.counters import Window
from iostack.monitoring.middleware import MetricsMiddleware
from iostack.policy.resolve import Level
from iostack.policy.view import ENV_KEY, view_for

FILTERS = {m.name: m for m in builtin_metadata()}


def put(path: str, **headers: str) -> dict:
    return Request.blank(path, environ={"REQUEST_METHOD": "PUT"}, headers=headers).environ


def test_names_are_decoded_once_and_tags_read():
    env = put("/v1/AUTH_t1/c%25x/%C3%A9t%C3%A9/a%2Fb", **{"Content-Length": "5",
                                                          "X-Object-Meta-Class": "hot"})
    view = view_for(env)
    assert (view.account, view.container, view.obj) == ("AUTH_t1", "c%x", "été/a/b")
    assert view.size == 5 and view.tags == {"class": "hot"}
    assert view_for(env) is view  # one view per environ
    assert view_for(dict(env)) is not view  # a copy is another request (copy's sink PUT)


def test_s3_parts_and_versions_land_under_the_origin_containers_policy():
    part = view_for(put("/v1/AUTH_t1/bkt+segments/dir/o.bin/UPLOADID/3"))
    assert part.policy_paths == (("bkt", "dir/o.bin"), ("bkt+segments", "dir/o.bin/UPLOADID/3"))
    marker = view_for(put("/v1/AUTH_t1/bkt+segments/o.bin/UPLOADID"))
    assert marker.policy_paths[0] == ("bkt", "o.bin")
    version = view_for(put("/v1/AUTH_t1/%00versions%00bkt/%00o%001234.5"))
    assert version.policy_paths == (("bkt", "o"), ("\x00versions\x00bkt", "\x00o\x001234.5"))
    plain = view_for(put("/v1/AUTH_t1/c/o"))
    assert plain.policy_paths == (("c", "o"),)


def test_legacy_versioning_copies_follow_the_transactions_write():
    origin = put("/v1/AUTH_t1/docs/report")
    origin["swift.trans_id"] = "tx1"
    keep = view_for(origin)  # noqa: F841 - alive while its request is
    archive = put("/v1/AUTH_t1/archive/006report/1234")
    archive.update({"swift.trans_id": "tx1", "swift.source": "VW"})
    assert view_for(archive).policy_paths[0] == ("docs", "report")
    other = put("/v1/AUTH_t1/archive/006report/1234")
    other.update({"swift.trans_id": "tx2", "swift.source": "VW"})
    assert view_for(other).policy_paths == (("archive", "006report/1234"),)


class FakeSwift:
    """Answers container info (with an ACL) and records what reached it."""

    def __init__(self, read_acl: str | None = None) -> None:
        self.read_acl = read_acl
        self.calls: list[tuple[str, str]] = []
        self.views: list = []

    def __call__(self, env, start_response):
        self.calls.append((env["REQUEST_METHOD"], env["PATH_INFO"]))
        self.views.append(env.get(ENV_KEY))
        headers = {"X-Container-Read": self.read_acl} if self.read_acl else {}
        if env["REQUEST_METHOD"] == "HEAD" and env["PATH_INFO"].endswith("/o"):
            headers = {"Content-Length": "5000", "Content-Type": "text/csv",
                       "X-Object-Meta-Class": "hot"}
        return HTTPOk(headers=headers)(env, start_response)


def authorize_only(owner_acl: str):
    def authorize(req):
        return None if getattr(req, "acl", None) == owner_acl else HTTPForbidden(request=req)
    return authorize


def test_authorization_is_asked_once_with_the_containers_acl():
    app = FakeSwift(read_acl=".r:*")
    env = Request.blank("/v1/AUTH_t1/c/o").environ
    env["swift.authorize"] = authorize_only(".r:*")
    view = view_for(env, app)
    assert view.authorized()
    assert ("HEAD", "/v1/AUTH_t1/c") in app.calls  # the container's info, for its ACL
    asked = len(app.calls)
    assert view.authorized() and len(app.calls) == asked  # memoized
    denied = Request.blank("/v1/AUTH_t1/c/o").environ
    denied["swift.authorize"] = authorize_only("t1:user")
    assert not view_for(denied, FakeSwift()).authorized()


class CountingReader:
    def __init__(self, levels):
        self.levels = levels
        self.calls = 0

    def lookup(self, _info):
        self.calls += 1
        return self.levels, FILTERS, {}


def size_rule(filter_name: str) -> Level:
    return Level("container", "AUTH_t1/c", ({
        "id": "P1.1", "policy": "P1", "seq": 1, "verb": "set", "filter": filter_name,
        "params": {"ops": 5}, "object_conds": [{"kind": "size", "op": ">", "value": 1024}]},))


def test_get_conditions_read_the_stored_objects_attributes_once():
    app = FakeSwift()
    env = Request.blank("/v1/AUTH_t1/c/o").environ
    view = view_for(env, app)
    reader = CountingReader([size_rule("bandwidth")])
    assert [e.filter for e in view.resolution(reader).pipeline] == ["bandwidth"]
    assert [e.filter for e in view.resolution(reader).pipeline] == ["bandwidth"]
    assert reader.calls == 1
    assert app.calls == [("HEAD", "/v1/AUTH_t1/c/o")]
    assert view.size == 5000 and view.tags == {"class": "hot"}



def test_get_conditions_of_a_version_read_that_version():
    app = FakeSwift()
    queries = []

    def recording(env, start_response):
        queries.append(env["QUERY_STRING"])
        return app(env, start_response)

    env = Request.blank("/v1/AUTH_t1/c/o?version-id=17.5&iostack-filter=csv_select").environ
    view = view_for(env, recording)
    view.resolution(CountingReader([size_rule("bandwidth")]))
    # The version asked for, and nothing else of the client's query.
    assert app.calls == [("HEAD", "/v1/AUTH_t1/c/o")] and queries == ["version-id=17.5"]

def test_no_head_without_attribute_conditions():
    app = FakeSwift()
    view = view_for(Request.blank("/v1/AUTH_t1/c/o").environ, app)
    view.resolution(CountingReader([]))
    assert app.calls == []


def test_iostacks_own_head_is_internal():
    app = FakeSwift()
    view = view_for(Request.blank("/v1/AUTH_t1/c/o").environ, app)
    view.resolution(CountingReader([size_rule("bandwidth")]))
    # The HEAD carried an internal view: metering, QoS and select pass it by.
    (head_view,) = app.views
    assert head_view.internal and head_view.authorized()


def test_metrics_count_only_authorized_requests():
    app = FakeSwift()
    metrics = MetricsMiddleware(app, {"amqp_url": "amqp://127.0.0.1:1/%2F"})
    window = Window()
    metrics._reporter.get = lambda: type("R", (), {"window": window})()
    for owner in ("someone-else", None):
        env = Request.blank("/v1/AUTH_t1/c/o").environ
        if owner:
            env["swift.authorize"] = authorize_only(owner)
        b"".join(metrics(env, lambda *a: None))
    samples = window.flush()
    assert [(s["account"], s["ops"]) for s in samples] == [("AUTH_t1", {"GET": 1})]


def test_a_windows_targets_are_capped():
    window = Window(max_targets=2)
    assert window.started(("a", "c1")) and window.started(("a", "c2"))
    assert not window.started(("a", "c3"))
    assert window.started(("a", "c1"))  # known targets still count
    assert window.untracked == 1
    assert len(window.flush()) == 2 and window.untracked == 0
