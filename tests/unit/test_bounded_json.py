"""bounded_json: untrusted JSON with a nesting bound, as a ValueError."""

from __future__ import annotations

import json

import pytest

from iostack import bounded_json
from iostack.block_bridge.rpc import PARSE_ERROR, Dispatcher


@pytest.mark.parametrize("body", [
    b"[" * 200_000,                                    # RecursionError in json.loads
    b"[" * 33 + b"]" * 33,                            # parses, one level too deep
    json.dumps({"a": [{"b": json.loads("[" * 30 + "]" * 30)}]}),   # 33 levels in all
])
def test_too_deep_is_a_value_error(body):
    with pytest.raises(bounded_json.TooDeep, match="nested deeper than 32 levels"):
        bounded_json.loads(body)


@pytest.mark.parametrize("body", [b"[" * 32 + b"]" * 32, b'{"a": {"b": [1, 2]}}', b"3",
                                  b'"s"', b"[]", b"{}"])
def test_within_the_bound_parses_as_json_does(body):
    assert bounded_json.loads(body) == json.loads(body)


def test_rpc_answers_a_parse_error_for_a_deep_body():
    """Security regression: the dispatcher let RecursionError out (the HTTP
    handler then dropped the connection without an answer)."""
    dispatcher = Dispatcher({"ping": lambda params: "pong"})
    for body in (b"[" * 500_000, b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": '
                 + b'{"a":' * 600 + b"1" + b"}" * 600 + b"}"):
        reply = dispatcher.handle(body)
        assert reply["error"]["code"] == PARSE_ERROR
        assert "nested deeper than 32 levels" in reply["error"]["message"]
    assert dispatcher.handle(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')["result"] == "pong"
