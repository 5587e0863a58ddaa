"""A whole model at a glance: every layer × head as a thumbnail above the stages; a click (or the
arrow keys) picks that layer and head, in the page and in Python, and the stages show its numbers."""

from types import SimpleNamespace

import numpy as np
import pytest

from attnwidget import AttentionWidget, attention

pytestmark = pytest.mark.browser

LAYERS, HEADS, N = 3, 4, 10
ROOT = "document.querySelector('.aw-root').attnwidget"
NUMBERS = f"{ROOT}.numbers()"


def fake_model(seed=0):
    rng = np.random.default_rng(seed)
    layers = [tuple(rng.normal(size=(HEADS, N, 8)) for _ in range(3)) for _ in range(LAYERS)]
    return SimpleNamespace(
        tokens=[f"t{i}" for i in range(N)], layers=layers, causal=True, scale=None, model_name="fake"
    )


def kernel_model(seed):
    """Notebook code that makes `found`: a fake model of LAYERS × HEADS heads over N tokens."""
    return f"""import numpy as np
from attnwidget import AttentionWidget
from attnwidget.integrations.common import ModelAttention
rng = np.random.default_rng({seed})
found = ModelAttention(tokens=[f"t{{i}}" for i in range({N})], causal=True, scale=None, architecture="fake", \
model_name="fake",
                       layers=[tuple(rng.normal(size=({HEADS}, {N}, 8)) for _ in range(3)) for _ in range({LAYERS})])
"""


def opened(browser, w, path, height=1000):
    """w exported to path, open in a page once every thumbnail is drawn."""
    w.to_html(path)
    page = browser.new_context(viewport={"width": 1000, "height": height}, bypass_csp=True).new_page()
    page.goto(path.as_uri())
    page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
    return page


def test_every_layer_and_head_is_a_cell_and_a_click_shows_its_numbers(browser, tmp_path):
    found = fake_model()
    w = AttentionWidget._from_model(found, 0, 0, {"stage": "weights"})
    page = opened(browser, w, tmp_path / "overview.html")
    try:
        cells = page.locator(".aw-head")
        assert cells.count() == LAYERS * HEADS
        assert sorted((int(c.get_attribute("data-layer")), int(c.get_attribute("data-head"))) for c in cells.all()) == [
            (layer, h) for layer in range(LAYERS) for h in range(HEADS)
        ]
        page.locator(".aw-head[data-layer='2'][data-head='3']").click()
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('layer') === 2")
        q, k, v = found.layers[2]
        np.testing.assert_allclose(
            np.reshape(page.evaluate(NUMBERS)["weights"], (N, N)),
            attention(q[3], k[3], v[3], causal=True).weights,
            atol=1e-12,
        )
        page.wait_for_selector(".aw-head[aria-pressed=true][data-layer='2'][data-head='3']")  # drawn at the next frame
        assert page.locator(".aw-head[aria-pressed=true]").get_attribute("aria-label") == "layer 2, head 3"
        # the arrow keys: up a layer, left a head
        page.keyboard.press("ArrowUp")
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(
            "(() => { const m = document.querySelector('.aw-root').attnwidget.model; "
            "return m.get('layer') === 1 && m.get('head') === 2; })()"
        )
        q, k, v = found.layers[1]
        np.testing.assert_allclose(
            np.reshape(page.evaluate(NUMBERS)["weights"], (N, N)),
            attention(q[2], k[2], v[2], causal=True).weights,
            atol=1e-12,
        )
    finally:
        page.context.close()


def test_in_jupyterlab_the_overview_comes_from_the_kernel_and_follows_the_temperature(open_notebook):
    setup = f"""
{kernel_model(0)}m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights", "summary": "effective_tokens"}})
m
"""
    page, kernel, errors = open_notebook("overview.ipynb", [setup])

    def summaries_are_pythons():
        want = np.array(kernel.eval("m.head_summary()['effective_tokens'].tolist()"))
        cells = page.locator(".aw-head").all()
        assert len(cells) == LAYERS * HEADS
        for cell in cells:
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert abs(float(cell.get_attribute("data-value")) - want[layer, head]) < 1e-12

    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        assert kernel.eval("m.overview is not None")  # the page asked, the kernel computed every layer
        summaries_are_pythons()
        page.locator(".aw-head[data-layer='1'][data-head='2']").click()
        assert kernel.wait_for("[m.layer, m.head]", lambda v: v == [1, 2]) == [1, 2]
        assert kernel.eval("m.layer_shown") is True
        page.wait_for_function(f"{ROOT}.model.get('layer') === 1 && !!{ROOT}.model.get('q')")
        weights = np.reshape(page.evaluate(NUMBERS)["weights"], (N, N))
        np.testing.assert_allclose(weights, np.array(kernel.eval("m.weights")), atol=1e-12)
        # another temperature: the overview is out of date, said so, then the kernel's new one
        page.evaluate(f"{ROOT}.model.set('temperature', 0.4); {ROOT}.model.save_changes()")
        assert kernel.wait_for("m.temperature", lambda t: t == 0.4) == 0.4
        page.wait_for_function(f"{ROOT}.model.get('overview')?.key.temperature === 0.4")
        page.wait_for_selector(".aw-heads[data-loading=false]", state="attached")
        summaries_are_pythons()
        assert errors == []
    finally:
        page.context.close()


def test_a_summary_colours_the_overview_with_pythons_values_and_sorts_it(browser, tmp_path):
    found = fake_model(1)
    w = AttentionWidget._from_model(found, 1, 0, {"stage": "weights", "summary": "previous", "temperature": 0.7})
    want = w.head_summary()
    page = opened(browser, w, tmp_path / "summary.html")
    try:
        for cell in page.locator(".aw-head").all():
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert abs(float(cell.get_attribute("data-value")) - want["previous"][layer, head]) < 1e-12
            assert cell.locator(".aw-head-value").inner_text() == f"{want['previous'][layer, head]:.2f}"
        page.locator(".aw-summary-sort").check()  # strongest first
        page.wait_for_function("document.querySelector('.aw-heads-list:not(.aw-heads-model)')")
        values = [float(v) for v in page.locator(".aw-head").evaluate_all("(bs) => bs.map((b) => b.dataset.value)")]
        assert values == sorted(values, reverse=True) and len(values) == LAYERS * HEADS
        page.locator(".aw-summary").select_option("effective_tokens")
        page.wait_for_function(
            "document.querySelector('.aw-root').attnwidget.model.get('summary') === 'effective_tokens'"
        )
        page.wait_for_function(
            """(want) => { const b = document.querySelector('.aw-head'); \
return b && Math.abs(Number(b.dataset.value) - want) < 1e-9; }""",
            arg=float(want["effective_tokens"].max()),
        )  # re-ranked on the next frame
        top = page.locator(".aw-head").first
        layer, head = int(top.get_attribute("data-layer")), int(top.get_attribute("data-head"))
        assert want["effective_tokens"][layer, head] == want["effective_tokens"].max()
    finally:
        page.context.close()


def test_your_own_arrays_on_a_model_widget_are_one_row_and_a_click_keeps_the_layer(browser, tmp_path):
    found = fake_model(2)
    w = AttentionWidget._from_model(found, 2, 0, {"stage": "weights"})
    rng = np.random.default_rng(3)
    w.set_vectors(
        tokens=list("abcd"), q=rng.normal(size=(2, 4, 3)), k=rng.normal(size=(2, 4, 3)), v=rng.normal(size=(2, 4, 2))
    )
    page = opened(browser, w, tmp_path / "own.html", height=900)
    try:
        assert page.locator(".aw-head").count() == 2  # your two heads, not the model's layers
        page.locator(".aw-head[data-head='1']").click()
        page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('head') === 1")
        assert page.evaluate("document.querySelector('.aw-root').attnwidget.model.get('layer')") == 2
        assert page.locator(".aw-token-text").all_inner_texts() == list("abcd")
        w.head = 1
        np.testing.assert_allclose(np.reshape(page.evaluate(NUMBERS)["weights"], (4, 4)), w.weights, atol=1e-12)
    finally:
        page.context.close()


COUNT_WORKERS = """window.awWorkers = 0; const Original = window.Worker;
window.Worker = class extends Original { constructor(...args) { super(...args); window.awWorkers++; } };"""
# each thumbnail's bitmap, byte for byte
THUMB_PIXELS = (
    "(images) => Promise.all(images.map((i) => fetch(i.src).then((r) => r.arrayBuffer()).then((b) => "
    "Array.from(new Uint8Array(b)).join(','))))"
)


def test_a_whole_models_thumbnails_from_workers_and_from_the_page_alike_carry_pythons_summaries(browser, tmp_path):
    from test_cross import fake_seq2seq

    # 18 heads a block: the thumbnails go to a pool of workers, or (no Worker) to the page's own slices
    blocks = fake_seq2seq(src=150, tgt=40, heads=6, d=8, layers=(3, 3, 3), seed=3)
    w = AttentionWidget._from_model(blocks, 0, 0, {"stage": "weights", "temperature": 0.8}, "cross")
    path = tmp_path / "pool.html"
    w.to_html(path)
    pages = {}
    for kind, init in (("workers", COUNT_WORKERS), ("page", "delete window.Worker")):
        page = browser.new_context(viewport={"width": 1000, "height": 1000}, bypass_csp=True).new_page()
        page.add_init_script(init)
        page.goto(path.as_uri())
        pages[kind] = page
    try:
        assert pages["workers"].evaluate("window.awWorkers") >= 1
        for block in ("cross", "encoder"):
            w.block = block
            want = w.head_summary()
            pictures = []
            for kind, page in pages.items():
                page.evaluate(f"document.querySelector('.aw-root').attnwidget.model.set('block', '{block}')")
                for name in ("first", "self", "previous", "effective_tokens"):
                    page.evaluate(f"document.querySelector('.aw-root').attnwidget.model.set('summary', '{name}')")
                    page.evaluate(
                        "new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"
                    )  # its redraw
                    page.wait_for_function("document.querySelector('.aw-heads').dataset.complete === 'true'")
                    page.wait_for_function(f"[...document.querySelectorAll('.aw-head')].length === {want[name].size}")
                    for cell in page.locator(".aw-head").all():
                        layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
                        value, expected = cell.get_attribute("data-value"), want[name][layer, head]
                        if np.isnan(expected):  # cross-attention has no "self" nor "previous" token
                            assert value == "" and cell.locator(".aw-head-value").inner_text() == "–", (
                                kind,
                                block,
                                name,
                            )
                        else:
                            assert abs(float(value) - expected) < 1e-12, (kind, block, name, layer, head)
                pictures.append(page.locator(".aw-head .aw-thumb").evaluate_all(THUMB_PIXELS))
            assert pictures[0] == pictures[1]  # the workers' thumbnails are the page's own
    finally:
        for page in pages.values():
            page.context.close()


def test_in_jupyterlab_a_layer_on_its_way_from_the_kernel_is_said_and_its_numbers_replace_the_last(open_notebook):
    setup = f"""
{kernel_model(1)}import time
m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights"}})
layer = m._sources.layer
def slow(block, i, *text):  # a kernel slow to bring layer 2 in
    if i == 2 and slow.on:
        time.sleep(1.5)
    return layer(block, i, *text)
slow.on = False
m._sources.layer = slow
m
"""
    page, kernel, errors = open_notebook("fetching.ipynb", [setup])
    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        kernel.run("slow.on = True")
        page.locator(".aw-head[data-layer='2'][data-head='1']").click()
        page.wait_for_selector(".aw-root[data-fetching='layer 2']", state="attached")
        assert "loading layer 2…" in page.locator(".aw-heads-caption").text_content()  # the kernel takes 1.5 s
        page.wait_for_selector(".aw-root[data-fetching='']", state="attached", timeout=10_000)
        assert "loading layer" not in page.locator(".aw-heads-caption").text_content()
        weights = np.reshape(page.evaluate(NUMBERS)["weights"], (N, N))
        np.testing.assert_allclose(weights, np.array(kernel.eval("m.weights")), atol=1e-12)
        assert kernel.eval("[m.layer, m.head]") == [2, 1] and errors == []
    finally:
        page.context.close()


def test_in_jupyterlab_a_head_shown_before_is_drawn_from_the_page_and_not_sent_again(open_notebook):
    setup = f"""
{kernel_model(2)}m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights"}})
sent, send = [], m._send
m._send = lambda msg, buffers=None: \
(sent.append(sum(memoryview(b).nbytes for b in buffers or [])), send(msg, buffers))[1]
m
"""
    page, kernel, errors = open_notebook("kept.ipynb", [setup])

    def to(layer, head):
        page.locator(f".aw-head[data-layer='{layer}'][data-head='{head}']").click()
        kernel.wait_for("[m.layer, m.head]", lambda v: v == [layer, head])
        page.wait_for_function(
            f"{ROOT}.model.get('layer_arrays')?.join() === ',{layer},{head}' && "
            "!document.querySelector('.aw-root').dataset.fetching"
        )
        page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")  # drawn
        weights = np.reshape(page.evaluate(NUMBERS)["weights"], (N, N))
        np.testing.assert_allclose(weights, np.array(kernel.eval("m.weights")), atol=1e-12)

    try:
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        to(1, 1)
        to(2, 1)
        kernel.run("sent.clear()")
        to(2, 0)  # another head of the layer: that head's arrays
        assert kernel.eval("sum(sent)") > 0
        kernel.run("sent.clear()")
        to(1, 1)  # fetched before: kept by the page
        to(2, 0)
        assert kernel.eval("sum(sent)") == 0  # no arrays came back for them
        to(0, 0)  # the first head shown: kept too
        assert kernel.eval("sum(sent)") == 0 and errors == []
    finally:
        page.context.close()
