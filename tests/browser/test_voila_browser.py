"""The widget in Voilà (a notebook served as a dashboard, with its code hidden): it draws with
Python's numbers, a click on a token reaches the kernel, and a change made in the kernel comes
back to the page.

Voilà starts a kernel of its own for each page it serves, which a test cannot reach from
outside; so the served notebook itself reports what Python sees: an observer appends every
change of focus and temperature to a file, and answers a focus on "river" by setting the
temperature from Python. One Voilà server runs for this module, on a free localhost port."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import numpy as np
import pytest

pytest.importorskip("voila")

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

TOKENS = ["She", "sat", "by", "the", "river", "bank"]
RIVER = TOKENS.index("river")
KERNEL_TEMPERATURE = 2.5  # what the kernel sets when focus lands on "river"
NUMBERS = "document.querySelector('.aw-root').attnwidget.numbers()"

CELL = """\
import json, pathlib
from attnwidget import AttentionWidget

LOG = pathlib.Path({log!r})
w = AttentionWidget()

def report(change):
    with LOG.open("a") as f:
        f.write(json.dumps({{"name": change["name"], "new": change["new"]}}) + "\\n")
    if change["name"] == "focus" and change["new"] == {river}:
        w.temperature = {temperature}  # a change made in Python, which the page must show

w.observe(report, ["focus", "temperature"])
w
"""


def _notebook(path: pathlib.Path, cells: list[str]):
    nb = {
        "cells": [
            {"cell_type": "code", "id": f"cell{i}", "metadata": {}, "source": c, "outputs": [], "execution_count": None}
            for i, c in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def voila(tmp_path_factory, server_process):
    root = tmp_path_factory.mktemp("voila")
    log = root / "changes.jsonl"
    _notebook(root / "dashboard.ipynb", [CELL.format(log=str(log), river=RIVER, temperature=KERNEL_TEMPERATURE)])
    env = {  # config, runtime and cache folders of our own: the user's settings play no part
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
        "JUPYTER_CONFIG_DIR": str(root / ".config"),
        "XDG_CONFIG_HOME": str(root / ".xdg-config"),
        "XDG_CACHE_HOME": str(root / ".xdg-cache"),
    }
    cmd = lambda port: [
        sys.executable,
        "-m",
        "voila",
        str(root / "dashboard.ipynb"),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--Voila.port_retries=0",  # that port or none
        "--Voila.token=",  # a local test server: no token
    ]
    # A static file as the probe: asking for the notebook itself would start a kernel.
    server = server_process("voila", cmd, root, env, "/voila/static/favicon.ico", timeout=60)
    server.url = f"http://127.0.0.1:{server.port}/"
    server.log_file = log
    yield server
    server.stop()


def _changes(log: pathlib.Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for_change(log: pathlib.Path, name: str, value, timeout: float = 15) -> list[dict]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        changes = _changes(log)
        if {"name": name, "new": value} in changes:
            return changes
        time.sleep(0.1)
    raise AssertionError(f"the kernel never saw {name} = {value!r}; it saw {_changes(log)}")


# What Voilà's own page reports with no outside network and Notebook 7 installed beside it:
# its template asks a CDN for Font Awesome, and Notebook 7's JupyterLab extension fails to load
# in Voilà's page (module federation). Neither is the widget's.
HOST_NOISE = ("Failed to load resource: net::ERR_NAME_NOT_RESOLVED", "RUNTIME-012")


def _open(browser, voila):
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on(
        "console",
        lambda m: errors.append(m.text) if m.type == "error" and not any(n in m.text for n in HOST_NOISE) else None,
    )
    page.goto(voila.url)
    page.wait_for_selector(".aw-root", timeout=30_000)
    return page, errors


def _close(page):
    page.close(run_before_unload=True)  # Voilà shuts the page's kernel down as it unloads
    page.context.close()


def test_voila_draws_the_widget_with_pythons_numbers(voila, browser):
    page, errors = _open(browser, voila)
    try:
        assert page.locator(".aw-token-text").all_inner_texts() == TOKENS
        numbers = page.evaluate(NUMBERS)
        np.testing.assert_allclose(
            np.reshape(numbers["weights"], (6, 6)), AttentionWidget().weights, rtol=0, atol=1e-12
        )
        assert page.locator(".aw-temp-value").inner_text() == "T = 1.00"
        assert errors == []
    finally:
        _close(page)


def test_voila_click_reaches_the_kernel_and_a_kernel_change_comes_back(voila, browser, artifacts):
    log = voila.log_file
    log.unlink(missing_ok=True)
    page, errors = _open(browser, voila)
    try:
        page.locator(".aw-token", has_text="river").click()
        page.wait_for_selector(f".aw-token[data-index='{RIVER}'][aria-pressed=true]")
        changes = _wait_for_change(log, "focus", RIVER)
        assert changes[0] == {"name": "focus", "new": RIVER}  # nothing reached Python before the click

        # the kernel's answer: it set the temperature, and the page shows it and computes with it
        _wait_for_change(log, "temperature", KERNEL_TEMPERATURE)
        page.wait_for_function(
            "t => document.querySelector('.aw-temp-value')?.textContent === t",
            arg=f"T = {KERNEL_TEMPERATURE:.2f}",
            timeout=15_000,
        )
        numbers = page.evaluate(NUMBERS)
        assert numbers["temperature"] == KERNEL_TEMPERATURE
        expected = AttentionWidget(temperature=KERNEL_TEMPERATURE).weights
        np.testing.assert_allclose(np.reshape(numbers["weights"], (6, 6)), expected, rtol=0, atol=1e-12)
        assert not np.allclose(expected, AttentionWidget().weights)  # the check above tells the two apart
        assert page.locator(f".aw-token[data-index='{RIVER}']").get_attribute("aria-pressed") == "true"
        page.screenshot(path=str(artifacts / "host-voila.png"))
        assert errors == []
    finally:
        _close(page)
