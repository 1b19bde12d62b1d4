"""Swift's own functional tests pass through IOStack, with policies on (a bounded selection).

``swift_suite.QUICK_SELECTION`` of Swift's functional and s3api suites (object
framing and limits, ETag, Range and conditional requests, copies, versioned
writes with their ACLs, S3 input errors and objects) runs against plain Swift and
against IOStack with no policy, with ``SET COMPRESSION`` and with ``SET
ENCRYPTION`` on the test tenants. Every selected test passes (or is skipped
for the reason the generated test.conf gives) in every configuration; a
failure message says whether plain Swift fails it too. ``make conformance``
runs the whole suites the same way.
"""

from __future__ import annotations

import pytest
import swift_suite

pytestmark = pytest.mark.integration


def test_swift_functional_selection_passes_through_iostack(tmp_path):
    baseline, runs = swift_suite.run(list(swift_suite.CONFIGS), swift_suite.QUICK_SELECTION,
                                     tmp_path / "run")
    swift_suite.report(baseline, runs)
    assert [o.name for o in runs] == [f"IOStack, {c}" for c in swift_suite.CONFIGS]
    for outcomes in [baseline, *runs]:
        assert outcomes.count("passed") >= 60, f"{outcomes.name}: the selection did not run"
    caused = {o.name: sorted(swift_suite.caused_by_iostack(o, baseline)) for o in runs}
    assert caused == {o.name: [] for o in runs}, f"failing only through IOStack: {caused}"
    # The selection holds on plain Swift here too: a failure there is the environment's.
    assert sorted(baseline.failed()) == [], \
        f"plain Swift fails: {[(t, baseline.results[t][1]) for t in baseline.failed()]}"
