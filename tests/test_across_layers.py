"""Across layers (Abnar & Zuidema, 2020): attention rollout and attention flow, against the
formula written out here and against networkx's maximum flow."""

from types import SimpleNamespace
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_integrations import minilm, tf  # (fixtures)
from test_layers import fake_model
from test_weights import each_head

from attnwidget import AttentionWidget, inputs, maxflow, threads
from attnwidget.formulas import allowed_cells
from attnwidget.mixing import attention_flow, rollout


def mixed(w):
    """Â: half the heads' mean, half the identity, rows renormalised."""
    a = 0.5 * w.mean(axis=0) + 0.5 * np.eye(w.shape[-1])
    return a / a.sum(axis=-1, keepdims=True)


def model_widget(seed=0, n=6, layers=3, heads=2):
    return AttentionWidget._from_model(fake_model(n_layers=layers, heads=heads, n=n, d=4, seed=seed), 0, 0, {})


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 4), st.integers(0, 2**31), st.sampled_from([(256, 2), (1, 3), (2, 2)]))
def test_rollout_is_the_product_of_each_layers_mixed_weights_and_its_rows_sum_to_1(n, layers, seed, split):
    """Also with its rows shared among several cores (here: parts of one or two rows, among three or two)."""
    rng = np.random.default_rng(seed)
    w = rng.random((layers, 3, n, n))
    w /= w.sum(axis=-1, keepdims=True)
    want, acc = [], np.eye(n)
    for layer in w:
        acc = mixed(layer) @ acc
        want.append(acc)
    with patch.object(threads, "LEAST", split[0]), patch.object(threads, "count", lambda: split[1]):
        got = rollout(w)
        np.testing.assert_allclose(got, np.array(want), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-12)
        # the same, layer after layer from an iterator (its result made once), and the last layer's alone
        np.testing.assert_array_equal(rollout(iter(w)), got)
        np.testing.assert_array_equal(rollout(iter(w), last=True), got[-1])
        np.testing.assert_array_equal(rollout(w, last=True), got[-1])


@pytest.fixture(params=["igraph", "dinic"])
def solver(request, monkeypatch):
    """Each maximum-flow routine in turn: igraph's, and the one written here for when igraph is absent."""
    if request.param == "igraph":
        pytest.importorskip("igraph")
    else:
        monkeypatch.setattr(maxflow, "compiled_flow", lambda: False)
    return request.param


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 4), st.integers(1, 7), st.booleans(), st.floats(0, 0.6), st.integers(0, 2**31))
def test_flow_is_networkxs_maximum_flow_through_the_layered_graph(solver, layers, n, causal, zeros, seed):
    """Random layers, causal or two-way, some weights exactly 0 (a causal graph's pairs are computed on
    their window alone, and every pair's graph keeps only its own tokens below and above)."""
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(seed)
    w = rng.random((layers, 2, n, n)) * (rng.random((layers, 2, n, n)) >= zeros) * (np.tri(n) if causal else 1)
    w[..., np.arange(n), np.arange(n)] += 1e-3  # every row reads something
    w /= w.sum(axis=-1, keepdims=True)
    got = attention_flow(w)
    graph = nx.DiGraph()
    for at, layer in enumerate(w):
        a = mixed(layer)
        for i in range(n):
            for j in range(n):
                if a[i, j] > 0:
                    graph.add_edge((at, j), (at + 1, i), capacity=a[i, j])  # row i of layer at reads token j below it
    for i in range(n):
        for j in range(n):
            want = nx.maximum_flow_value(graph, (0, j), (layers, i)) if nx.has_path(graph, (0, j), (layers, i)) else 0.0
            assert got[i, j] == pytest.approx(want, abs=1e-9)


def test_a_models_widget_gives_its_rollout_and_flow_at_its_temperature_and_mask():
    w = model_widget()
    w.temperature = 0.6
    weights = each_head(w)
    np.testing.assert_allclose(w.rollout(), rollout(weights), rtol=1e-12)
    np.testing.assert_allclose(w.flow(), attention_flow(weights), rtol=1e-9, atol=1e-12)
    assert w.rollout().shape == (3, 6, 6) and w.flow().shape == (6, 6)


def test_minilms_rollout_is_the_formula_on_its_own_output_attentions(minilm):
    import torch

    model, tokenizer = minilm
    w = AttentionWidget.from_transformers(model, tokenizer, "I sat on the river bank")
    with torch.no_grad():
        attentions = model(
            **tokenizer("I sat on the river bank", return_tensors="pt"), output_attentions=True
        ).attentions
    want, acc = [], np.eye(len(w.tokens))
    for a in attentions:
        acc = mixed(a[0].double().numpy()) @ acc
        want.append(acc)
    np.testing.assert_allclose(w.rollout(), np.array(want), atol=1e-5)
    np.testing.assert_allclose(w.rollout().sum(axis=-1), 1.0, rtol=1e-12)


def test_cross_attention_has_no_rollout():
    from test_cross import fake_seq2seq

    w = AttentionWidget._from_model(fake_seq2seq(), 0, 0, {}, "cross")
    with pytest.raises(ValueError, match="it is for self-attention, not cross-attention"):
        w.rollout()


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 300),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    masked=st.booleans(),
    temperature=st.sampled_from([1.0, 0.3, 1e-300, 7.0]),
    softcap=st.sampled_from([None, 5.0]),
    biased=st.booleans(),
    huge=st.booleans(),
    rows=st.sampled_from([2, 7, 256]),
    by=st.sampled_from(["numpy", "torch"]),
    reused=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_a_layers_weights_are_each_heads_own_whatever_the_blocks(
    n, heads, causal, masked, temperature, softcap, biased, huge, rows, by, reused, seed
):
    """The measures' weights (Inputs.weights_of: scored a block of rows at a time, up to the last
    column a block may read, heads shared among the cores, or torch's on a model's device) are the widget's
    own for each head (core.Attention: one whole matrix), to rounding; to the bit where scores near
    float64's limit. ``reused``: written over another layer's numbers (Inputs.weights' buffer)."""

    from attnwidget.formulas import Attention

    kept = inputs.ROWS, inputs.GPUS
    inputs.ROWS, inputs.GPUS = rows, ("cuda", "cpu")
    try:
        rng = np.random.default_rng(seed)
        q, k, v = (rng.normal(size=(heads, n, 4)) * (1e77 if huge else 1) for _ in range(3))
        mask = rng.random((n, n)) > 0.3 if masked else None
        bias = rng.normal(size=(heads, n, n)) if biased else None
        if biased:
            bias[rng.random(bias.shape) < 0.2] = np.finfo(float).min  # (a model's additive mask: closed cells)
        # torch's path (a GPU's), here on the CPU: the CPU named "cpu:0" and counted as a GPU for the test
        at = SimpleNamespace(
            scale=0.5, softcap=softcap, temperature=temperature, device="cpu:0" if by == "torch" else None
        )
        before = rng.random((heads, n, n)) if reused else None
        with np.errstate(all="ignore"):
            got = inputs.Inputs.weights_of(at, q, k, allowed_cells(n, causal, mask), bias, out=before)
            for h in range(heads):
                own = Attention(
                    q[h],
                    k[h],
                    v[h],
                    temperature=temperature,
                    causal=causal,
                    mask=mask,
                    softcap=softcap,
                    bias=None if bias is None else bias[h],
                ).weights
                if huge:
                    np.testing.assert_array_equal(got[h], own)
                else:
                    np.testing.assert_allclose(got[h], own, rtol=1e-12, atol=1e-15)
    finally:
        inputs.ROWS, inputs.GPUS = kept


def test_a_model_on_a_gpu_has_its_views_weights_made_there_with_the_cpus_numbers(monkeypatch):
    """A model on a GPU has its layers' weights made there by torch in float64: rollout, flow and the
    summaries equal the CPU's (torch's path runs here on the CPU, "cpu:0" counted as a GPU). Apple's mps
    has no float64: a model there keeps numpy's path."""

    w = model_widget(seed=3, n=7, layers=3, heads=2)
    w.set_state({"temperature": 0.7, "sink": True})
    cpu = w.rollout(), w.flow(), w.head_summary()
    made, torch_weights = [], inputs._torch_weights
    monkeypatch.setattr(inputs, "_torch_weights", lambda *a: made.append(a[0].device) or torch_weights(*a))
    w._device = "mps"
    np.testing.assert_array_equal(w.rollout(), cpu[0])
    assert made == []
    monkeypatch.setattr(inputs, "GPUS", ("cuda", "cpu"))
    w._device = "cpu:0"
    there = w.rollout(), w.flow(), w.head_summary()
    assert made and set(made) == {"cpu:0"}
    np.testing.assert_allclose(there[0], cpu[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(there[1], cpu[1], rtol=1e-9, atol=1e-12)
    for name in cpu[2]:
        np.testing.assert_allclose(there[2][name], cpu[2][name], rtol=1e-12, atol=1e-15)


def test_a_layers_heads_share_the_cores_with_blas_in_one_thread_and_leave_it_as_they_found_it():
    """While a layer's heads are shared among the cores, numpy's BLAS runs in one thread (two of its own
    under each would crowd the cores); the limit is the process's, set by the first layer in and lifted by
    the last out, so layers computed at once in several threads (as the overview computes them) leave
    BLAS with its own threads."""
    import threading

    threadpoolctl = pytest.importorskip("threadpoolctl")

    blas = lambda: sorted({i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"})
    before = blas()
    if before in ([], [1]):
        pytest.skip("numpy's BLAS has one thread here already")
    first, second = threads.one_blas_thread(), threads.one_blas_thread()  # two layers, in two threads
    first.__enter__()
    second.__enter__()
    assert blas() == [1]
    first.__exit__(None, None, None)  # the first out, the second still in: still one thread
    assert blas() == [1]
    second.__exit__(None, None, None)
    assert blas() == before
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 3, 300, 8))
    at = SimpleNamespace(scale=None, softcap=None, temperature=1.0, device="cpu")
    layers = [
        threading.Thread(target=inputs.Inputs.weights_of, args=(at, q, k, allowed_cells(300, True))) for _ in range(4)
    ]
    for t in layers:
        t.start()
    for t in layers:
        t.join(timeout=60)
    assert blas() == before and threads._INSIDE == 0


def test_a_blas_loaded_after_the_first_layer_runs_in_one_thread_too():
    """scipy's own OpenBLAS, loaded after a first layer (in a fresh process), is limited like numpy's."""
    import subprocess
    import sys

    pytest.importorskip("threadpoolctl")
    pytest.importorskip("scipy")
    code = (
        "import threadpoolctl; from attnwidget import threads\n"
        "with threads.one_blas_thread(): pass\n"
        "import scipy.linalg\n"
        "with threads.one_blas_thread():\n"
        "    print(sorted({i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[1]"


def test_a_widget_of_your_own_arrays_computes_its_views_without_importing_torch():
    """Only a model on a GPU takes torch's path: a lab widget's summaries and rollout do not pay torch's import."""
    import subprocess
    import sys

    code = (
        "import sys; from attnwidget import AttentionWidget; w = AttentionWidget('She sat by the river bank'); "
        "w.head_summary(); w.rollout(); print('torch' in sys.modules)"
    )
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 9),
    st.lists(st.sampled_from(["causal", "two-way", "masked", "huge"]), min_size=2, max_size=4),
    st.integers(1, 4),
    st.integers(0, 2**16),
)
def test_layer_after_layer_in_one_buffer_each_layer_is_its_own_weights(n, kinds, rows, seed):
    """Inputs.weights writes each layer over the last's and leaves the cells both leave uncomputed as
    they are: whatever the layers' masks (each its own, its blocks another's) or a layer scored whole,
    every layer is bit for bit the weights of the layer computed alone."""
    rng = np.random.default_rng(seed)
    layers = []
    for kind in kinds:
        q, k = rng.normal(size=(2, 2, n, 4)) * (1e77 if kind == "huge" else 1)
        mask = rng.random((n, n)) > 0.4 if kind == "masked" else None
        layers.append((q, k, allowed_cells(n, kind != "two-way", mask), None, None))
    at = SimpleNamespace(
        scale=0.5, softcap=None, temperature=0.9, device="cpu", each_layer=lambda up_to=None: iter(layers)
    )
    at.weights_of = lambda *a, **kw: inputs.Inputs.weights_of(at, *a, **kw)
    with patch.object(inputs, "ROWS", rows), np.errstate(all="ignore"):
        got = [w.copy() for w, _ in inputs.Inputs.weights(at)]
        alone = [inputs.Inputs.weights_of(at, *layer) for layer in layers]
    for g, a in zip(got, alone):
        np.testing.assert_array_equal(g, a)
