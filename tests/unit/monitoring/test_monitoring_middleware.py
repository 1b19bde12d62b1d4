"""The metric middleware counts tenants' requests and never waits for the broker."""

from __future__ import annotations

import io
import time

import pytest

from iostack.monitoring.bus import source_id
from iostack.monitoring.middleware import MetricsMiddleware, filter_factory


def app(env, start_response):
    body = env["wsgi.input"].read()
    start_response("200 OK", [("Content-Length", str(len(body) * 2))])
    return [body, body]


def call(mw, method: str, path: str, body: bytes = b"") -> bytes:
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(body)}
    result = mw(env, lambda status, headers: None)
    out = b"".join(result)
    if hasattr(result, "close"):
        result.close()
    return out


@pytest.fixture
def middleware():
    # Port 1 refuses connections: the broker is absent.
    mw = filter_factory({}, amqp_url="amqp://u:p@127.0.0.1:1/%2F", interval="60",
                        bind_ip="127.0.0.1", bind_port="8080")(app)
    return mw


def test_counts_per_account_and_container_with_bytes_each_way(middleware):
    assert call(middleware, "PUT", "/v1/AUTH_t1/logs/a", b"x" * 10) == b"x" * 20
    call(middleware, "GET", "/v1/AUTH_t1/logs/a")
    call(middleware, "HEAD", "/v1/AUTH_t2")
    call(middleware, "GET", "/info")
    call(middleware, "GET", "/auth/v1.0")
    samples = {(s["account"], s["container"]): s for s in middleware.reporter.window.flush()}
    assert set(samples) == {("AUTH_t1", "logs"), ("AUTH_t2", None)}
    t1 = samples[("AUTH_t1", "logs")]
    assert t1["ops"] == {"PUT": 1, "GET": 1}
    assert t1["bytes_in"] == 10 and t1["bytes_out"] == 20
    assert t1["active"] == 0 and t1["latency"]["PUT"]["count"] == 1


def test_a_request_is_active_until_its_body_is_closed(middleware):
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/v1/AUTH_t1/c/o", "wsgi.input": io.BytesIO()}
    body = middleware(env, lambda status, headers: None)
    assert middleware.reporter.window.flush()[0]["active"] == 1
    body.close()
    assert middleware.reporter.window.flush()[0]["ops"] == {"GET": 1}


def test_a_failing_application_still_ends_the_request(middleware):
    def broken(env, start_response):
        raise RuntimeError("boom")

    mw = MetricsMiddleware(broken, {"amqp_url": "amqp://u:p@127.0.0.1:1/%2F", "interval": 60})
    with pytest.raises(RuntimeError):
        mw({"REQUEST_METHOD": "PUT", "PATH_INFO": "/v1/AUTH_t1/c/o"}, None)
    (sample,) = mw.reporter.window.flush()
    assert sample["active"] == 0 and sample["ops"] == {"PUT": 1}


def test_object_servers_count_tenant_requests_not_replication(middleware):
    mw = MetricsMiddleware(app, {"stage": "object", "interval": 60,
                                 "amqp_url": "amqp://u:p@127.0.0.1:1/%2F"})
    call(mw, "PUT", "/d1/123/AUTH_t1/c/o", b"abc")
    call(mw, "REPLICATE", "/d1/123/abc")
    call(mw, "GET", "/d1/123")
    (sample,) = mw.reporter.window.flush()
    assert (sample["account"], sample["container"], sample["bytes_in"]) == ("AUTH_t1", "c", 3)


def test_an_absent_broker_costs_requests_nothing_and_losses_are_counted(middleware):
    reporter = middleware.reporter
    started = time.monotonic()
    for _ in range(200):
        call(middleware, "PUT", "/v1/AUTH_t1/c/o", b"x")
    assert time.monotonic() - started < 2.0
    for n in range(reporter.publisher.capacity + 5):
        reporter.flush(float(n))
    assert reporter.publisher.lost == 5
    assert reporter.publisher.pending == reporter.publisher.capacity
    assert reporter.source == source_id("proxy", {"bind_ip": "127.0.0.1", "bind_port": "8080"})


def test_bad_config_is_refused_at_start():
    with pytest.raises(ValueError, match="stage"):
        MetricsMiddleware(app, {"stage": "container"})
    with pytest.raises(ValueError, match="interval"):
        MetricsMiddleware(app, {"interval": "0"})


def test_a_request_ends_when_the_iterator_it_gave_is_closed(middleware):
    # proxy-logging iterates iter(body) and closes that iterator, not the body object.
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/v1/AUTH_t1/c/o", "wsgi.input": io.BytesIO()}
    iterator = iter(middleware(env, lambda status, headers: None))
    next(iterator)
    iterator.close()
    (sample,) = middleware.reporter.window.flush()
    assert sample["active"] == 0 and sample["ops"] == {"GET": 1}


def test_a_long_body_is_counted_a_mebibyte_at_a_time_and_exactly_at_the_end(middleware):
    piece = b"x" * 65536

    def streaming(env, start_response):
        start_response("200 OK", [])
        return iter([piece] * 40)  # 2.5 MiB

    mw = MetricsMiddleware(streaming, middleware.conf)
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": "/v1/AUTH_t1/c/o", "wsgi.input": io.BytesIO()}
    body = iter(mw(env, lambda status, headers: None))
    for _ in range(15):
        next(body)
    assert [sample["bytes_out"] for sample in mw.reporter.window.flush()] == [0]  # active only
    next(body)  # the 16th piece completes the first MiB: it reaches this interval
    assert mw.reporter.window.flush()[0]["bytes_out"] == 1 << 20
    rest = sum(len(chunk) for chunk in body)
    assert rest == 24 * 65536
    assert mw.reporter.window.flush()[0]["bytes_out"] == 24 * 65536  # the tail, at the end


def test_a_response_dropped_unread_and_unclosed_ends_the_request(middleware):
    """Regression: s3api's sub-requests (the segments container's PUT/HEAD during a
    multipart upload) look at the status and drop the body without reading or
    closing it; each left ACTIVE_REQUESTS one higher for good."""
    for method in ("PUT", "HEAD", "GET"):
        env = {"REQUEST_METHOD": method, "PATH_INFO": "/v1/AUTH_t3/x+segments",
               "wsgi.input": io.BytesIO()}
        body = middleware(env, lambda status, headers: None)
        assert middleware.reporter.window.flush()[0]["active"] == 1
        del body
    (sample,) = middleware.reporter.window.flush()
    assert sample["active"] == 0
