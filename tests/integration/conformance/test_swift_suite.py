"""Swift's own functional tests pass through IOStack, with policies on.

Swift's whole functional suite and both s3api suites (``swift_suite.SUITES``, from
the installed Swift version's source distribution) run against IOStack with no
policy, with ``SET COMPRESSION`` and with ``SET ENCRYPTION`` on the test
tenants, the three at once on accounts of their own. Every test passes or is
skipped for the reason the generated test.conf (or the suite itself) gives; a
failure message says whether plain Swift, run on the failed tests, fails it
too. ``make conformance`` runs the same from the command line.
"""

from __future__ import annotations

import pytest
import swift_suite

pytestmark = pytest.mark.integration


def test_swift_functional_suites_pass_through_iostack(tmp_path):
    baseline, runs = swift_suite.run(list(swift_suite.CONFIGS), swift_suite.SUITES,
                                     tmp_path / "run")
    swift_suite.report(baseline, runs)
    assert [o.name for o in runs] == [f"IOStack, {c}" for c in swift_suite.CONFIGS]
    for outcomes in runs:
        # 1285 pass on XFS devices with Swift 2.38.3; far fewer means the suite broke.
        assert outcomes.count("passed") >= 1000, f"{outcomes.name}: the suites did not run"
    caused = {o.name: sorted(swift_suite.caused_by_iostack(o, baseline)) for o in runs}
    assert caused == {o.name: [] for o in runs}, f"failing only through IOStack: {caused}"
    # What fails on plain Swift too is the environment's, and still a failure here.
    failed = {o.name: sorted(o.failed()) for o in runs}
    assert failed == {o.name: [] for o in runs}, \
        f"failing on plain Swift too: {[(t, baseline.results[t][1]) for t in baseline.failed()]}"
