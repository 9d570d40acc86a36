"""Fixtures for browser tests: a JupyterLab server and headless Debian Chromium.

The server runs from this virtual environment on a free loopback port with a token, and
every Jupyter/IPython directory lives under the test's temporary directory, so nothing is
written in the home directory. Its ``python3`` kernel is this interpreter. Chromium is
Debian's (``apt-get install -y chromium``), driven by the ``playwright`` package; no
browser is downloaded.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START = 90.0  # seconds for jupyter lab to answer
SHUTDOWN = 30.0


@dataclass(frozen=True)
class LabServer:
    """A running JupyterLab: where it listens, its token, and the folder it serves."""

    port: int
    token: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _alive(pids: list[int]) -> list[int]:
    import psutil

    left = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
        except psutil.Error:
            pass
    return left


def _stop_server(server: LabServer) -> list[int]:
    """Shut the server and its kernels down; return the processes that had to be killed."""
    family = _descendants(server.proc.pid)
    try:
        server.api("shutdown", method="POST")
    except (OSError, urllib.error.URLError):
        server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(SHUTDOWN)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(SHUTDOWN)
    end = time.monotonic() + 10
    while _alive(family) and time.monotonic() < end:
        time.sleep(0.2)
    left = _alive(family)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.fixture
def lab_server(tmp_path: Path) -> Iterator[LabServer]:
    """``jupyter lab`` serving a copy of tests/browser/data; shut down (kernels too) after."""
    root = tmp_path / "notebooks"
    shutil.copytree(DATA, root)
    jdirs = {
        "JUPYTER_CONFIG_DIR": tmp_path / "jupyter-config",
        "JUPYTER_DATA_DIR": tmp_path / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": tmp_path / "jupyter-runtime",
        "IPYTHONDIR": tmp_path / "ipython",
    }
    for d in jdirs.values():
        d.mkdir()
    # No "official Jupyter news?" prompt over the page.
    labconfig = jdirs["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir()
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    # The notebook's "python3" kernel is this interpreter, whatever is first on PATH.
    spec = jdirs["JUPYTER_DATA_DIR"] / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
            }
        )
    )
    env = {
        **os.environ,
        **{k: str(v) for k, v in jdirs.items()},
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "DISTLAB_RESULTS": str(tmp_path / "results"),
    }
    port, token = _free_port(), secrets.token_hex(16)
    log = tmp_path / "jupyter-lab.log"
    argv = [
        sys.executable, "-m", "jupyter", "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
        "--LabApp.extension_manager=readonly",
        *(["--allow-root"] if os.geteuid() == 0 else []),
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=root, stdout=out, stderr=subprocess.STDOUT)
    server = LabServer(port, token, root, proc, log)
    try:
        end = time.monotonic() + SERVER_START
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited ({proc.returncode}):\n{log.read_text()}")
            try:
                server.api("status")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > end:
                    pytest.fail(f"jupyter lab silent for {SERVER_START}s:\n{log.read_text()}")
                time.sleep(0.5)
        yield server
    finally:
        left = _stop_server(server)
        assert not left, f"processes left by jupyter lab, killed: {left}"


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[object]:
    """A page in headless Debian Chromium; a screenshot lands in tmp_path if the test fails."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    home = tmp_path / "browser-home"
    home.mkdir()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            env={**os.environ, "HOME": str(home)},
            timeout=60_000,
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            yield page
        finally:
            browser.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Save a screenshot of the page when a browser test's body fails."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    page = getattr(item, "funcargs", {}).get("browser_page")
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if page is None or tmp is None:
        return
    try:
        shot = Path(tmp) / "failure.png"
        page.screenshot(path=str(shot), full_page=True)
        report.sections.append(("browser", f"screenshot: {shot}"))
    except Exception as exc:  # the browser may be what failed
        report.sections.append(("browser", f"no screenshot: {exc}"))
