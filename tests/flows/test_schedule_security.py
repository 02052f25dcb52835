"""`tracelab schedule`'s Prefect server is the data directory's alone.

The real command starts its real server: a request without the data directory's credential is
refused, a page from another origin gets no CORS allowance, the credential works, and a run
created on the API with a parameter the command line would refuse fails before writing.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.flows.nightly import check_nightly_parameters, nightly_flow
from tracelab.flows.prefect_server import AUTH_FILE, auth_string, free_port

_FOREIGN = "http://evil.example"


def test_the_credential_is_made_once_private_and_replaced_when_others_could_read_it(
    tmp_path: Path,
) -> None:
    first = auth_string(tmp_path)
    path = tmp_path / AUTH_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    user, _, password = first.partition(":")
    assert user == "tracelab"
    assert len(password) >= 32
    assert auth_string(tmp_path) == first  # kept: the UI's saved login stays valid
    path.chmod(0o644)
    second = auth_string(tmp_path)
    assert second != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def _config(tmp_path: Path, text: str) -> str:
    path = tmp_path / "night.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _check(data: Path, **changes: Any) -> Any:
    params: dict[str, Any] = {
        "data_dir": str(data),
        "traces": ("google-2011",),
        "raw_dir": None,
        "lock_wait_seconds": 3600.0,
        "workers": 0,
        "dask_address": None,
        "config": None,
    }
    params.update(changes)
    return check_nightly_parameters(**params)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"data_dir": "/nonexistent/tracelab-data"}, "data_dir '/nonexistent/tracelab-data'"),
        ({"traces": ("google-2011", "google-2011")}, "at most once"),
        ({"traces": ("borg",)}, "traces ['borg']"),
        ({"traces": ()}, "traces []"),
        ({"traces": ("google-2011", "azure-2017"), "raw_dir": "/tmp"}, "exactly one trace"),
        ({"lock_wait_seconds": float("inf")}, "lock_wait_seconds"),
        ({"lock_wait_seconds": -1}, "lock_wait_seconds"),
        ({"workers": -2}, "workers"),
        ({"workers": 100_000}, "workers"),
        ({"dask_address": "tcp://h:1/../x y"}, "dask_address"),
    ],
)
def test_a_parameter_the_command_line_refuses_is_refused(
    tmp_path: Path, changes: dict[str, Any], named: str
) -> None:
    with pytest.raises(TracelabError, match=named.replace("[", r"\[").replace("]", r"\]")):
        _check(tmp_path, **changes)


def test_an_export_out_outside_the_data_directory_is_refused_inside_accepted(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "elsewhere" / "params.json"
    with pytest.raises(TracelabError, match="outside the data directory"):
        _check(data, config=_config(tmp_path, f'[export]\nout = "{outside}"\n'))
    # into a folder the data directory manages: refused as `export --out` refuses it
    with pytest.raises(TracelabError, match="which the data directory manages"):
        _check(data, config=_config(tmp_path, f'[export]\nout = "{data}/lake/p.json"\n'))
    # a symlink inside pointing out is the same as the path outside
    (data / "exports").mkdir()
    (data / "exports" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(TracelabError, match="outside the data directory"):
        _check(data, config=_config(tmp_path, f'[export]\nout = "{data}/exports/link/p.json"\n'))
    inside = data / "exports" / "night.json"
    options = _check(data, config=_config(tmp_path, f'[export]\nout = "{inside}"\n'))
    assert options["export"].out == str(inside)


def test_the_nightly_flow_refuses_a_bad_config_before_writing(
    prefect_harness: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "params.json"
    config = _config(tmp_path, f'[export]\nout = "{outside}"\n')
    with pytest.raises(TracelabError, match="outside the data directory"):
        nightly_flow(data_dir=str(data), traces=("google-2011",), config=config)
    assert not outside.exists()
    assert sorted(p.name for p in data.iterdir()) == []  # not even the lock file


def test_the_schedule_command_refuses_the_same_config_in_one_line(
    prefect_harness: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from prefect.settings import PREFECT_API_URL

    from tracelab.flows.cli import main

    monkeypatch.setenv("PREFECT_API_URL", str(PREFECT_API_URL.value()))
    config = _config(tmp_path, f'[export]\nout = "{tmp_path / "params.json"}"\n')
    argv = ["schedule", "--data", str(tmp_path / "data"), "--config", config, "--register-only"]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "[export] out" in err[0]
    assert "outside the data directory" in err[0]


_BUSY_RETRIES = 5


def _request(
    url: str,
    *,
    method: str = "GET",
    body: dict[str, Any] | None = None,
    credential: str | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    sent = dict(headers or {})
    if credential is not None:
        sent["Authorization"] = "Basic " + base64.b64encode(credential.encode()).decode()
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=sent)
    # the server answers 503 while its SQLite database is busy (a loaded machine); Prefect's own
    # client retries those, and so does this test
    for attempt in range(_BUSY_RETRIES + 1):
        try:
            with urllib.request.urlopen(request, timeout=20) as reply:
                raw = reply.read()
                is_json = reply.headers.get("content-type", "").startswith("application/json")
                return reply.status, dict(reply.headers), json.loads(raw) if is_json else raw
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or attempt == _BUSY_RETRIES:
                return exc.code, dict(exc.headers), exc.read()
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _outward_address() -> str | None:
    """The machine's address on its network (no packet is sent), or None without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") else address


def _wait(what: str, check: Any, process: subprocess.Popen[str], deadline_s: float) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            found = check()
        except OSError:  # the server is still starting
            found = None
        if found:
            return found
        time.sleep(2)
    raise AssertionError(f"{what}: not within {deadline_s:.0f} s")


@pytest.mark.slow
def test_the_schedule_server_answers_only_its_own_credential_and_origin(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")},
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_RUNNER_POLL_FREQUENCY": "2",
        # a user's settings that would open the server: the command's own win
        "PREFECT_SERVER_API_HOST": "0.0.0.0",
        "PREFECT_SERVER_CORS_ALLOWED_ORIGINS": "*",
        "PREFECT_SERVER_API_AUTH_STRING": "",
    }
    # once a year: the scheduler creates no run during the test, only the one made below
    command = [sys.executable, "-m", "tracelab.flows.cli", "schedule", "--data", str(data)]
    command += ["--trace", "google-2011", "--cron", "0 0 1 1 *", "--port", str(port)]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    root = f"http://127.0.0.1:{port}"
    api = f"{root}/api"
    try:
        credential = _wait(
            "the credential file",
            lambda: (data / AUTH_FILE).is_file() and (data / AUTH_FILE).read_text().strip(),
            process,
            60,
        )
        assert stat.S_IMODE((data / AUTH_FILE).stat().st_mode) == 0o600
        name = f"{api}/deployments/name/tracelab-nightly/nightly"
        deployment = _wait(
            "the registered deployment",
            lambda: (r := _request(name, credential=credential))[0] == 200 and r[2],
            process,
            300,
        )

        other = _outward_address()
        if other is not None:  # loopback only: the machine's network address does not answer
            with socket.socket() as s:
                s.settimeout(2)
                assert s.connect_ex((other, port)) != 0

        # no credential, a wrong one, or a broken header: refused
        assert _request(name)[0] == 401
        assert _request(name, credential="tracelab:guess")[0] == 401
        assert _request(name, headers={"Authorization": "Basic %%%"})[0] == 401
        create = f"{api}/deployments/{deployment['id']}/create_flow_run"
        assert _request(create, method="POST", body={})[0] == 401

        # a page on another origin: its preflight gets no allowance, nor does its request
        preflight = {
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        }
        status, headers, _ = _request(
            create, method="OPTIONS", headers={"Origin": _FOREIGN, **preflight}
        )
        assert status >= 400
        assert "access-control-allow-origin" not in {k.lower() for k in headers}
        status, headers, _ = _request(name, credential=credential, headers={"Origin": _FOREIGN})
        assert "access-control-allow-origin" not in {k.lower() for k in headers}
        # the server's own UI is allowed
        status, headers, _ = _request(
            create, method="OPTIONS", headers={"Origin": root, **preflight}
        )
        assert status == 200
        assert {k.lower(): v for k, v in headers.items()}["access-control-allow-origin"] == root

        # the credential works, and a run whose config writes outside the data directory
        # fails in the flow, before anything is written
        outside = tmp_path / "outside" / "params.json"
        config = tmp_path / "night.toml"
        config.write_text(f'[export]\nout = "{outside}"\n', encoding="utf-8")
        params = {**deployment["parameters"], "config": str(config)}
        status, _, run = _request(
            create, method="POST", body={"parameters": params}, credential=credential
        )
        assert status == 201, run

        def finished() -> dict[str, Any] | None:
            code, _, body = _request(f"{api}/flow_runs/{run['id']}", credential=credential)
            state = body["state"] if code == 200 else None
            return body if state and state["type"] in ("FAILED", "COMPLETED", "CRASHED") else None

        done = _wait("the run to finish", finished, process, 300)
        assert done["state"]["type"] == "FAILED"
        assert "outside the data directory" in done["state"]["message"]
        assert not outside.parent.exists()
        assert not (data / "raw").exists()  # the pipeline never started
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
