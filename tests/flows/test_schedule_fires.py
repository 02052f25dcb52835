"""`tracelab schedule` end to end: a real local Prefect server's scheduler creates the run.

No harness: the command starts its own persistent server on loopback (database under the data
directory), registers the deployment with a short interval and serves it; the test watches the
API until a run that the *scheduler* created (``auto_scheduled``) has completed, checks the
pipeline's outputs on disk, then stops the command with SIGTERM and checks the server went too.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.prefect_server import AUTH_FILE, free_port

_DEADLINE_S = 600


def _completed_scheduled_runs(api: str, data: Path) -> list[dict[str, Any]]:
    # top-level runs only (the pipeline's subflows are runs too), completed ones
    body = json.dumps(
        {
            "limit": 20,
            "flow_runs": {
                "parent_task_run_id": {"is_null_": True},
                "state": {"type": {"any_": ["COMPLETED"]}},
            },
        }
    ).encode()
    # the server answers only with the data directory's credential
    credential = base64.b64encode((data / AUTH_FILE).read_bytes().strip()).decode()
    headers = {"Content-Type": "application/json", "Authorization": f"Basic {credential}"}
    request = urllib.request.Request(f"{api}/flow_runs/filter", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as reply:
        runs: list[dict[str, Any]] = json.loads(reply.read())
    return [r for r in runs if r.get("auto_scheduled")]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_the_scheduler_creates_and_completes_a_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    generate_trace("google-2011", data / "raw" / "google-2011", seed=2, scale="tiny")
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")},
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        # the scheduler looks for due runs every 2 s and the runner polls every 2 s
        "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "2",
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
    }
    command = [sys.executable, "-m", "tracelab.flows.cli", "schedule", "--data", str(data)]
    command += ["--trace", "google-2011", "--interval", "45", "--port", str(port)]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    api = f"http://127.0.0.1:{port}/api"
    try:
        done: list[dict[str, Any]] = []
        deadline = time.monotonic() + _DEADLINE_S
        while not done and time.monotonic() < deadline:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            time.sleep(3)
            try:
                done = _completed_scheduled_runs(api, data)
            except OSError:
                continue  # the server is still starting (or its credential not yet made)
        assert done, "no scheduled run completed in time"
        assert done[0]["name"].startswith("tracelab-nightly ")
        assert (data / "exports" / "params.json").is_file()
        assert (data / "site" / "index.html").is_file()
        assert (data / "prefect" / "prefect.db").is_file()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    deadline = time.monotonic() + 30
    while _port_open(port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _port_open(port), "the Prefect server outlived `tracelab schedule`"
