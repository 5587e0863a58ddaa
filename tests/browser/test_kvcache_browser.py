"""A compressed KV cache, seen in the page: the keys StreamingLLM, H2O, SnapKV or a mask keeps for the head shown,
and what the focused row loses without the rest, computed in the page as Python's w.kv_keep() computes them (any
state, in an exported page too); the layer's numbers as the kernel sends them; the controls and a token's click in
mask mode reach Python."""

import json

import numpy as np
import pytest

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

ROOT = "document.querySelector('.aw-root').attnwidget"
# a state set in the page whole, its arrays as float64 buffers (numbers exactly Python's)
SET = """([change, arrays]) => {
  for (const [name, [shape, data]] of Object.entries(arrays))
    change[name] = { shape, dtype: "float64", view: new DataView(new Float64Array(data).buffer) };
  const root = document.querySelector('.aw-root').attnwidget, refused = root.model.propose(change);
  if (refused) throw new Error(refused);
  root.redraw();
  return root.kv();
}"""


def _page(browser, w, tmp_path, width=1000, scheme="light"):
    path = tmp_path / "kv.html"
    w.to_html(path)
    page = browser.new_context(
        viewport={"width": width, "height": 1200}, color_scheme=scheme, bypass_csp=True
    ).new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function(f"{ROOT}.ready()")
    return page, errors


def _kept(row):
    return [int(j) for j in np.flatnonzero(row)]


def _same(a, b):
    return (a is None and np.isnan(b)) or (a is not None and abs(a - b) < 1e-9)


def test_the_page_keeps_the_keys_python_keeps_and_says_what_the_row_loses(browser, tmp_path):
    rng = np.random.default_rng(58)
    n, heads = 72, 3
    tokens = [f"t{i}" for i in range(n)]
    w = AttentionWidget(
        tokens=tokens,
        q=rng.normal(size=(heads, n, 4)),
        k=rng.normal(size=(heads, n, 4)),
        v=rng.normal(size=(heads, n, 3)),
        stage="weights",
        kv_method="h2o",
        kv_budget=16,
    )
    page, errors = _page(browser, w, tmp_path)
    try:
        # at the state exported: the layer's numbers are those the page carries
        got = page.evaluate(f"{ROOT}.kv()")
        want = w.kv_keep()
        assert got["keep"] == [int(x) for x in want["kept"][w.head]]
        assert got["layer"] is not None
        assert abs(got["layer"]["retained"] - want["layer_retained"]) < 1e-9
        assert abs(got["layer"]["change"] - want["layer_change"]) < 1e-9
        for case in range(48):
            # a shorter text, its budget mostly below its length; the first few past SnapKV's window of 64
            m = n if case < 4 else int(rng.integers(2, 20) if case % 2 else rng.integers(20, n + 1))
            budget = int(
                rng.integers(65, n)
                if case < 4
                else rng.integers(1, m)
                if rng.random() < 0.85
                else rng.integers(m, m + 9)
            )
            arrays = {
                "q": rng.normal(size=(heads, m, 4)) * rng.uniform(0.3, 3),
                "k": rng.normal(size=(heads, m, 4)),
                "v": rng.normal(size=(heads, m, 3)),
            }
            method = ["streaming", "h2o", "snapkv", "mask"][case % 4]
            keys = rng.integers(0, m + (case % 8 == 3) * 3, size=int(rng.integers(0, 6)))  # (some past the text)
            state = dict(
                tokens=tokens[:m],
                causal=bool(rng.integers(2)),
                temperature=float(np.round(rng.uniform(0.1, 5), 2)),
                focus=int(rng.integers(m)),
                head=int(rng.integers(heads)),
                kv_method=method,
                kv_budget=budget,
                kv_keys=sorted({int(j) for j in keys}),
            )
            if case in (5, 6):  # every key of a head alike, read both ways: every score ties, the earlier key kept
                arrays["k"][:] = arrays["k"][:, :1]
                state["causal"] = False
            w = AttentionWidget(**state, **arrays)
            got = page.evaluate(SET, [state, {k: [list(a.shape), a.ravel().tolist()] for k, a in arrays.items()}])
            try:
                want = w.kv_keep()
            except ValueError as e:  # (kv_keys past the keys read: the page says Python's words)
                assert got["error"] == str(e), (case, state)
                continue
            assert got["error"] is None
            assert _kept(got["keep"]) == _kept(want["kept"][w.head]), (case, state)
            assert _same(got["retained"], want["retained"][w.head]), (case, got, want)
            assert _same(got["change"], want["change"][w.head]), (case, got, want)
            assert got["layer"] is None  # (another state than the one exported: the kernel's numbers are not here)
            said = page.locator(".aw-kv").inner_text()
            kept = len(_kept(want["kept"][w.head]))
            assert f"keeps {kept} of {m} keys" in said or (kept == m and f"keeps all {m} keys" in said), said
            assert f"retained mass {want['retained'][w.head]:.3f}" in said, said
            assert "in a live notebook" in said, said
        # the strip strikes the evicted tokens out, and says why in their titles
        evicted = page.evaluate("[...document.querySelectorAll('.aw-token.aw-evicted')].map(b => +b.dataset.index)")
        assert evicted == [j for j in range(len(w.tokens)) if not w.kv_keep()["kept"][w.head][j]]
        if evicted:
            title = page.locator(f".aw-token[data-index='{evicted[0]}']").get_attribute("title")
            assert "evicted" in title, title
        assert not errors, errors
    finally:
        page.context.close()


def test_token_text_stays_text_and_evicted_tokens_say_so(browser, tmp_path):
    tokens = ["<b>bold</b>", "<img src=x onerror=alert(1)>", "a", "b", "c", "d", "e", "f"]
    q, k, v = np.random.default_rng(1).normal(size=(3, 8, 2))
    w = AttentionWidget(tokens=tokens, q=q, k=k, v=v, stage="scores", kv_method="streaming", kv_budget=5, focus=7)
    page, errors = _page(browser, w, tmp_path)
    try:
        texts = page.evaluate("[...document.querySelectorAll('.aw-token-text')].map(s => s.textContent)")
        assert texts == tokens
        assert page.locator(".aw-token b, .aw-token img, .aw-kv b b, .aw-kv img").count() == 0
        assert page.evaluate("[...document.querySelectorAll('.aw-token.aw-evicted')].map(b => +b.dataset.index)") == [
            4,
            5,
            6,
        ]
        said = page.locator(".aw-kv").inner_text()
        assert "keeps 5 of 8 keys" in said and "StreamingLLM" in said, said
        assert not errors, errors
    finally:
        page.context.close()


def test_the_controls_and_a_tokens_click_in_mask_mode_reach_python(open_notebook):
    page, kernel, errors = open_notebook(
        "kv.ipynb", ["from attnwidget import AttentionWidget\nw = AttentionWidget(stage='weights', focus=5)\nw"]
    )
    try:
        page.wait_for_selector(".aw-kv-method")
        page.select_option(".aw-kv-method", "h2o")
        assert kernel.wait_for("w.kv_method", lambda v: v == "h2o") == "h2o"
        page.fill(".aw-kv-budget", "3")
        page.locator(".aw-kv-budget").dispatch_event("change")
        assert kernel.wait_for("w.kv_budget", lambda v: v == 3) == 3
        # the layer's numbers come from the kernel once its answer is for the state shown
        want = kernel.eval("w.kv_keep()['layer_retained']")
        page.wait_for_function(f"{ROOT}.kv()?.layer != null", timeout=10_000)
        assert abs(page.evaluate(f"{ROOT}.kv().layer.retained") - want) < 1e-9
        # a click on a token focuses it, until mask mode: then it keeps or evicts that key
        page.locator(".aw-token[data-index='2']").click()
        assert kernel.wait_for("w.focus", lambda v: v == 2) == 2
        page.select_option(".aw-kv-method", "mask")
        assert kernel.wait_for("w.kv_method", lambda v: v == "mask") == "mask"
        page.locator(".aw-token[data-index='1']").click()
        page.locator(".aw-token[data-index='4']").click()
        assert kernel.wait_for("w.kv_keys", lambda v: v == [1, 4]) == [1, 4]
        page.locator(".aw-token[data-index='1']").click()
        assert kernel.wait_for("w.kv_keys", lambda v: v == [4]) == [4]
        assert kernel.eval("w.focus") == 2
        page.select_option(".aw-kv-method", "")
        assert kernel.wait_for("w.kv_method", lambda v: v == "") == ""
        assert page.locator(".aw-kv").is_hidden()
        assert not [e for e in errors if "favicon" not in e], errors
    finally:
        kernel.close()
        page.context.close()
