"""The page never shows a number Python would not: states hunted by hypothesis are loaded into
one exported page and its numbers compared with numpy's; where rounding could make them
differ, the page must say so. And every size draws."""

from types import SimpleNamespace

import numpy as np
import pytest
import traitlets
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from attnwidget import AttentionWidget

pytestmark = pytest.mark.browser

STAGES = ["tokens", "qk", "scores", "weights", "blend"]

# Loads a state into the page's own model (arrays decoded as the exported page decodes them),
# draws it, and returns the page's numbers.
LOAD = """(state) => {
  const root = document.querySelector('.aw-root'), model = root.attnwidget.model;
  const decode = (v) => (v && typeof v.base64 === 'string')
    ? { shape: v.shape, dtype: v.dtype, view: new DataView(Uint8Array.from(atob(v.base64), \
(c) => c.charCodeAt(0)).buffer) } : v;
  const writable = model.get('_constants').writable;  \
// a whole change, settled by the page's rules as Python settles it
  const refused = model.propose(Object.fromEntries(Object.entries(state).filter(([k]) => \
writable.includes(k)).map(([k, v]) => [k, decode(v)])));
  if (refused) throw new Error(refused);
  root.attnwidget.redraw();
  return root.attnwidget.numbers();
}"""


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("trust") / "base.html"
    rng = np.random.default_rng(0)
    AttentionWidget(q=rng.normal(size=(3, 2)), k=rng.normal(size=(3, 2)), v=rng.normal(size=(3, 2))).to_html(path)
    ctx = browser.new_context(viewport={"width": 1100, "height": 900})
    p = ctx.new_page()
    p.errors = []
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    p.route("**/*", lambda r: r.continue_() if r.request.url == path.as_uri() else r.abort())
    p.goto(path.as_uri())
    p.wait_for_selector(".aw-root")
    yield p
    ctx.close()


def load(page, w):
    return page.evaluate(LOAD, w.page_state()["state"])


def agrees(got, w):
    """The page's numbers equal numpy's: weights to 1e-6, scores and outputs to 1e-6 of their scale."""
    S, W, out, v = w.scores, w.weights, w.output, w._head(w.v)
    return (
        np.abs(np.array(got["scores"]) - S.ravel()).max() <= 1e-6 * max(1.0, np.abs(S).max())
        and np.abs(np.array(got["weights"]) - W.ravel()).max() <= 1e-6
        and np.abs(np.array(got["output"]) - out.ravel()).max() <= 1e-6 * max(1.0, np.abs(v).max())
    )


@st.composite
def states(draw):
    heads, n, dk, dv = (
        draw(st.integers(1, 3)),
        draw(st.integers(1, 7)),
        draw(st.integers(1, 5)),
        draw(st.integers(1, 3)),
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    eq = draw(st.integers(-40, 160))
    ek = draw(st.integers(-40, min(160, 270 - eq)))  # beyond that the scores overflow, and the widget refuses them
    q, k, v = (
        rng.normal(size=(heads, n, d)) * 10.0**e for d, e in ((dk, eq), (dk, ek), (dv, draw(st.integers(-40, 160))))
    )
    if n > 1 and draw(st.booleans()):  # a near-tie: two keys that differ in the ninth digit
        k[:, 1] = k[:, 0] * (1 + 1e-9)
    if draw(st.booleans()):  # float32 numbers, as a real model's are (they travel as float32)
        with np.errstate(over="ignore"):
            q, k, v = (a.astype(np.float32).astype(float) for a in (q, k, v))
    temperature = draw(
        st.one_of(st.sampled_from([5e-324, 1e-300, 1e-12, 1e-6, 0.1, 1.0, 5.0, 1e6, 1e300]), st.floats(1e-3, 1e3))
    )
    scale = draw(st.one_of(st.none(), st.sampled_from([0.0, 1e-10, -0.5, 3.0, 1e10]), st.floats(-10, 10)))
    mask = rng.random((n, n)) < 0.7 if draw(st.booleans()) else None  # rows that may read nothing, too
    try:
        return AttentionWidget(
            q=q,
            k=k,
            v=v,
            mask=mask,
            temperature=temperature,
            scale=scale,
            causal=draw(st.booleans()),
            head=draw(st.integers(0, heads - 1)),
            stage=draw(st.sampled_from(STAGES)),
        )
    except traitlets.TraitError:
        assume(False)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(states())
def test_the_page_agrees_with_numpy_or_says_it_cannot(page, w):
    got = load(page, w)
    assert not page.errors, page.errors
    assert None not in got["weights"] + got["output"]  # NaN and inf arrive as null
    event("exact" if got["exact"] else "the page says it cannot")  # --hypothesis-show-statistics shows the mix
    if got["exact"]:
        assert agrees(got, w)
    else:
        assert "too sensitive to rounding" in got["notice"]


def test_ordinary_states_are_exact(page):
    rng = np.random.default_rng(3)
    model = rng.normal(size=(3, 40, 16)).astype(np.float32)  # a real model's float32 numbers
    for w in [AttentionWidget(temperature=t) for t in (0.1, 1.0, 5.0)] + [
        AttentionWidget(q=model, k=model[::-1], v=model, causal=True, temperature=0.1),
        AttentionWidget(
            q=rng.normal(size=(12, 8)), k=rng.normal(size=(12, 8)), v=rng.normal(size=(12, 5)), temperature=0.1
        ),
    ]:
        got = load(page, w)
        assert got["exact"] and agrees(got, w)
        assert page.locator(".aw-notice").is_hidden()


def test_the_cases_float32_got_wrong_now_agree(page):
    # two keys that differ by 1e-9 against a query of 1e8 (float32 made them equal)
    w = AttentionWidget(tokens=["a", "b"], q=[[1e8], [1e8]], k=[[1.0], [1.0 + 1e-8]], v=[[0.0, 1.0], [1.0, 0.0]])
    got = load(page, w)
    assert got["exact"] and agrees(got, w)
    assert np.round(got["weights"][:2], 2).tolist() == [0.27, 0.73]
    # a very small temperature (1/T overflowed to NaN), and vectors beyond float32's range
    for w in [
        AttentionWidget(temperature=1e-300),
        AttentionWidget(
            tokens=["a", "b", "c"],
            q=np.full((3, 2), 1e39),
            k=[[1e-39, 0], [0, 3e-39], [-2e-39, 1e-39]],
            v=np.eye(3)[:, :2],
        ),
    ]:
        got = load(page, w)
        assert got["exact"] and agrees(got, w)
    assert not page.errors, page.errors


def test_the_page_says_when_rounding_could_change_its_numbers(page, artifacts):
    k = np.array([[1.0, 0.0], [np.nextafter(1.0, 2.0), 0.0], [0.0, 1.0]])  # a tie to the last digit
    w = AttentionWidget(
        tokens=["x", "y", "z"], q=np.full((3, 2), 1e8), k=k, v=np.eye(3)[:, :2], temperature=1e-12, stage="weights"
    )
    got = load(page, w)
    assert not got["exact"]
    notice = page.locator(".aw-notice")
    assert (
        notice.is_visible()
        and "too sensitive to rounding" in notice.inner_text()
        and "T = 1e-12" in notice.inner_text()
    )
    page.locator(".aw-root").screenshot(path=str(artifacts / "rounding-notice.png"))
    # a temperature the rounding cannot reach: exact again, and the notice goes
    w.temperature = 1.0
    assert load(page, w)["exact"] and notice.is_hidden()


def test_a_models_layer_after_other_vectors_in_an_exported_page(browser, tmp_path):
    rng = np.random.default_rng(0)
    found = SimpleNamespace(
        tokens=[f"t{i}" for i in range(5)],
        causal=True,
        scale=None,
        model_name="fake",
        layers=[tuple(rng.normal(size=(2, 5, 4)) for _ in range(3)) for _ in range(3)],
    )
    w = AttentionWidget._from_model(found, 0, 0, {"stage": "weights"})
    rng = np.random.default_rng(0)
    w.set_vectors(
        tokens=["a", "b"], q=rng.normal(size=(2, 2, 3)), k=rng.normal(size=(2, 2, 3)), v=rng.normal(size=(2, 2, 3))
    )
    path = tmp_path / "layers.html"
    w.to_html(path)
    ctx = browser.new_context(bypass_csp=True)  # lets the test's own wait_for_function run
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.locator(".aw-layer").select_option("2")
    page.wait_for_function("document.querySelectorAll('.aw-token-text').length === 5")
    w.layer = 2  # Python's answer to the same choice
    assert w.tokens == found.tokens
    got = page.evaluate("document.querySelector('.aw-root').attnwidget.numbers()")
    np.testing.assert_allclose(got["weights"], w.weights.ravel(), atol=1e-6)
    assert not errors, errors
    ctx.close()


def test_every_stage_draws_at_4096_tokens(browser, tmp_path, artifacts):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(4096, 64)).astype(np.float32)
    w = AttentionWidget(q=q, k=q[::-1], v=rng.normal(size=(4096, 64)).astype(np.float32))
    path = tmp_path / "long.html"
    w.to_html(path)
    ctx = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    root = page.locator(".aw-root")
    for stage in STAGES:
        root.locator(f".aw-stage[data-stage={stage}]").click()
        page.wait_for_function(f"document.querySelector('.aw-root').dataset.stage === '{stage}'")
        page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert root.locator("canvas.aw-grid:visible").count() >= 1
    root.screenshot(path=str(artifacts / "long-4096-blend.png"))
    assert not errors, errors
    ctx.close()


def test_a_mask_goes_with_its_sentence_in_an_exported_page(browser, tmp_path):
    m = np.tri(6, dtype=bool)
    m[5, 4] = False
    w = AttentionWidget(["She sat by the river bank", "I put my money in the bank today"], mask=m, stage="weights")
    path = tmp_path / "mask.html"
    w.to_html(path)
    page = browser.new_context(bypass_csp=True).new_page()
    page.goto(path.as_uri())
    for i in (1, 0):
        page.locator(f".aw-sentence[data-index='{i}']").click()
        w.sentence_index = i  # Python's answer to the same click
    got = page.evaluate("document.querySelector('.aw-root').attnwidget.numbers()")
    assert w.mask is None
    np.testing.assert_allclose(got["weights"], w.weights.ravel(), atol=1e-6)
    page.context.close()


def test_the_hatching_follows_causal_and_the_mask_on_long_inputs(browser, tmp_path):
    rng = np.random.default_rng(0)
    n = 300  # one pixel per cell, from a kept image
    mask = np.ones((n, n), dtype=bool)
    mask[:, 0] = False  # a padding column: cells are closed before causal is switched on
    w = AttentionWidget(
        q=rng.normal(size=(n, 4)), k=rng.normal(size=(n, 4)), v=rng.normal(size=(n, 2)), stage="scores", mask=mask
    )
    path = tmp_path / "hatch.html"
    w.to_html(path)
    page = browser.new_context(bypass_csp=True, device_scale_factor=1).new_page()
    page.goto(path.as_uri())
    pixel = """() => { const c = [...document.querySelectorAll('canvas.aw-grid')].find((e) => \
e.getClientRects().length);
      const d = c.dataset, x = +d.left + (280 + 0.5) * +d.cellWidth, y = +d.top + (2 + 0.5) * +d.cellHeight;
      return Array.from(c.getContext('2d').getImageData(Math.floor(x), Math.floor(y), 1, 1).data); }"""
    open_cell = page.evaluate(pixel)  # row 2 reading column 280
    page.locator(".aw-causal").check()
    page.wait_for_function("document.querySelector('.aw-root').attnwidget.model.get('causal')")
    page.evaluate("document.querySelector('.aw-root').attnwidget.redraw()")
    closed = page.evaluate(pixel)
    assert closed != open_cell  # hatched now: scores are the same, the cell image is not
    page.locator(".aw-causal").uncheck()
    page.evaluate("document.querySelector('.aw-root').attnwidget.redraw()")
    assert page.evaluate(pixel) == open_cell
    page.context.close()
