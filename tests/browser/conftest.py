"""Shared fixtures for the browser tests: one JupyterLab server and one headless Chromium
for the whole session (the machines have two cores), and a kernel client that runs code in
the notebook's own kernel, so a test can check what Python sees after a click."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

from attnwidget.export import CHROMIUM_ARGS  # the flags that work with no sandbox, GPU or outside network

CHROMIUM = os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = pathlib.Path(__file__).resolve().parents[1] / "artifacts"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a free localhost port, ready once `probe` (a path) answers over HTTP.
    `cmd(port)` gives its command line."""

    def __init__(self, name: str, cmd, cwd: pathlib.Path, env: dict, probe: str, headers=None, timeout: float = 90):
        self.port = _free_port()
        self.log_path = cwd / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd(self.port), cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                raise RuntimeError(f"{name} exited early:\n{self.log_path.read_text()[-3000:]}")
            try:
                self.get(probe, headers)
                return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"{name} did not start within {timeout:.0f} s:\n{self.log_path.read_text()[-3000:]}")

    def get(self, path: str, headers=None, method: str = "GET") -> bytes:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", headers=headers or {}, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# What differs between the two Jupyter front ends: window.jupyterapp (to run cells by command,
# not by keyboard focus) and their own update checks.
APPS = {
    "jupyterlab": [
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ],
    "notebook": ["--JupyterNotebookApp.expose_app_in_browser=True"],
}


class Lab:
    """A Jupyter server (JupyterLab, or Notebook 7 with app="notebook") on a free localhost port,
    with settings, runtime files and kernels of its own."""

    def __init__(self, root: pathlib.Path, app: str = "jupyterlab"):
        self.root = root
        self.token = uuid.uuid4().hex
        self.runtime = root / ".runtime"
        self.runtime.mkdir(parents=True)
        # No news pop-up over the notebook: it would cover the widget in screenshots.
        settings = root / ".settings" / "@jupyterlab" / "apputils-extension"
        settings.mkdir(parents=True)
        (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
        # Notebooks keep their widget state when saved, so a reopened notebook shows the widget.
        widgets = root / ".settings" / "@jupyter-widgets" / "jupyterlab-manager"
        widgets.mkdir(parents=True)
        (widgets / "plugin.jupyterlab-settings").write_text('{"saveState": true}')
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.runtime),
            "JUPYTER_CONFIG_DIR": str(root / ".config"),
            "JUPYTERLAB_SETTINGS_DIR": str(root / ".settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(root / ".workspaces"),
        }
        cmd = lambda port: [
            sys.executable,
            "-m",
            app,
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.open_browser=False",
            *APPS[app],
        ]
        self.server = Server(app, cmd, root, env, "/api/status", {"Authorization": f"token {self.token}"})
        self.port = self.server.port
        self.closing: list[threading.Thread] = []

    def api(self, path: str, method: str = "GET"):
        return json.loads(self.server.get(path, {"Authorization": f"token {self.token}"}, method) or b"null")

    def url(self, path: str) -> str:
        for t in self.closing:  # a page opened next finds no kernel of a closed one still running
            t.join()
        return f"http://127.0.0.1:{self.port}{path}?token={self.token}"

    def shut_down(self, notebook: str):
        """Shut the notebook's kernel down (its page is closed), in the background: thirty idle kernels
        left running to the end of the session slow every later test."""

        def delete():
            try:
                for s in self.api("/api/sessions"):
                    if s["path"] == notebook:
                        self.api(f"/api/sessions/{s['id']}", "DELETE")
            except OSError:  # the server has stopped already
                pass

        self.closing.append(threading.Thread(target=delete, daemon=True))
        self.closing[-1].start()

    def write_notebook(self, name: str, cells: list[str]) -> str:
        nb = {
            "cells": [
                {"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
                for c in cells
            ],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        (self.root / name).write_text(json.dumps(nb))
        return name

    def kernel_for(self, notebook: str):
        """A client on the kernel that JupyterLab started for this notebook."""
        from jupyter_client import BlockingKernelClient

        deadline, why = time.time() + 60, ""
        while time.time() < deadline:
            sessions = [s for s in self.api("/api/sessions") if s["path"].endswith(notebook)]
            # (a kernel still starting misses the client's first heartbeats, which then calls it dead)
            if sessions and sessions[0]["kernel"]["execution_state"] != "starting":
                conn = self.runtime / f"kernel-{sessions[0]['kernel']['id']}.json"
                if conn.exists():
                    kc = BlockingKernelClient(connection_file=str(conn))
                    kc.load_connection_file()
                    kc.start_channels()
                    try:
                        kc.wait_for_ready(timeout=60)
                        return Kernel(kc)
                    except RuntimeError as e:  # "Kernel died before replying": its heartbeat was late, under load
                        kc.stop_channels()
                        why = f": {e}"
            time.sleep(0.3)
        raise RuntimeError(f"no kernel for {notebook}{why}")

    def stop(self):
        self.server.stop()


class Kernel:
    def __init__(self, kc):
        self.kc = kc

    def run(self, code: str):
        """Run code in the notebook's kernel; raise if it fails."""
        errors = []

        def hook(msg):
            if msg["msg_type"] == "error":
                errors.append("\n".join(msg["content"]["traceback"]))

        reply = self.kc.execute_interactive(code, output_hook=hook, timeout=60, store_history=False)
        if errors or reply["content"]["status"] != "ok":
            raise AssertionError(f"kernel error running {code!r}:\n" + "\n".join(errors))

    def eval(self, expr: str):
        """Evaluate a Python expression in the kernel and return its value (via JSON)."""
        out = []

        def hook(msg):
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("ERROR " + msg["content"]["evalue"])

        code = f"import json as _j, numpy as _np\nprint(_j.dumps(_np.asarray({expr}).tolist()))"
        self.kc.execute_interactive(code, output_hook=hook, timeout=60, store_history=False)
        text = "".join(out).strip()
        if text.startswith("ERROR"):
            raise AssertionError(f"kernel error evaluating {expr!r}: {text}")
        return json.loads(text)

    def wait_for(self, expr: str, predicate, timeout: float = 10.0):
        """Poll an expression until predicate(value) holds: messages from the page travel
        on their own connection and may land after a check sent from here."""
        deadline = time.time() + timeout
        while True:
            value = self.eval(expr)
            if predicate(value) or time.time() > deadline:
                return value
            time.sleep(0.1)

    def close(self):
        self.kc.stop_channels()


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium not found at {CHROMIUM}; install Debian's chromium (apt-get install chromium)")
    server = Lab(tmp_path_factory.mktemp("lab"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def jupyter_server():
    """jupyter_server(root, app): start another Jupyter server (e.g. Notebook 7); stop it yourself."""
    return Lab


@pytest.fixture(scope="session")
def server_process():
    """server_process(name, cmd(port), cwd, env, probe_path): start any other server; stop it yourself."""
    return Server


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def artifacts():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def open_notebook(lab, browser):
    """open_notebook(name, cells): write a notebook, open it in JupyterLab, run all its cells;
    returns (page, kernel client, page errors)."""
    return lambda name, cells, **kw: _open_notebook(lab, browser, name, cells, **kw)


def _open_notebook(
    lab, browser, name: str, cells: list[str], *, viewport=(1280, 1600), color_scheme="light", timeout=60_000
):
    lab.write_notebook(name, cells)
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]}, color_scheme=color_scheme)
    context.on("close", lambda _: lab.shut_down(name))
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.goto(lab.url(f"/lab/tree/{name}") + "&reset")  # a fresh workspace: no tabs left open by earlier tests
    page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=90_000)
    page.wait_for_function(
        "window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'", timeout=90_000
    )
    kernel = lab.kernel_for(name)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_selector(".aw-root", timeout=timeout)  # (a benchmark's large model takes minutes to read)
    return page, kernel, errors
