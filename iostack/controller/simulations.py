"""Simulation jobs behind ``/v1/simulate``: ``iostack policy simulate`` run for the API.

A simulation lists every object a policy's targets hold and reads a sample
of them: minutes on a big container, so the API never answers it within one
request. ``POST /v1/simulate`` starts a job and answers ``202`` with its id;
``GET /v1/simulate/<job>`` answers its ``state`` (``running``, ``done``,
``failed``), its latest ``progress`` (``listed 5000 objects: ...``) and, once
done, the ``result`` (the CLI's ``--json``: ``objects``, ``bytes``,
``projected_stored_bytes``, ``changed_objects``...).

A job is the CLI's ``policy simulate --json`` as a program of its own (it
reads Swift through an internal client: the controller's process never
imports Swift), given this controller's URL, the Swift config dir (config
key ``swift_dir``; without it the route answers 503) and, in its
environment (never on its command line), the admin token. Its progress
lines come on its standard error.

Bounds: at most ``MAX_RUNNING`` jobs at once (429 beyond), the newest
``MAX_KEPT`` finished jobs are kept (in memory: a restarted controller
forgets them), and each job only its owner (the account of the tenant who
started it, or the administrators) can read.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

MAX_RUNNING = 2
MAX_KEPT = 20
PROGRESS_LINE = 400  # characters kept of a progress line


class SimulationError(Exception):
    """A job cannot be started or read; ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Job:
    """One running (or finished) ``policy simulate``."""

    def __init__(self, owner: str | None, argv: list[str], env: dict[str, str]) -> None:
        self.id = secrets.token_hex(8)
        self.owner = owner  # None: an administrator's
        self.started = time.time()
        self.progress = ""
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.finished: float | None = None
        self._stdout = self._last_stderr = ""
        self.proc = subprocess.Popen(  # noqa: S603 - this interpreter, the CLI, no shell
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        readers = (threading.Thread(target=self._read_progress, daemon=True),
                   threading.Thread(target=self._read_result, daemon=True))
        for reader in readers:
            reader.start()
        threading.Thread(target=self._wait, args=(readers,), daemon=True).start()

    def _read_progress(self) -> None:
        for line in self.proc.stderr:
            if line.strip():
                self.progress = self._last_stderr = line.strip()[:PROGRESS_LINE]

    def _read_result(self) -> None:
        self._stdout = self.proc.stdout.read()

    def _wait(self, readers: tuple[threading.Thread, ...]) -> None:
        status = self.proc.wait()
        for reader in readers:
            reader.join()
        try:
            result = json.loads(self._stdout) if status == 0 else None
        except ValueError:
            result = None
        if result is None:
            self.error = self._last_stderr or f"exited with status {status}"
        self.result = result
        self.finished = time.time()

    @property
    def state(self) -> str:
        if self.finished is None:
            return "running"
        return "done" if self.result is not None else "failed"

    def to_json(self) -> dict[str, Any]:
        answer = {"job": self.id, "state": self.state, "progress": self.progress,
                  "started": self.started, "finished": self.finished}
        if self.result is not None:
            answer["result"] = self.result
        if self.error is not None:
            answer["error"] = self.error
        return answer


class Simulations:
    """The jobs of one controller."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.swift_dir = config.get("swift_dir")
        self.url = f"http://{config['host']}:{config['port']}"
        self.token = config["admin_token"]
        self.jobs: OrderedDict[str, Job] = OrderedDict()
        self.lock = threading.Lock()

    def start(self, owner: str | None, options: dict[str, Any]) -> Job:
        """Start ``policy simulate`` with ``options``: ``text`` or ``id``, ``limit``, ``sample``,
        ``now`` (already checked)."""
        if not self.swift_dir:
            raise SimulationError("this controller has no swift_dir configured: it cannot read "
                                  "the stored objects", 503)
        argv = [sys.executable, "-m", "iostack.cli", "policy", "simulate", "--json",
                "--url", self.url, "--swift-dir", str(self.swift_dir)]
        if "id" in options:
            argv += ["--id", options["id"]]
        for key, flag in (("limit", "--limit"), ("sample", "--sample"), ("now", "--now")):
            if options.get(key) is not None:
                argv += [flag, str(options[key])]
        if "text" in options:
            argv += ["--", options["text"]]
        env = {**os.environ, "IOSTACK_TOKEN": self.token}
        with self.lock:
            if sum(job.state == "running" for job in self.jobs.values()) >= MAX_RUNNING:
                raise SimulationError(f"{MAX_RUNNING} simulations are running: try again "
                                      "when one is done", 429)
            job = Job(owner, argv, env)
            self.jobs[job.id] = job
            finished = [key for key, kept in self.jobs.items() if kept.state != "running"]
            for key in finished[:max(0, len(finished) - MAX_KEPT)]:
                del self.jobs[key]
        return job

    def get(self, job_id: str, owner: str | None, admin: bool) -> Job:
        job = self.jobs.get(job_id)
        if job is None or not (admin or job.owner == owner):
            raise SimulationError(f"no simulation {job_id!r}", 404)
        return job
