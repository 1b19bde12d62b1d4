"""The conformance runner's own logic, without a stack: test ids and per-run accounts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import swift_suite


def test_junit_names_become_pytest_ids_that_can_be_run_again(tmp_path):
    (tmp_path / "test" / "functional" / "s3api").mkdir(parents=True)
    (tmp_path / "test" / "functional" / "tests.py").touch()
    (tmp_path / "test" / "functional" / "s3api" / "test_object.py").touch()
    suite = ET.Element("testsuite")
    for classname, name, outcome in [
            ("test.functional.tests.TestFile", "testBadHeaders", "failure"),
            ("test.functional.s3api.test_object.TestS3ApiObject", "test_put[v4]", "skipped"),
            ("test.functional.tests.TestFileUTF8", "testCopy", None)]:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name)
        if outcome:
            ET.SubElement(case, outcome, message=f"{name} {outcome}")
    report = tmp_path / "report.xml"
    ET.ElementTree(suite).write(report)
    outcomes = swift_suite.read_junit(report, "IOStack, none", tmp_path)
    assert outcomes.results == {
        "test/functional/tests.py::TestFile::testBadHeaders":
            ("failed", "testBadHeaders failure"),
        "test/functional/s3api/test_object.py::TestS3ApiObject::test_put[v4]":
            ("skipped", "test_put[v4] skipped"),
        "test/functional/tests.py::TestFileUTF8::testCopy": ("passed", ""),
    }
    assert outcomes.failed() == {"test/functional/tests.py::TestFile::testBadHeaders"}


def test_each_configuration_has_accounts_and_users_of_its_own():
    users = {c: swift_suite.Accounts.of(c).users() for c in [*swift_suite.CONFIGS, "plain"]}
    accounts = [{account for account, _, _ in u} for u in users.values()]
    assert all(len(a) == 3 for a in accounts)
    assert len(set().union(*accounts)) == 3 * len(users)
    # tempauth reads user_<account>_<user>: no underscore in an account name.
    assert not any("_" in a for a in set().union(*accounts))
    compression = swift_suite.Accounts.of("compression")
    assert compression.admin("compression") == "compression:tester"
    assert compression.admin("compression2") == "compression2:tester2"
    conf = swift_suite.test_conf("http://127.0.0.1:1",
                                 {f"{a}:{u}": "k" for a, u, _ in compression.users()}, compression)
    assert "account = compression\n" in conf and "account2 = compression2\n" in conf
    assert "s3_access_key = compression:tester\n" in conf
