"""The query–key map in the page (qkmap.py's view, beside the overview): the points drawn are
Python's, hover names the token and its text, a click opens that text at that token; in
JupyterLab the map's toggle asks the kernel through the page's one request path."""

import numpy as np
import pytest
from test_overview_browser import kernel_model

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser
ROOT = "document.querySelector('.aw-root').attnwidget"
TEXTS = ["the cat sat on the mat", "a dog saw the dog run", "she sat by the river bank"]


def test_an_exported_map_is_pythons_and_a_click_opens_the_text_at_the_token(browser, tmp_path):
    w = AttentionWidget(TEXTS, qk_map=True, stage="weights")
    want = w.query_key_map()
    w.to_html(tmp_path / "map.html")
    page = browser.new_context(viewport={"width": 1200, "height": 1000}, bypass_csp=True).new_page()  # (the waits)
    try:
        page.goto((tmp_path / "map.html").as_uri())
        page.wait_for_selector(".aw-qk[data-points]")
        assert int(page.locator(".aw-qk").get_attribute("data-points")) == len(want["points"])
        got = page.evaluate(
            f"(() => {{ const a = {ROOT}.model.get('computed').query_key_map.points;"
            " return Array.from(new Float32Array(a.view.buffer, a.view.byteOffset, a.view.byteLength / 4)); })()"
        )
        np.testing.assert_allclose(np.reshape(got, (-1, 2)), want["points"], atol=1e-5)
        # the key of "river" in text 2: named on hover, opened on a click
        i = next(
            j
            for j in range(len(want["token"]))
            if want["text"][j] == 2 and want["token"][j] == "river" and want["kind"][j] == "key"
        )
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.ready()")  # laid out: nothing moves
        x, y = page.evaluate(f"document.querySelector('.aw-qk').pointAt({i})")
        box = page.locator(".aw-qk-canvas").bounding_box()
        page.mouse.move(box["x"] + x, box["y"] + y)
        tip = page.locator(".aw-qk-tip")
        tip.wait_for(state="visible")
        assert "“river” · key of token 4 · text 2: she sat by the river bank" in tip.text_content()
        page.mouse.click(box["x"] + x, box["y"] + y)
        page.wait_for_function(f"{ROOT}.model.get('sentence_index') === 2")
        assert page.evaluate(f"{ROOT}.model.get('focus')") == 4
        focused = "document.querySelector('.aw-tokens [aria-pressed=true]')?.textContent"
        page.wait_for_function(f"{focused}.startsWith('river')")
    finally:
        page.context.close()


def test_in_jupyterlab_the_toggle_asks_the_kernel_for_the_map_of_the_head_shown(open_notebook):
    setup = f"""
{kernel_model(5)}m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights"}})
m
"""
    page, kernel, errors = open_notebook("qkmap.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        assert page.locator(".aw-qk").is_hidden()
        page.locator(".aw-qk-toggle").check()
        assert kernel.wait_for("m.qk_map", lambda on: on is True) is True
        page.wait_for_selector(".aw-qk[data-points]")
        points = kernel.eval("len(m.query_key_map()['points'])")
        assert int(page.locator(".aw-qk").get_attribute("data-points")) == points
        page.locator(".aw-head[data-layer='1'][data-head='2']").click()  # another head: its own map
        page.wait_for_function(f"{ROOT}.model.get('computed')?.query_key_map?.key.head === 2")
        page.wait_for_function("document.querySelector('.aw-qk-title').textContent.includes('layer 1, head 2')")
        page.locator(".aw-qk-toggle").uncheck()
        assert kernel.wait_for("m.qk_map", lambda on: on is False) is False
        page.wait_for_selector(".aw-qk", state="hidden")  # (at the next frame the page draws)
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_map_says_when_the_page_has_changed_the_queries_since(browser, tmp_path):
    AttentionWidget(TEXTS, qk_map=True, stage="weights").to_html(tmp_path / "map.html")
    page = browser.new_context(viewport={"width": 1200, "height": 1000}, bypass_csp=True).new_page()
    try:
        page.goto((tmp_path / "map.html").as_uri())
        page.wait_for_selector(".aw-qk[data-points]")
        assert "changed here since" not in page.locator(".aw-qk-status").inner_text()
        page.evaluate(
            f"""() => {{ const m = {ROOT}.model, q = m.get('q'), start = q.view.byteOffset;
            const Type = q.dtype === "float32" ? Float32Array : Float64Array;
            const f = new Type(q.view.buffer.slice(start, start + q.view.byteLength));
            f[0] += 0.5;
            m.set('q', {{ shape: q.shape, dtype: q.dtype, view: new DataView(f.buffer) }}); }}"""
        )
        page.wait_for_function("document.querySelector('.aw-qk-status').textContent.includes('changed here since')")
        assert "as exported: the q changed here since" in page.locator(".aw-qk-status").text_content()
    finally:
        page.context.close()
