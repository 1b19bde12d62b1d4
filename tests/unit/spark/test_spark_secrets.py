"""Client settings never show a key or token in their repr (logs, tracebacks, Spark UIs)."""

from __future__ import annotations

from dataclasses import asdict

from iostack.select_client import Account
from iostack.spark.options import Settings


def test_reprs_hold_no_key_or_token_yet_the_values_are_kept():
    account = Account(auth_url="http://127.0.0.1:8080/auth/v1.0", user="t1:user",
                      key="k3y-s3cret", token="AUTH_tk-s3cret")
    settings = Settings.from_options({"container": "logs", "user": "t1:user",
                                      "auth_url": "http://127.0.0.1:8080/auth/v1.0",
                                      "key": "k3y-s3cret", "token": "AUTH_tk-s3cret",
                                      "storage_url": "http://127.0.0.1:8080/v1/AUTH_t1"})
    for value in (account, settings):
        shown = repr(value)
        assert "s3cret" not in shown and "t1:user" in shown
        fields = asdict(value)  # the values are kept, only not shown
        assert (fields["key"], fields["token"]) == ("k3y-s3cret", "AUTH_tk-s3cret")
