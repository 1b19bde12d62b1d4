"""ACTIVE_REQUESTS returns to zero after every request path on the real
all-in-one (proxy metric middleware -> RabbitMQ -> controller aggregator)."""

from __future__ import annotations

import io
import time
import uuid

import pytest
from boto3.s3.transfer import TransferConfig

pytestmark = pytest.mark.integration
MIB = 1 << 20


@pytest.fixture
def s3(s3_for):
    return s3_for("t3")


def active(client, target: str) -> list[int]:
    return [v["value"] for v in client.metric_series("ACTIVE_REQUESTS", target,
                                                     last=3)["values"]]


def test_active_requests_return_to_zero_after_an_s3_multipart_upload(aio, policies, s3):
    """Regression: s3api's sub-requests (the segments container's PUT and HEAD,
    ...) dropped their response bodies without closing them, so the gauge for
    AUTH_t3/<bucket>+segments stayed up forever (7 after one upload) and a
    ``WHEN ACTIVE_REQUESTS > N`` policy would have stayed enforced for good."""
    bucket = f"mpu-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.upload_fileobj(io.BytesIO(b"m" * (11 * MIB)), bucket, "big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MIB,
                                            multipart_chunksize=5 * MIB))
    s3.copy_object(Bucket=bucket, Key="copy.bin", CopySource={"Bucket": bucket,
                                                                "Key": "big.bin"})
    s3.list_objects_v2(Bucket=bucket)
    targets = [f"AUTH_t3/{bucket}", f"AUTH_t3/{bucket}+segments", "AUTH_t3"]
    seen: dict[str, list[int]] = {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        seen = {t: active(policies.client, t) for t in targets}
        if all(values and values[-1] == 0 for values in seen.values()) and \
                seen[f"AUTH_t3/{bucket}+segments"]:
            break
        time.sleep(1)
    assert seen[f"AUTH_t3/{bucket}+segments"], "no sample for the segments container"
    assert all(values[-1] == 0 for values in seen.values()), seen
