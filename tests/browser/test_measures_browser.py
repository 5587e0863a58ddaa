"""The panel beyond one head in the page: rollout and flow drawn as Python computes them, up to the
layer shown, with arcs from the focused token; asked of the kernel in JupyterLab as the state
changes, carried by an exported page (which says at which state once it is not the one shown)."""

import numpy as np
import pytest
from test_across_layers import model_widget
from test_integrations import gpt2, gpt2_tokenizer, tf  # (fixtures)
from test_overview_browser import HEADS, LAYERS, N, kernel_model

from attnwidget import AttentionWidget, computed_views, measures
from attnwidget.mixing import attention_flow

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
MEASURE = f"{ROOT}.measure()"
FRAMES = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


def to_the_other_text_and_back(page):
    """Text 1, then text 0 again, by the page's buttons; returns once the second is drawn."""
    for text in (1, 0):
        page.locator(".aw-sentence").nth(text).click()
        page.wait_for_function(f"{ROOT}.model.get('sentence_index') === {text}")
    page.evaluate(FRAMES)


def exported(browser, w, path, height=1400, width=1100):
    """w exported to path and opened: (page, the errors it raised)."""
    w.to_html(path)
    page = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    return page, errors


def drawn(page, n):
    got = page.evaluate(MEASURE)
    return np.reshape(got["values"], (n, n)), got


def test_an_exported_page_draws_pythons_rollout_at_every_layer_and_its_flow(browser, tmp_path):
    n = 7
    w = model_widget(seed=2, n=n, layers=3, heads=2)
    w.set_state({"layer": 1, "measure": "flow", "focus": 5, "causal": True})
    flows = attention_flow(np.array([a.copy() for a in w._inputs().across("flow")])[:2])
    page, errors = exported(browser, w, tmp_path / "measures.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        values, got = drawn(page, n)
        np.testing.assert_allclose(values, flows, rtol=1e-6, atol=1e-7)
        assert "layer" not in got["key"]  # carried at every layer, as rollout is
        assert "flow up to layer 1" in page.locator(".aw-measure figcaption").text_content()
        # the strip's percentages are shares of the row's flows, which do not sum to 1: said
        assert flows[5].sum() > 1.5
        assert "each flow's share of the focused row's total" in page.locator(".aw-measure-about").inner_text()
        # the arcs from the focused token are its row's shares
        np.testing.assert_allclose(got["row"], flows[5] / flows[5].sum(), rtol=1e-6)
        assert page.locator(".aw-measure .aw-arc").count() == int((flows[5] / flows[5].sum() >= 0.005).sum())
        # flow and rollout: carried at every layer, so the layer control goes on working
        for layer in (2, 0):
            page.locator("select.aw-layer").select_option(str(layer))
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            page.evaluate(FRAMES)
            values, got = drawn(page, n)
            w.layer = layer
            up_to = attention_flow(np.array([a.copy() for a in w._inputs().across("flow")])[: layer + 1])
            np.testing.assert_allclose(values, up_to, rtol=1e-6, atol=1e-7)
            assert (
                got["state"] == "current"
                and f"flow up to layer {layer}" in page.locator(".aw-measure figcaption").text_content()
            )
        page.locator(".aw-measure-choice[data-measure='rollout']").click()
        page.wait_for_function(f"{ROOT}.model.get('measure') === 'rollout'")
        page.evaluate(FRAMES)
        for layer in (1, 2, 0):
            page.locator("select.aw-layer").select_option(str(layer))
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            page.evaluate(FRAMES)
            values, got = drawn(page, n)
            w.layer = layer
            np.testing.assert_allclose(values, w.rollout()[layer], rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(values.sum(axis=1), 1, rtol=1e-5)
            assert got["state"] == "current"
        # weight × ‖value‖ of the head shown, at the state exported (layer 1)
        page.locator("select.aw-layer").select_option("1")
        page.locator(".aw-measure-choice[data-measure='norms']").click()
        page.wait_for_function(f"{ROOT}.measure().key?.measure === 'norms'")
        w.layer = 1
        np.testing.assert_allclose(drawn(page, n)[0], w.norms()[0], rtol=1e-6)
        assert (
            "a large weight on a token whose value is near zero moves nothing"
            in page.locator(".aw-measure-about").inner_text()
        )
        heaviest, moving = w.tokens[int(w.weights[5].argmax())], w.tokens[int(w.norms()[0, 5].argmax())]
        said = page.locator(".aw-measure-contrast").inner_text()
        assert said.startswith(f"{w.tokens[5]} puts its largest weight on {heaviest} ({w.weights[5].max():.3f})")
        assert (f"what moves {w.tokens[5]} most is {moving}" in said) == (heaviest != moving)
        page.locator(".aw-measure-choice[data-measure='rollout']").click()
        page.wait_for_function(f"{ROOT}.measure().key?.measure === 'rollout'")
        # another temperature: this page cannot compute it again, and says at which state it draws
        page.evaluate(f"{ROOT}.model.set('temperature', 0.5)")
        page.wait_for_selector(".aw-measure[data-state='exported']")
        assert "as exported, at T = 1.00" in page.locator(".aw-measure-status").inner_text()
        np.testing.assert_allclose(drawn(page, n)[0], w.rollout()[1], rtol=1e-6, atol=1e-7)  # still T = 1's, said so
        # the pressed button again closes the panel's matrix
        page.locator(".aw-measure-choice[data-measure='rollout']").click()
        page.wait_for_function(f"{ROOT}.model.get('measure') === ''")
        page.evaluate(FRAMES)
        assert page.locator(".aw-measure .aw-figure").is_hidden()
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_page_draws_the_heads_mean_at_every_layer_in_its_own_words(browser, tmp_path):
    n = 6
    w = model_widget(seed=5, n=n, layers=3, heads=3)
    w.set_state({"layer": 2, "measure": "mean", "focus": 4})
    means = [weights.mean(axis=0) for weights in (a.copy() for a, _ in w._inputs().weights())]
    page, errors = exported(browser, w, tmp_path / "mean.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        button = page.locator(".aw-measure-choice[data-measure='mean']")
        assert button.inner_text() == "heads' mean" and button.get_attribute("aria-pressed") == "true"
        assert page.locator(".aw-measure-about").inner_text().startswith("The heads' mean: each cell is the mean")
        for layer in (2, 0, 1):
            page.locator("select.aw-layer").select_option(str(layer))
            page.wait_for_function(f"{ROOT}.model.get('layer') === {layer}")
            page.evaluate(FRAMES)
            values, got = drawn(page, n)
            np.testing.assert_allclose(values, means[layer], rtol=1e-6, atol=1e-7)
            assert got["state"] == "current"
            assert page.locator(".aw-measure figcaption").text_content() == f"the mean of layer {layer}'s heads"
            np.testing.assert_allclose(got["row"], means[layer][4] / means[layer][4].sum(), rtol=1e-6)
        assert errors == []
    finally:
        page.context.close()


def test_in_jupyterlab_a_click_asks_the_kernel_and_the_panel_follows_layer_and_temperature(open_notebook):
    setup = f"""
{kernel_model(5)}from attnwidget.mixing import attention_flow
import numpy as np
m = AttentionWidget._from_model(found, 0, 0, {{"stage": "weights", "focus": 6}})
m
"""
    page, kernel, errors = open_notebook("measures.ipynb", [setup])

    def is_pythons(expr):
        page.wait_for_selector(".aw-measure[data-state='current']", state="attached")
        values, _ = drawn(page, N)
        np.testing.assert_allclose(values, np.array(kernel.eval(expr)), rtol=1e-6, atol=1e-7)

    try:
        page.wait_for_selector(".aw-measure-choice[data-measure='rollout']")
        page.locator(".aw-measure-choice[data-measure='rollout']").click()
        assert kernel.wait_for("m.measure", lambda v: v == "rollout") == "rollout"
        is_pythons("m.rollout()[0].tolist()")
        page.locator(f".aw-head[data-layer='{LAYERS - 1}'][data-head='{HEADS - 1}']").click()
        assert kernel.wait_for("m.layer", lambda v: v == LAYERS - 1) == LAYERS - 1
        page.wait_for_function(f"{ROOT}.measure().key?.layer === {LAYERS - 1}")
        is_pythons(f"m.rollout()[{LAYERS - 1}].tolist()")
        page.evaluate(f"{ROOT}.model.set('temperature', 0.4); {ROOT}.model.save_changes()")
        assert kernel.wait_for("m.temperature", lambda t: t == 0.4) == 0.4
        page.wait_for_function(f"{ROOT}.measure().key?.temperature === 0.4")
        is_pythons(f"m.rollout()[{LAYERS - 1}].tolist()")
        page.locator(".aw-measure-choice[data-measure='flow']").click()
        page.wait_for_function(f"{ROOT}.measure().key?.measure === 'flow'")
        is_pythons("m.flow().tolist()")  # up to the last layer: the model's whole flow
        assert errors == []
    finally:
        page.context.close()


def test_two_texts_in_an_exported_page_switch_and_draw_their_difference(browser, tmp_path, tf, gpt2_tokenizer):
    from test_texts import SAME

    from attnwidget import AttentionWidget, measures

    w = AttentionWidget.from_transformers(
        gpt2(tf, gpt2_tokenizer), gpt2_tokenizer, SAME, layer=1, head=1, stage="weights", measure="difference"
    )
    n = len(w.tokens)
    want, largest = w.difference(0, 1), w.largest_difference(0, 1)
    path = tmp_path / "texts.html"
    page, errors = exported(browser, w, path, height=1600)
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        np.testing.assert_allclose(drawn(page, n)[0], want[1, 1], atol=1e-6)
        # the overview coloured by every head's largest difference
        page.wait_for_selector(".aw-heads[data-complete=true]", state="attached")
        for cell in page.locator(".aw-head").all():
            layer, head = int(cell.get_attribute("data-layer")), int(cell.get_attribute("data-head"))
            assert float(cell.get_attribute("data-value")) == pytest.approx(largest[layer, head], abs=1e-9)
        assert (
            "coloured by the largest difference from the other text"
            in page.locator(".aw-heads-caption").inner_text().lower()
        )
        # the menu says the same as the heading, not a summary the heads are not coloured by
        chosen = page.locator("select.aw-summary").evaluate("(s) => s.options[s.selectedIndex].textContent")
        assert chosen == "the largest difference from the other text (the panel's)"
        # every head at every layer carried: the head and layer controls go on working
        for layer, head in ((0, 3), (1, 0), (1, 1)):  # (back to the head exported)
            page.evaluate(f"{ROOT}.model.propose({{layer: {layer}, head: {head}}})")
            page.wait_for_function(f"{ROOT}.model.get('head') === {head} && {ROOT}.model.get('layer') === {layer}")
            page.evaluate(FRAMES)
            values, got = drawn(page, n)
            np.testing.assert_allclose(values, want[layer, head], atol=1e-6)
            assert got["hi"] == pytest.approx(np.abs(values).max(), rel=1e-6)  # its own scale, as a live page's
            assert got["state"] == "current" and f"head {head}" in page.locator(".aw-measure figcaption").text_content()
        # a button per text: the other text's weights, as Python has them; the difference says it is text 1's
        page.locator(".aw-sentence").nth(1).click()
        page.wait_for_function(f"{ROOT}.model.get('sentence_index') === 1")
        page.evaluate(FRAMES)
        w.sentence_index = 1
        np.testing.assert_allclose(
            np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], (n, n)), w.weights, atol=1e-12
        )
        assert page.locator(".aw-measure").get_attribute("data-state") == "exported"
        assert "as exported, at text 0" in page.locator(".aw-measure-status").inner_text()
        assert page.locator(".aw-sentence.aw-sentence-away").count() == 0  # this page holds both texts
        # a page over its budget holds the text shown alone: the other's button says so
        w.to_html(path, max_mb=(w.model_q.nbytes * 3 * 4 / 3 + 1e4) / 1e6)
        page.goto(path.as_uri())
        page.wait_for_selector(".aw-sentence")
        away = page.locator(".aw-sentence.aw-sentence-away")
        assert (
            away.count() == 1
            and away.get_attribute("data-index") == "0"
            and "not in this page" in away.get_attribute("title")
        )
        assert errors == []
    finally:
        page.context.close()


def test_texts_of_other_lengths_say_in_the_panel_why_they_have_no_difference(browser, tmp_path):
    from attnwidget import AttentionWidget

    w = AttentionWidget(["She sat by the river bank", "I put money in the bank", "The cat sat"], measure="difference")
    w.sentence_index = 2  # a text with no other of its length: the choice stays
    page, errors = exported(browser, w, tmp_path / "lengths.html", height=900, width=900)
    try:
        page.wait_for_selector(".aw-measure[data-state='error']")
        assert page.locator(".aw-measure-status").inner_text() == w.measures["difference"]
        assert (
            "needs another text of 3 tokens" in w.measures["difference"]
            and page.locator(".aw-measure .aw-figure").is_hidden()
        )
        # asked for there, it is refused as Python refuses it, in Python's words
        button = page.locator(".aw-measure-choice[data-measure='difference']")
        button.dispatch_event("click")  # (closes it; marked, not disabled: a reader's click reaches it)
        page.wait_for_function(f"{ROOT}.model.get('measure') === ''")
        # (the buttons act on the state they were drawn at: a click before the redraw would close it again)
        page.wait_for_selector(".aw-measure-choice[data-measure='difference'][aria-pressed='false']")
        button.dispatch_event("click")
        page.wait_for_function("document.querySelector('.aw-notice').textContent !== ''")
        w.measure = ""
        with pytest.raises(Exception, match="needs another text of 3 tokens") as err:
            w.measure = "difference"
        assert page.locator(".aw-notice").inner_text() == w.measures["difference"] == str(err.value)
        assert page.evaluate(f"{ROOT}.model.get('measure')") == "" and errors == []
    finally:
        page.context.close()


def test_an_exported_page_offers_every_measure_the_widget_offers_and_says_which_it_does_not_carry(browser, tmp_path):
    """A long text's exported page carries no flow (too slow to compute for it): its button stays,
    marked, and the panel says why, in the page's words, instead of the button going without a word."""
    n = int((measures.flow_cells(True) / 12) ** 0.5) + 2  # (offered; past a quarter second's cells)
    w = model_widget(seed=2, n=n, layers=3, heads=2)
    assert "flow" in w.offered_measures and "flow" not in w.page_state()["state"]["measure_data"]
    page, errors = exported(browser, w, tmp_path / "long.html")
    try:
        button = page.locator(".aw-measure-choice[data-measure='flow']")
        assert button.get_attribute("aria-disabled") == "true"
        button.dispatch_event("click")  # (marked, not disabled: a reader's click reaches it, and the panel says why)
        page.wait_for_function(f"{ROOT}.model.get('measure') === 'flow'")
        page.wait_for_function("document.querySelector('.aw-measure-status').textContent !== ''")
        assert "this page was exported without flow" in page.locator(".aw-measure-status").inner_text()
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_measure_is_out_of_date_once_the_page_changes_what_it_was_computed_from(browser, tmp_path):
    w = AttentionWidget("She sat by the river bank", stage="weights", measure="rollout")
    page, errors = exported(browser, w, tmp_path / "edited.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        # new queries from the page (as the dial or a script makes them): the same key, other numbers
        page.evaluate(
            f"""() => {{ const m = {ROOT}.model, q = m.get('q');
            window.exportedQ = q;
            const f = new Float64Array(q.view.buffer.slice(q.view.byteOffset, q.view.byteOffset + q.view.byteLength));
            f[0] += 0.5;
            m.set('q', {{ shape: q.shape, dtype: q.dtype, view: new DataView(f.buffer) }}); }}"""
        )
        page.wait_for_selector(".aw-measure[data-state='exported']")
        status = page.locator(".aw-measure-status").inner_text()
        assert "the q exported (changed here since)" in status, status
        # the same numbers again, in a new array: current again
        page.evaluate(
            f"""() => {{ const q = window.exportedQ, start = q.view.byteOffset;
            const copy = new DataView(q.view.buffer.slice(start, start + q.view.byteLength));
            {ROOT}.model.set('q', {{ shape: q.shape, dtype: q.dtype, view: copy }}); }}"""
        )
        page.wait_for_selector(".aw-measure[data-state='current']")
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_measure_stays_out_of_date_across_a_switch_that_keeps_the_arrays_changed(browser, tmp_path):
    w = AttentionWidget(["She sat by the river bank", "He sat by the money bank"], stage="weights", measure="rollout")
    page, errors = exported(browser, w, tmp_path / "mask.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        # a mask from a script (each token reads itself and the first), then another text and back: the mask stays
        page.evaluate(
            f"""() => {{ const bytes = new Uint8Array(36);
            for (let i = 0; i < 6; i++) {{ bytes[i * 6] = 1; bytes[i * 6 + i] = 1; }}
            {ROOT}.model.set('mask', {{ shape: [6, 6], dtype: 'uint8', view: new DataView(bytes.buffer) }}); }}"""
        )
        page.wait_for_selector(".aw-measure[data-state='exported']")
        to_the_other_text_and_back(page)
        assert page.evaluate(f"{ROOT}.model.get('mask')") is not None
        assert page.locator(".aw-measure").get_attribute("data-state") == "exported"
        assert "the mask exported (changed here since)" in page.locator(".aw-measure-status").inner_text()
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_mask_a_switch_drops_leaves_the_measure_out_of_date(browser, tmp_path):
    """A mask exported with the page, dropped by a switch to a shorter text (it no longer fits),
    is gone when the page comes back: the measure computed with it says so, not current."""
    keep = np.eye(6, dtype=bool)
    keep[:, 0] = True
    w = AttentionWidget(["She sat by the river bank", "He sat by it"], stage="weights", measure="rollout", mask=keep)
    page, errors = exported(browser, w, tmp_path / "dropped.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        to_the_other_text_and_back(page)
        assert page.evaluate(f"{ROOT}.model.get('mask')") is None  # (dropped, as in Python)
        w.sentence_index = 1
        w.sentence_index = 0
        assert w.mask is None
        assert page.locator(".aw-measure").get_attribute("data-state") == "exported"
        assert "mask" in page.locator(".aw-measure-status").inner_text()
        assert errors == []
    finally:
        page.context.close()


def test_a_bias_set_here_stays_a_change_across_a_layer_switch(browser, tmp_path):
    """A model without a bias of each layer's own brings none with a layer: a bias a script set
    stays, and the measures computed without it say they are out of date."""
    w = model_widget(n=5, layers=3, heads=2)
    w.measure = "rollout"
    page, errors = exported(browser, w, tmp_path / "bias.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        page.evaluate(
            f"""() => {{ const f = new Float64Array(25).fill(0.5);
            {ROOT}.model.set('bias', {{ shape: [5, 5], dtype: 'float64', view: new DataView(f.buffer) }}); }}"""
        )
        page.wait_for_selector(".aw-measure[data-state='exported']")
        page.evaluate(f"{ROOT}.model.set('layer', 2)")
        page.wait_for_function(f"{ROOT}.model.get('layer') === 2")
        assert page.evaluate(f"{ROOT}.model.get('bias')") is not None
        assert page.evaluate(f"{ROOT}.model.edited()") == ["bias"]
        assert page.locator(".aw-measure").get_attribute("data-state") == "exported"
        assert errors == []
    finally:
        page.context.close()


def test_an_exported_page_computes_weight_times_value_length_itself_at_every_state(browser, tmp_path):
    """Where the heads add their values as they are (no output projection), an exported page carries
    no weight × ‖value‖ (every head's would be about half a long text's page): it computes it from
    its own arrays, for the state shown, so it follows the temperature, head, causal rule, sink and
    values changed in the page, as Python's w.norms() does."""
    rng = np.random.default_rng(7)
    n, heads = 9, 3
    q, k, v = rng.normal(size=(3, heads, n, 4)) * np.array([1, 1, 3])[:, None, None, None]
    w = AttentionWidget(tokens=[f"t{i}" for i in range(n)], q=q, k=k, v=v, stage="weights", measure="norms")
    assert w.page_state()["state"]["measure_data"]["norms"] == {"in_page": True}
    page, errors = exported(browser, w, tmp_path / "norms.html")
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        for _ in range(6):
            change = {
                "temperature": float(rng.choice([0.3, 1.0, 2.5])),
                "head": int(rng.integers(heads)),
                "causal": bool(rng.integers(2)),
                "sink": bool(rng.integers(2)),
                "focus": int(rng.integers(n)),
            }
            page.evaluate(
                f"(c) => {{ const m = {ROOT}.model; for (const [k, x] of Object.entries(c)) m.set(k, x); }}", change
            )
            page.evaluate(FRAMES)
            w.set_state(change)
            values, got = drawn(page, n)
            assert got["state"] == "current", (change, got["state"])
            np.testing.assert_allclose(values, w.norms()[w.head], rtol=1e-6, atol=1e-12, err_msg=str(change))
            assert f"weight × ‖value‖, head {w.head}" in page.locator(".aw-measure figcaption").text_content()
        # values set in the page: the norms are of them, still current
        page.evaluate(
            f"""() => {{ const m = {ROOT}.model, v = m.get('v');
            const f = new Float64Array(v.view.buffer.slice(v.view.byteOffset, v.view.byteOffset + v.view.byteLength));
            for (let i = 0; i < f.length; i++) f[i] *= 1 + (i % 5) / 10;
            m.set('v', {{ shape: v.shape, dtype: v.dtype, view: new DataView(f.buffer) }}); }}"""
        )
        page.evaluate(FRAMES)
        w.v = v * (1 + (np.arange(v.size) % 5) / 10).reshape(v.shape)
        values, got = drawn(page, n)
        assert got["state"] == "current"
        np.testing.assert_allclose(values, w.norms()[w.head], rtol=1e-6, atol=1e-12)
        # values past what float32 can draw: said, as Python's panel says it
        page.evaluate(
            f"""() => {{ const m = {ROOT}.model, v = m.get('v');
            const f = new Float64Array(v.view.buffer.slice(v.view.byteOffset, v.view.byteOffset + v.view.byteLength));
            for (let i = 0; i < f.length; i++) f[i] *= 1e40;
            m.set('v', {{ shape: v.shape, dtype: v.dtype, view: new DataView(f.buffer) }}); }}"""
        )
        page.evaluate(FRAMES)
        w.v = w.v * 1e40
        w.measure = ""
        w.measure = "norms"
        said = w.page_state()["state"]["measure_data"]
        python = computed_views.entry("norms", w._inputs())["error"]
        assert said["norms"] == {"in_page": True} and "too large to draw" in python
        assert page.locator(".aw-measure").get_attribute("data-state") == "error"
        assert page.locator(".aw-measure-status").inner_text() == python
        assert errors == []
    finally:
        page.context.close()


def test_the_panels_cells_follow_its_numbers_when_the_scale_stays_the_same(browser, tmp_path):
    """Cells too small for numbers are one image, kept while the numbers are the same: a new
    temperature gives the page's weight × ‖value‖ new numbers under the same top of the scale (row
    0 of a causal matrix reads only key 0, whose value is the longest), and the cells follow them."""
    n, rng = 30, np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 2, n, 4))
    v[:, 0] *= 10
    w = AttentionWidget(
        tokens=[f"t{i}" for i in range(n)], q=q, k=k, v=v, causal=True, stage="weights", measure="norms"
    )
    page, errors = exported(browser, w, tmp_path / "same-top.html")
    cells = f"""() => {{ const c = document.querySelector('.aw-measure canvas.aw-grid'), d = c.dataset;
        const k = devicePixelRatio, all = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, out = [];
        for (let i = 0; i < {n}; i++) for (let j = 0; j < {n}; j++) {{
            const y = Math.round((+d.top + i * d.cellHeight + 3) * k);
            const p = (y * c.width + Math.round((+d.left + j * d.cellWidth + 3) * k)) * 4;
            out.push([all[p], all[p + 1], all[p + 2]]); }}
        return [out, +d.cellWidth]; }}"""
    try:
        page.wait_for_selector(".aw-measure[data-state='current']")
        before, width = page.evaluate(cells)
        assert width < 34  # no numbers in the cells: drawn as one image
        values, got = drawn(page, n)
        page.evaluate(f"{ROOT}.model.set('temperature', 3.0)")
        page.evaluate(FRAMES)
        after, _ = page.evaluate(cells)
        changed, got_after = drawn(page, n)
        assert got_after["hi"] == got["hi"]  # the same top of the scale
        w.temperature = 3.0
        np.testing.assert_allclose(changed, w.norms()[0], rtol=1e-6, atol=1e-12)
        steps = np.abs(changed - values) / got["hi"] * 255  # colour-table steps each cell's number moved
        moved = np.abs(np.array(after, int) - np.array(before, int)).max(axis=-1).reshape(n, n)
        open_ = np.tril(np.ones((n, n), bool))
        assert (steps[open_] > 3).sum() > 20
        assert (moved[open_ & (steps > 3)] > 0).all()
        assert errors == []
    finally:
        page.context.close()
