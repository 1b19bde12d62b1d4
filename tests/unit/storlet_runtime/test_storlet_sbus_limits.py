"""Measuring SBus execute messages before they reach a sandbox.

Storlets' request classes live in modules that monkey-patch the whole process
with eventlet on import, so a plain stand-in with the same attributes is used.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from iostack.storlet_runtime.host.sbus_limits import (
    SBUS_HEADER,
    SBUS_MAX_MESSAGE,
    execute_message_size,
)


def request(params, metadata, range_start=None, range_end=None):
    return SimpleNamespace(
        params=params, data=SimpleNamespace(user_metadata=metadata), extra_data_list=[],
        start=range_start, end=range_end, has_range=range_start is not None)


def test_size_grows_with_parameters_and_metadata_byte_for_byte():
    base = execute_message_size(request({"a": "b"}, {}), "/var/lib/storlets/upper.UpperStorlet")
    assert SBUS_HEADER < base < 1000
    longer = execute_message_size(request({"a": "b" * 100}, {}),
                                  "/var/lib/storlets/upper.UpperStorlet")
    assert longer - base == 99
    with_md = execute_message_size(request({"a": "b"}, {"Color": "x" * 50}),
                                   "/var/lib/storlets/upper.UpperStorlet")
    assert with_md - base == len(json.dumps({"Color": "x" * 50})) - len("{}")


def test_unicode_counts_in_bytes():
    ascii_size = execute_message_size(request({"p": "a" * 10}, {}), "/x")
    # json.dumps escapes non-ASCII as \\uXXXX: six bytes per character.
    assert execute_message_size(request({"p": "\u00e9" * 10}, {}), "/x") == ascii_size + 50


def test_range_is_part_of_the_message():
    plain = execute_message_size(request({}, {}), "/x")
    ranged = execute_message_size(request({}, {}, range_start=0, range_end=9), "/x")
    assert ranged > plain


def test_huge_parameter_exceeds_the_limit():
    assert execute_message_size(request({"p": "x" * SBUS_MAX_MESSAGE}, {}), "/x") > \
        SBUS_MAX_MESSAGE
