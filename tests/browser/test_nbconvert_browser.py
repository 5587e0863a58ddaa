"""A notebook saved with widget state and converted with `jupyter nbconvert --to html` shows
the live widget with no kernel.

The exported page loads require.js and @jupyter-widgets/html-manager's embed-amd.js from CDNs,
and the html manager then loads the "anywidget" front end from jsDelivr; the widget's own code
travels inside the saved state (`_esm`). The test machine has no internet, so every CDN request
is answered from node_modules (devDependencies in package.json) and any request that cannot be
answered that way fails the test."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"
TOKENS = ["She", "sat", "by", "the", "river", "bank"]

# https://unpkg.com/<pkg>@<range>/<file> and https://cdn.jsdelivr.net/npm/<pkg>@<range>/<file>
NPM_CDN = re.compile(r"^https://(?:unpkg\.com|cdn\.jsdelivr\.net/npm)/((?:@[^/]+/)?[^/@]+)@([^/]+)/(.+)$")
REQUIREJS = re.compile(r"^https://cdnjs\.cloudflare\.com/ajax/libs/require\.js/([^/]+)/require(?:\.min)?\.js$")
# MathJax is optional: the page's init_mathjax() does nothing without window.MathJax, and this
# notebook has no math. It gets an empty script. (Mermaid is only imported when the page has a
# diagram, so it is not requested here; if it ever is, it counts as unserved.)
OPTIONAL = re.compile(r"^https://cdnjs\.cloudflare\.com/ajax/libs/mathjax/")


def installed_version(package: str) -> str:
    return json.loads((NODE_MODULES / package / "package.json").read_text())["version"]


def satisfies(version: str, spec: str) -> bool:
    """Enough of npm's ranges for what the page asks: '*', '1.2.3', '~0.11.*', '^1.0.0'.
    A CDN would pick a matching version; serving a different one would test another front end."""
    spec = spec.strip()
    if spec in ("*", "latest", "x"):
        return True
    have = version.split("-")[0].split(".")
    want = spec.lstrip("~^=v").split(".")
    if spec.startswith("^"):
        # ^0.y.z keeps the minor, ^x.y.z (x > 0) keeps the major
        want = want[:2] if want[0] == "0" else want[:1]
    elif spec.startswith("~"):
        want = want[:2]
    for h, w in zip(have, want):
        if w in ("*", "x", "X"):
            break
        if h != w:
            return False
    return True


def local_copy(url: str) -> pathlib.Path | None:
    """The node_modules file that stands for a CDN URL, or None."""
    url = url.split("?")[0].split("#")[0]
    if m := REQUIREJS.match(url):
        path = NODE_MODULES / "requirejs" / "require.js"
        return path if path.exists() and installed_version("requirejs") == m[1] else None
    if m := NPM_CDN.match(url):
        package, spec, file = m[1], m[2], m[3]
        path = NODE_MODULES / package / file
        if path.is_file() and satisfies(installed_version(package), spec):
            return path
    return None


class CdnFromNodeModules:
    """Playwright route handler: file:// goes through, CDN URLs come from node_modules, the rest
    is refused and remembered."""

    def __init__(self):
        self.served: dict[str, str] = {}
        self.stubbed: list[str] = []
        self.unserved: list[str] = []

    def __call__(self, route):
        url = route.request.url
        if url.startswith("file:"):
            # The page itself, and require.js's first look for a module beside the page; that
            # one is missing, and the html manager then falls back to the CDN.
            return route.continue_()
        if path := local_copy(url):
            self.served[url] = str(path.relative_to(ROOT))
            content_type = "text/javascript" if path.suffix == ".js" else None
            return route.fulfill(path=path, content_type=content_type)
        if OPTIONAL.match(url):
            self.stubbed.append(url)
            return route.fulfill(body="", content_type="text/javascript")
        self.unserved.append(url)
        return route.abort("internetdisconnected")


@pytest.fixture(scope="module")
def exported_html(tmp_path_factory):
    import nbclient
    import nbformat

    if not (NODE_MODULES / "@jupyter-widgets" / "html-manager").exists():
        pytest.fail("node_modules lacks the html manager; run `npm install` in the project root")
    folder = tmp_path_factory.mktemp("nbconvert")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("from attnwidget import AttentionWidget\nAttentionWidget(stage='weights', focus=5)")
    ]
    nbclient.NotebookClient(nb, kernel_name="python3", store_widget_state=True, timeout=120).execute(cwd=str(folder))
    assert "application/vnd.jupyter.widget-state+json" in nb.metadata["widgets"]
    nbformat.write(nb, folder / "attn.ipynb")
    subprocess.run(
        [sys.executable, "-m", "nbconvert", "--to", "html", "attn.ipynb"],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return folder / "attn.html"


def test_exported_html_is_live_without_a_kernel(exported_html, browser, artifacts):
    cdn = CdnFromNodeModules()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.route("**/*", cdn)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(exported_html.as_uri())
        page.wait_for_selector(".aw-root .aw-token-text", timeout=20_000)
        root = page.locator(".aw-root")
        assert root.get_attribute("data-stage") == "weights"
        assert root.locator(".aw-token-text").all_inner_texts() == TOKENS
        assert root.locator(".aw-token-text").nth(5).is_visible()
        assert root.locator(".aw-readout").inner_text().startswith("bank reads river 0.556")
        assert root.locator("button.aw-token[aria-pressed=true]").get_attribute("data-index") == "5"

        # No kernel: the click is handled by the front end alone, from the embedded state.
        root.locator("button.aw-token", has_text="river").click()
        page.wait_for_selector(".aw-root button.aw-token[data-index='4'][aria-pressed=true]", timeout=5_000)
        assert root.locator("button.aw-token[aria-pressed=true]").count() == 1
        assert root.locator(".aw-readout").inner_text().startswith("river reads")
        page.screenshot(path=str(artifacts / "nbconvert.png"), full_page=True)

        assert not cdn.unserved, f"requests with no local copy: {cdn.unserved}"
        assert not errors, errors
        # The widget came through the standard path: the html manager and anywidget from "CDN".
        served = set(cdn.served.values())
        assert "node_modules/@jupyter-widgets/html-manager/dist/embed-amd.js" in served
        assert "node_modules/anywidget/dist/index.js" in served
    finally:
        context.close()
