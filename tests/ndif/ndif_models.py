"""The tiny random models `make test-ndif` deploys, saved to a local folder, and their NDIF model keys.

``python tests/ndif/ndif_models.py FOLDER`` writes FOLDER/llama (2 layers, 4 query heads sharing 2 key/value
heads, rotary), FOLDER/gpt2 and FOLDER/timed (the Llama again, deployed with an execution time-out) with a
small byte-level tokenizer, and prints their keys joined by ``|``. Nothing is downloaded: a model's key
names its folder (``keyed``).
"""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from test_integrations import byte_level_tokenizer as tokenizer

CONFIGS = {
    "llama": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64),
    "gpt2": dict(n_embd=32, n_head=4, n_layer=2, n_positions=64),
}  # fmt: skip
FOLDERS = {"llama": "llama", "gpt2": "gpt2", "timed": "llama"}  # folder: family


def build(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Each family's folder under ``root``, saved once (weights, config, tokenizer)."""
    import torch
    import transformers as tf

    folders = {}
    for name, family in FOLDERS.items():
        folder = (root / name).resolve()
        if not (folder / "config.json").exists():
            torch.manual_seed(0)
            tok = tokenizer(folder)
            end = len(tok) - 1  # <|endoftext|>
            config = tf.AutoConfig.for_model(
                family, vocab_size=len(tok), bos_token_id=end, eos_token_id=end, **CONFIGS[family]
            )
            tf.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
            tok.save_pretrained(folder)
        folders[name] = folder
    return folders


def keyed(folder: pathlib.Path, **kwargs):
    """An nnsight LanguageModel of ``folder`` whose model key names the folder: nnsight asks the Hub for a
    repository's canonical name, which a local folder has not, so its own name is given here."""
    from nnsight import LanguageModel
    from nnsight.modeling.huggingface import _ID_CACHE
    from transformers import AutoTokenizer

    _ID_CACHE[str(folder)] = str(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # (the tokenizer given: nnsight 0.8.1 does not find that a text-generation pipeline of transformers 5.25
        # loads one, as that names its pipeline classes by their import paths)
        return LanguageModel(str(folder), tokenizer=AutoTokenizer.from_pretrained(folder), **kwargs)


if __name__ == "__main__":
    folders = build(pathlib.Path(sys.argv[1]))
    print("|".join(keyed(folder).to_model_key() for folder in folders.values()))
