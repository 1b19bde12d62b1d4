"""A private server that exits while booting is started once more, and its first log kept."""

from __future__ import annotations

import pytest

from iostack.aio.processes import ProcessManager
from iostack.aio.services import ServiceInfo, Services
from iostack.service_probes import redis_answers

pytestmark = pytest.mark.integration


def test_a_server_that_exits_during_boot_is_started_again(tmp_path):
    services = Services(tmp_path, ProcessManager(tmp_path), timeout=20)
    real_start = services._start_redis
    attempts = []

    def flaky_start() -> ServiceInfo:
        attempts.append(1)
        if len(attempts) == 1:  # a server that dies at once, like a broker that lost a race
            services.processes.start("redis", ["sh", "-c", "echo boom; exit 1"])
            services._starting["redis"] = lambda: False
            return ServiceInfo(url="redis://:x@127.0.0.1:1/0", private=True, port=1)
        return real_start()

    services._start_redis = flaky_start
    try:
        info = services.ensure("redis", "")
        assert len(attempts) == 2
        assert redis_answers(info.url)
        failed = services.processes.log_file("redis").with_name("redis.log.failed")
        assert "boom" in failed.read_text()
    finally:
        services.stop_private()
