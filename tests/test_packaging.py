"""The wheel ships the front-end bundle, the type hints and the metadata PyPI shows; the version is package.json's."""

import json
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile

import pytest

import attnwidget

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_contains_the_bundle_and_data(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("attnwidget-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in (
        "attnwidget/static/widget.js",
        "attnwidget/static/widget.css",
        "attnwidget/data/lab.json",
        "attnwidget/widget.py",
    ):
        assert path in names, f"{path} missing from {wheel.name}"
    bundle = zipfile.ZipFile(wheel).read("attnwidget/static/widget.js")
    assert b"render" in bundle and len(bundle) > 10_000
    assert "attnwidget/py.typed" in names  # the type hints are for users too
    # what PyPI shows: the licence, the links, and the README whose picture has an absolute address
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    version = json.loads((ROOT / "package.json").read_text())["version"]
    for line in (
        f"Version: {version}",
        "License-Expression: MIT",
        "Project-URL: Documentation",
        "Classifier: Typing :: Typed",
        "Description-Content-Type: text/markdown",
    ):
        assert line in meta, line
    assert any(n.endswith("licenses/LICENSE") for n in names)
    images = [line for line in meta.splitlines() if line.startswith("![")]
    assert images and all("](https://" in line for line in images), images


def test_the_version_is_package_jsons():
    """One version: pyproject reads package.json's (hatch-nodejs-version); nothing to keep equal."""
    package = json.loads((ROOT / "package.json").read_text())
    assert attnwidget.__version__ == package["version"]
    assert 'dynamic = ["version"' in (ROOT / "pyproject.toml").read_text()


def test_the_widget_loads_the_built_bundle():
    from attnwidget.widget import _STATIC, AttentionWidget

    bundle = (_STATIC / "widget.js").read_text()  # missing: run `npm run build` (make test does)
    assert str(AttentionWidget._esm) == bundle


def test_the_demo_runs_on_copies_and_ctrl_c_stops_it(tmp_path):
    """`make demo` serves copies in build/demo (the tracked notebooks stay as they are), and its
    JupyterLab stops at one Ctrl-C, without asking."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "jupyter").write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\n')
    (fake / "jupyter").chmod(0o755)
    work = tmp_path / "repo"  # (the recipe run in a copy: the repository's own build/ is left alone)
    shutil.copytree(ROOT / "notebooks", work / "notebooks")
    shutil.copy(ROOT / "Makefile", work / "Makefile")
    run = subprocess.run(
        ["make", "-s", "-o", "build", "-o", ".venv/.demo-installed", "demo", f"BIN={fake}"],
        cwd=work, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    args = (fake / "args").read_text().split()
    assert args[:2] == ["lab", "-y"] and "--ServerApp.root_dir=build/demo" in args
    copied = sorted(p.name for p in (work / "build" / "demo").glob("*.ipynb"))
    assert copied == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    mine = work / "build" / "demo" / "01_attention_lab.ipynb"
    mine.write_text("{}")  # a copy the learner changed: never overwritten, even by a newer notebook here
    (work / "notebooks" / "01_attention_lab.ipynb").touch()
    subprocess.run(
        ["make", "-s", "-o", "build", "-o", ".venv/.demo-installed", "demo", f"BIN={fake}"], cwd=work, check=True
    )
    assert mine.read_text() == "{}"
    # the server itself, as the recipe starts it (in the copy): up, then one SIGINT (Ctrl-C) and it is gone
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    own = [f"--port={port}", "--no-browser", "--ServerApp.token=", "--ServerApp.ip=127.0.0.1"]
    # its log to a file, not a pipe nobody reads while it runs (a full pipe would stop it mid-write), and
    # Ctrl-C as a terminal delivers it, whatever the disposition the test runner inherited
    log = open(tmp_path / "server.log", "w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", *args[1:], *own], cwd=work, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    said = lambda: (tmp_path / "server.log").read_text()[-3000:]
    try:
        up = False
        start = time.monotonic()
        while not up and server.poll() is None and time.monotonic() - start < 60:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                up = True
            except OSError:
                time.sleep(0.3)
        assert up, said()
        server.send_signal(signal.SIGINT)
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, said()  # no question asked, nothing left running
    finally:
        if server.poll() is None:
            server.kill()
        log.close()
