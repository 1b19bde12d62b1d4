"""``iostack block`` verbs that need no service."""

from __future__ import annotations

import argparse

from iostack.block_bridge.cli import register


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="iostack")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_validate_reports_ok_and_the_reason(native_build, capsys):
    assert run(["block", "validate", "xor(key=0x5a)>bitrev"]) == 0
    assert capsys.readouterr().out == "ok\n"
    assert run(["block", "validate", "xor(key=0x5a)>nosuch"]) == 1
    assert "unknown filter 'nosuch'" in capsys.readouterr().err


def test_filters_lists_every_block_filter(native_build, capsys):
    assert run(["block", "filters"]) == 0
    out = capsys.readouterr().out
    for name in ("nop", "xor", "bitrev", "aes_xts", "iops", "bw", "ccache", "dcache",
                 "prefetch"):
        assert f"\n{name} " in "\n" + out
    assert "key=<required>" in out
