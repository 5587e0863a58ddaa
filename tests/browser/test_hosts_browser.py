"""The widget in two more hosts besides JupyterLab: Jupyter Notebook 7 and marimo. In each, the
widget renders, and a click in the page reaches Python (checked on the Python side).

Each host runs once for this module, on a free localhost port, and is stopped afterwards."""

from __future__ import annotations

import os
import pathlib
import sys
import textwrap

import pytest

pytestmark = pytest.mark.browser

CELL = "from attnwidget import AttentionWidget\nw = AttentionWidget()\nw"


def _isolated_env(root: pathlib.Path) -> dict:
    """Config, runtime and cache folders of our own, so the user's settings play no part and
    the kernel's connection file lands where the test can find it."""
    return {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(root / ".runtime"),
        "JUPYTER_CONFIG_DIR": str(root / ".config"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / ".settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / ".workspaces"),
        "XDG_CONFIG_HOME": str(root / ".xdg-config"),
        "XDG_CACHE_HOME": str(root / ".xdg-cache"),
        "XDG_STATE_HOME": str(root / ".xdg-state"),
    }


def _new_page(browser):
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, errors


# --- Jupyter Notebook 7 ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory, jupyter_server):
    server = jupyter_server(tmp_path_factory.mktemp("notebook7"), app="notebook")
    yield server
    server.stop()


def test_notebook7_shows_widget_and_click_reaches_python(notebook7, browser, artifacts):
    notebook7.write_notebook("hosts.ipynb", [CELL])
    page, errors = _new_page(browser)
    kernel = None
    try:
        page.goto(notebook7.url("/notebooks/hosts.ipynb"))
        page.wait_for_function("window.jupyterapp && document.querySelector('.jp-Notebook')", timeout=60_000)
        # the page is Notebook 7's own front end, not JupyterLab's
        assert page.evaluate("window.jupyterapp.name") == "Jupyter Notebook"
        page.wait_for_function(
            "window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'", timeout=60_000
        )
        kernel = notebook7.kernel_for("hosts.ipynb")
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_selector(".aw-root", timeout=60_000)
        assert page.locator(".aw-token-text").all_inner_texts() == ["She", "sat", "by", "the", "river", "bank"]

        page.locator(".aw-token", has_text="bank").click()
        page.wait_for_selector(".aw-token[data-index='5'][aria-pressed=true]")
        assert kernel.wait_for("w.focus", lambda f: f == 5) == 5
        # a stage button too, which also fills the matrix for the screenshot
        page.click(".aw-stage[data-stage=weights]")
        page.wait_for_selector(".aw-root[data-stage=weights]")
        assert kernel.wait_for("w.stage", lambda s: s == "weights") == "weights"
        page.screenshot(path=str(artifacts / "host-notebook7.png"))
        # Notebook 7.6's own start-up can throw this from its keyboard-shortcut settings, before
        # any cell runs (a race in the host: jupyter/notebook#7862); it is not the widget's.
        host_race = "Cannot read properties of undefined (reading 'schema')"
        assert [e for e in errors if e != host_race] == []
    finally:
        if kernel is not None:
            kernel.close()
        page.context.close()


# --- marimo ---------------------------------------------------------------------------------

# The second cell reads ui.value, which marimo builds from the Python widget's traits; marimo
# re-runs it when a change from the page arrives, so its text is what Python saw.
MARIMO_APP = textwrap.dedent("""\
    import marimo

    app = marimo.App()


    @app.cell
    def _():
        import marimo as mo
        from attnwidget import AttentionWidget

        w = AttentionWidget()
        ui = mo.ui.anywidget(w)
        ui
        return mo, ui


    @app.cell
    def _(mo, ui):
        mo.md(f"python sees focus={ui.value['focus']} stage={ui.value['stage']}")
        return


    if __name__ == "__main__":
        app.run()
""")


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory, server_process):
    root = tmp_path_factory.mktemp("marimo")
    (root / "hosts_app.py").write_text(MARIMO_APP)
    cmd = lambda port: [
        sys.executable,
        "-m",
        "marimo",
        "run",
        str(root / "hosts_app.py"),
        "--headless",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # a local test server: no login page, and never ask about running in a sandbox
        "--no-token",
        "--no-sandbox",
    ]
    server = server_process("marimo", cmd, root, _isolated_env(root), "/health", timeout=60)
    server.url = f"http://127.0.0.1:{server.port}/"
    yield server
    server.stop()


def test_marimo_shows_widget_and_click_reaches_python(marimo_app, browser, artifacts):
    page, errors = _new_page(browser)
    try:
        page.goto(marimo_app.url)
        # marimo mounts the widget in an open shadow root; Playwright's CSS locators pierce it
        page.wait_for_selector(".aw-root", timeout=60_000)
        assert page.locator(".aw-token-text").all_inner_texts() == ["She", "sat", "by", "the", "river", "bank"]
        said = page.get_by_text("python sees")
        said.wait_for()
        assert said.inner_text() == "python sees focus=0 stage=tokens"

        page.locator(".aw-token", has_text="bank").click()
        page.wait_for_selector(".aw-token[data-index='5'][aria-pressed=true]")
        page.get_by_text("python sees focus=5").wait_for(timeout=15_000)
        page.click(".aw-stage[data-stage=weights]")
        page.wait_for_selector(".aw-root[data-stage=weights]")
        page.get_by_text("python sees focus=5 stage=weights").wait_for(timeout=15_000)
        page.screenshot(path=str(artifacts / "host-marimo.png"))
        assert not errors
    finally:
        page.context.close()
