"""Static validation of Python storlets before deployment (the code is parsed, never run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iostack.filters.metadata import Param
from iostack.storlet_runtime.host.deploy import (
    MAX_STORLET_BYTES,
    StorletValidationError,
    check_python_storlet,
    sdk_declaration,
)
from iostack.storlet_runtime.storlets import upper
from iostack.storlet_runtime.tools.cli import (
    declared_params,
    filter_metadata,
    parse_param,
    prepare_upload,
)

GOOD = b"class Shout:\n    def __init__(self, logger):\n        pass\n\n" \
       b"    def __call__(self, in_files, out_files, params):\n        pass\n"


def test_shipped_storlet_is_valid():
    code = Path(upper.__file__).read_bytes()
    storlet = check_python_storlet("upper.py", code)
    assert storlet.main == "upper.UpperStorlet"
    assert storlet.headers["X-Object-Meta-Storlet-Main"] == "upper.UpperStorlet"
    assert storlet.headers["X-Object-Meta-Storlet-Language"] == "Python"


def test_main_is_inferred_or_checked():
    assert check_python_storlet("shout.py", GOOD).main == "shout.Shout"
    assert check_python_storlet("shout.py", GOOD, "shout.Shout").main == "shout.Shout"


@pytest.mark.parametrize(("name", "code", "main", "message"), [
    ("shout.txt", GOOD, None, "must be a Python module name"),
    ("my-shout.py", GOOD, None, "must be a Python module name"),
    ("shout.py", b"class Shout(:\n", None, r"shout.py:1:\d+: syntax error"),
    ("shout.py", b"\xff\xfe", None, "not UTF-8"),
    ("shout.py", GOOD, "other.Shout", "must be <module>.<Class>"),
    ("shout.py", GOOD, "shout.sub.Shout", "must be <module>.<Class>"),
    ("shout.py", GOOD, "shout.Missing", "no top-level class 'Missing'"),
    ("shout.py", b"class A:\n    pass\n", None, "classes with __call__: none"),
    ("shout.py", GOOD + GOOD.replace(b"Shout", b"Whisper"), None, "Shout, Whisper"),
    ("shout.py", b"#" * (MAX_STORLET_BYTES + 1), None, "larger than"),
])
def test_refusals_say_why(name, code, main, message):
    with pytest.raises(StorletValidationError, match=message):
        check_python_storlet(name, code, main)


def test_code_is_not_executed(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()\n".encode() + GOOD
    check_python_storlet("shout.py", code)
    assert not marker.exists()


def test_an_uploads_declared_parameters_are_parsed_and_bad_ones_named():
    assert parse_param("by:int:0..255=1") == Param("by", "int", default="1", minimum=0,
                                                   maximum=255)
    assert parse_param("prefix:str") == Param("prefix", "str")
    for bad, why in (("by", "NAME:TYPE"), ("by:number", "unknown type"),
                     ("By:int", "NAME:TYPE")):
        with pytest.raises(StorletValidationError, match=why):
            parse_param(bad)


SDK_FILTER = b'''from iostack.storlet_runtime.sdk import Filter


class Xor(Filter):
    params = ("key:int:0..255=90", "label:str")
    changes_size = False
    stages = ("object",)

    def encode(self, chunks, params):
        yield from chunks
'''


def test_an_sdk_filter_is_a_storlet_and_its_declaration_is_read_without_running_it(tmp_path):
    for code in (SDK_FILTER,
                 SDK_FILTER.replace(b"from iostack.storlet_runtime.sdk import Filter",
                                    b"from iostack.storlet_runtime import sdk")
                 .replace(b"(Filter)", b"(sdk.Filter)")):
        storlet = check_python_storlet("xor.py", code)
        assert storlet.main == "xor.Xor"
        assert sdk_declaration(code, storlet.main) == {
            "params": ("key:int:0..255=90", "label:str"), "changes_size": False,
            "stages": ("object",)}
    # Another module's Filter is not the SDK's: it has no __call__ of its own.
    with pytest.raises(StorletValidationError, match="classes with __call__: none"):
        check_python_storlet("xor.py", SDK_FILTER.replace(b"iostack.storlet_runtime.sdk",
                                                          b"elsewhere"))
    marker = tmp_path / "ran"
    code = SDK_FILTER.replace(b'stages = ("object",)',
                              f'stages = open({str(marker)!r}, "w")'.encode())
    with pytest.raises(StorletValidationError, match=r"Xor.stages \(line 7\): must be written "
                                                     "as a literal tuple of strings"):
        sdk_declaration(code, "xor.Xor")
    assert not marker.exists()
    with pytest.raises(StorletValidationError, match="changes_size.*True or False"):
        sdk_declaration(SDK_FILTER.replace(b"= False", b'= "no"'), "xor.Xor")


def test_declared_parameters_are_registered_and_a_param_option_replaces_one(tmp_path):
    declared = {"params": ("key:int:0..255=90", "label:str")}
    assert declared_params(declared, ["key:int:0..15=3", "extra:bool"]) == (
        Param("key", "int", default="3", minimum=0, maximum=15), Param("label", "str"),
        Param("extra", "bool"))
    (tmp_path / "xor.py").write_bytes(SDK_FILTER)
    storlet, found = prepare_upload(tmp_path / "xor.py", "txor", None)
    meta = filter_metadata("txor", storlet, "xor.py", "AUTH_t1",
                           declared_params(found, []), found)
    assert (meta.stages, meta.default_stage, meta.changes_size) == ({"object"}, "object", False)
    assert meta.params[0] == Param("key", "int", default="90", minimum=0, maximum=255)
    with pytest.raises(StorletValidationError, match="stages disk: a filter runs on"):
        filter_metadata("txor", storlet, "xor.py", declared={"stages": ("disk",)})
