"""Vision transformers read on one image: ViT, DeiT (with its distillation token), DINOv2 and DINOv2
with registers, built from tiny random configs (nothing is downloaded). Every layer's and head's
weights equal the model's own eager attentions; the tokens are the model's own, in order; the image
reaches the widget as the model saw it; bad input is refused before the model runs."""

import base64
import io

import numpy as np
import pytest

import attnwidget
from attnwidget import AttentionWidget
from attnwidget.integrations import from_transformers
from attnwidget.integrations.vision import LOAD

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


@pytest.fixture(scope="module")
def tf():
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    return pytest.importorskip("transformers")


def build(tf, cls, config_cls, **config):
    import torch

    torch.manual_seed(0)
    return getattr(tf, cls)(getattr(tf, config_cls)(attn_implementation="eager", **config)).eval()


def vit(tf, **config):
    return build(tf, "ViTForImageClassification", "ViTConfig", **{**SMALL, "image_size": 32, "patch_size": 8, **config})


def deit(tf):
    return build(tf, "DeiTForImageClassificationWithTeacher", "DeiTConfig", **SMALL, image_size=32, patch_size=8)


def dinov2(tf, **config):
    return build(tf, "Dinov2Model", "Dinov2Config", **{**SMALL, "image_size": 32, "patch_size": 8, **config})


def registers(tf):
    return build(
        tf, "Dinov2WithRegistersModel", "Dinov2WithRegistersConfig", **SMALL, image_size=32, patch_size=8,
        num_register_tokens=4,
    )  # fmt: skip


def vit_processor(tf, side=32):
    return tf.ViTImageProcessorPil(size={"height": side, "width": side})


def dino_processor(tf, side=32):  # DINOv2's own kind: the shorter edge resized, then the centre cropped
    return tf.BitImageProcessorPil(size={"shortest_edge": side}, crop_size={"height": side, "width": side})


def picture(height=40, width=48):
    """A plain RGB image (uint8, height × width × 3): gradients, so every patch differs."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 255 // width, y * 255 // height, (x + y) % 256], axis=-1).astype(np.uint8)


FAMILIES = {
    "vit": (vit, vit_processor, ["[CLS]"]),
    "deit": (deit, vit_processor, ["[CLS]", "[DIST]"]),
    "dinov2": (dinov2, dino_processor, ["[CLS]"]),
    "dinov2_with_registers": (registers, dino_processor, ["[CLS]", "[REG1]", "[REG2]", "[REG3]", "[REG4]"]),
}
GRID = [f"r{r}c{c}" for r in range(4) for c in range(4)]  # 32 × 32 pixels in patches of 8


def own_attentions(model, processor, image):
    import torch

    pixels = processor(images=image, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        return pixels, [a[0].double().numpy() for a in model(pixel_values=pixels, output_attentions=True).attentions]


@pytest.mark.parametrize("family", FAMILIES)
def test_every_layer_and_head_is_the_models_own_attention(tf, family):
    make, processor_of, _ = FAMILIES[family]
    model, processor = make(tf), processor_of(tf)
    image = picture()
    _, reference = own_attentions(model, processor, image)
    found = from_transformers(model, processor, image)
    assert len(found.layers) == len(reference) == 2 and not found.causal
    for layer, (q, k, v) in enumerate(found.layers):
        for h in range(4):
            got = attnwidget.attention(q[h], k[h], v[h], scale=found.scale).weights
            np.testing.assert_allclose(got, reference[layer][h], atol=1e-5, rtol=0)
    w = AttentionWidget.from_transformers(model, processor, image)
    for layer in range(2):
        w.layer = layer
        for h in range(4):
            w.head = h
            np.testing.assert_allclose(w.weights, reference[layer][h], atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_tokens_are_the_models_own_in_order(tf, family):
    make, processor_of, specials = FAMILIES[family]
    w = AttentionWidget.from_transformers(make(tf), processor_of(tf), picture())
    assert w.tokens == specials + GRID
    assert w.image["first"] == len(specials) and (w.image["rows"], w.image["cols"]) == (4, 4)
    assert w.image["patch"] == 8 and w.image["size"] == [32, 32]
    assert (w.position, w.position_about) == ("learned", "learned positions, added to the patches")
    assert not w.causal and w.stage == "weights"


def decoded(image: dict) -> np.ndarray:
    from PIL import Image

    head, data = image["src"].split(",", 1)
    assert head == "data:image/png;base64"
    with Image.open(io.BytesIO(base64.b64decode(data))) as png:
        assert png.mode == "RGB"
        return np.asarray(png)


@pytest.mark.parametrize("family", ["vit", "dinov2"])
def test_the_image_is_the_one_the_model_saw(tf, family):
    make, processor_of, _ = FAMILIES[family]
    model, processor = make(tf), processor_of(tf)
    image = picture(50, 70)  # resized (and for DINOv2 cropped) by the processor
    w = AttentionWidget.from_transformers(model, processor, image)
    pixels, _ = own_attentions(model, processor, image)
    mean, std = np.asarray(processor.image_mean), np.asarray(processor.image_std)
    seen = (pixels[0].numpy().transpose(1, 2, 0) * std + mean) * 255  # back from the processor's normalising
    shown = decoded(w.image)
    assert shown.shape == (32, 32, 3) and shown.dtype == np.uint8
    assert np.abs(shown - seen).max() <= 1
    assert set(w.image) == {"src", "rows", "cols", "first", "patch", "size"}


def test_the_exported_page_carries_the_image(tf):
    w = AttentionWidget.from_transformers(vit(tf), vit_processor(tf), picture())
    assert w.page_state()["state"]["image"] == w.image
    assert AttentionWidget().image is None and AttentionWidget().page_state()["state"]["image"] is None
    n, d = len(w.tokens), w.q.shape[-1]
    w.set_vectors(q=w.q.copy(), k=w.k.copy(), v=w.v.copy())  # the same tokens: still the image's patches
    assert w.image is not None
    w.set_vectors(
        tokens=[f"t{i}" for i in range(n - 1)], q=np.ones((n - 1, d)), k=np.ones((n - 1, d)), v=np.ones((n - 1, 2))
    )
    assert w.image is None  # other tokens: no image under them


def test_pil_greyscale_and_float_images_are_read(tf):
    from PIL import Image

    model, processor = vit(tf), vit_processor(tf)
    rgb = picture()
    base = from_transformers(model, processor, rgb)
    for same in (Image.fromarray(rgb), rgb / 255.0, (rgb / 255.0).astype(np.float32)):
        got = from_transformers(model, processor, same)
        np.testing.assert_allclose(got.layers[1][0], base.layers[1][0], atol=1e-6)
        assert got.image == base.image
    grey = rgb[..., 0]
    as_array = from_transformers(model, processor, grey)
    as_pil = from_transformers(model, processor, Image.fromarray(grey))
    as_rgb = from_transformers(model, processor, np.repeat(grey[..., None], 3, axis=-1))
    assert as_array.image == as_pil.image == as_rgb.image
    np.testing.assert_allclose(as_array.layers[0][1], as_rgb.layers[0][1], atol=1e-6)
    shown = decoded(as_array.image)
    assert (shown[..., 0] == shown[..., 1]).all() and (shown[..., 1] == shown[..., 2]).all()


def test_dinov2_fits_its_positions_to_the_processors_grid(tf):
    """DINOv2 interpolates its position table to any grid (its processor crops 224 for a model of
    518): a processor giving another size than config.image_size is read, as the model reads it."""
    model, processor = dinov2(tf, image_size=64), dino_processor(tf, 40)
    _, reference = own_attentions(model, processor, picture())
    w = AttentionWidget.from_transformers(model, processor, picture())
    assert len(w.tokens) == 1 + 25 and w.tokens[-1] == "r4c4" and w.image["size"] == [40, 40]
    for layer in range(2):
        w.layer = layer
        np.testing.assert_allclose(w.weights, reference[layer][0], atol=1e-5, rtol=0)


def test_a_224_image_in_patches_of_16_gives_197_tokens(tf):
    model = vit(tf, image_size=224, patch_size=16, hidden_size=64, num_attention_heads=2, intermediate_size=128)
    w = AttentionWidget.from_transformers(model, vit_processor(tf, 224), picture(300, 260))
    assert len(w.tokens) == 197 and w.tokens[:2] == ["[CLS]", "r0c0"] and w.tokens[-1] == "r13c13"
    assert w.q.shape == (2, 197, 32) and w.image["rows"] == w.image["cols"] == 14
    w.close()


OTHERS = {  # other vision models whose attention goes through the interface: a [CLS] or none, a bias
    "CLIPVisionModel": ({}, "CLIPImageProcessorPil", ["[CLS]"]),
    "SiglipVisionModel": ({}, "SiglipImageProcessorPil", []),
    "BeitModel": ({"use_shared_relative_position_bias": True}, "BeitImageProcessorPil", ["[CLS]"]),
}


@pytest.mark.parametrize("family", OTHERS)
def test_other_vision_models_read_through_the_interface(tf, family):
    import torch

    config, processor_class, specials = OTHERS[family]
    model = build(tf, family, family.replace("Model", "Config"), **SMALL, image_size=32, patch_size=8, **config)
    for name, p in model.named_parameters():  # (BEiT's table of relative positions starts at zero)
        if "relative_position_bias_table" in name:
            torch.nn.init.normal_(p)
    processor = getattr(tf, processor_class)(size={"height": 32, "width": 32}, do_center_crop=False)
    _, reference = own_attentions(model, processor, picture())
    w = AttentionWidget.from_transformers(model, processor, picture())
    assert w.tokens == specials + GRID and w.image["first"] == len(specials)
    assert (w.bias is not None) == (family == "BeitModel")  # BEiT's relative positions: one bias, every layer's
    for layer in range(2):
        w.layer = layer
        for h in range(4):
            w.head = h
            np.testing.assert_allclose(w.weights, reference[layer][h], atol=1e-5, rtol=0)


# --- refusals: each says what was wrong and how to fix it, before the model runs --------------


@pytest.fixture()
def untouched(tf):
    """A ViT that fails the test if it runs."""
    model = vit(tf)

    def ran(*_):
        raise AssertionError("the model ran")

    handle = model.register_forward_pre_hook(ran)
    yield model
    handle.remove()


def refused(model, processor, image, error, *advice):
    with pytest.raises(error) as e:
        from_transformers(model, processor, image)
    for words in advice:
        assert words in str(e.value), str(e.value)
    with pytest.raises(error):
        AttentionWidget.from_transformers(model, processor, image)


def test_an_image_of_the_wrong_mode_or_shape_is_refused(tf, untouched):
    from PIL import Image

    processor, rgb = vit_processor(tf), picture()
    refused(untouched, processor, Image.fromarray(rgb).convert("RGBA"), ValueError, "RGBA", '.convert("RGB")')
    refused(untouched, processor, Image.fromarray(rgb).convert("CMYK"), ValueError, "CMYK", '.convert("RGB")')
    alpha = np.concatenate([rgb, np.full(rgb.shape[:2] + (1,), 255, np.uint8)], axis=-1)
    refused(untouched, processor, alpha, ValueError, "4 channels", "[..., :3]", '.convert("RGB")')
    refused(untouched, processor, rgb.transpose(2, 0, 1), ValueError, "channels first", "transpose(1, 2, 0)")
    refused(untouched, processor, rgb[0, :, 0], ValueError, "height × width")
    refused(untouched, processor, rgb[:0], ValueError, "empty", "(0 × 48 pixels)", "at least one pixel")
    for empty in (Image.new("RGB", (0, 0)), Image.new("RGB", (0, 5)), Image.new("L", (5, 0))):  # width × height
        refused(untouched, processor, empty, ValueError, "empty", f"({empty.height} × {empty.width} pixels)")


def test_an_array_of_the_wrong_type_or_range_is_refused(tf, untouched):
    processor, rgb = vit_processor(tf), picture()
    refused(untouched, processor, rgb.astype(np.int64), ValueError, "int64", ".astype(np.uint8)")
    refused(untouched, processor, rgb.astype(np.float64), ValueError, "[0, 1]", "/ 255")
    refused(untouched, processor, np.full((8, 8, 3), np.nan), ValueError, "not finite")
    refused(untouched, processor, rgb > 128, ValueError, "bool", ".astype(np.uint8)")
    refused(untouched, processor, object(), TypeError, "PIL image", "numpy array")
    refused(untouched, processor, [picture(), picture()], ValueError, "one image", "one widget for each")


def test_a_processor_that_does_not_fit_the_model_is_refused(tf, untouched):
    refused(untouched, vit_processor(tf, 48), picture(), ValueError, "48 × 48", "32 × 32", "config.image_size")
    refused(
        dinov2(tf), dino_processor(tf, 36), picture(), ValueError, "36 × 36", "patches of 8", "multiple of 8"
    )  # DINOv2 takes other sizes, but whole patches only
    swin = build(tf, "SwinModel", "SwinConfig", image_size=32, patch_size=4, embed_dim=16, depths=[1], num_heads=[2])
    refused(swin, vit_processor(tf), picture(), NotImplementedError, "windows", "config.window_size")
    grey_model = vit(tf, num_channels=1)
    refused(grey_model, vit_processor(tf), picture(), ValueError, "3 channels", "config.num_channels")


def test_a_processor_that_divides_by_a_zero_image_std_is_refused(tf, untouched):
    for std in ([0.0, 0.0, 0.0], [0.5, 0.0, 0.5]):
        processor = tf.ViTImageProcessorPil(size={"height": 32, "width": 32}, image_std=std)
        refused(untouched, processor, picture(), ValueError, "ViTImageProcessorPil's image_std", "is 0", LOAD)
    unused = tf.ViTImageProcessorPil(size={"height": 32, "width": 32}, image_std=[0.0] * 3, do_normalize=False)
    assert from_transformers(vit(tf), unused, picture()).image is not None  # not normalising: no division by it


def test_a_vision_transformers_widget_says_why_it_has_no_head_effects(tf):
    w = AttentionWidget.from_transformers(vit(tf), vit_processor(tf), picture())
    for method in ("exact", "attribution"):
        with pytest.raises(ValueError, match="vision transformer.*next token") as e:
            w.head_effects(method=method)
        assert "made from a model" not in str(e.value)
    assert w.head_summary()["first"].shape == (2, 4)  # what it has


def test_a_tokenizer_with_an_image_or_an_image_processor_with_text_is_refused(tf, untouched):
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models

    tokenizer = tf.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, "[UNK]")))
    refused(untouched, tokenizer, picture(), TypeError, "image processor", "AutoImageProcessor.from_pretrained")
    refused(untouched, vit_processor(tf), "a text", TypeError, "reads images", "tokenizer")
    refused(untouched, tokenizer, "a text", ValueError, "reads images", "AutoImageProcessor.from_pretrained")
    refused(untouched, vit_processor(tf), ["a text", "another"], TypeError, "reads images", "tokenizer")
    text_model = build(tf, "BertModel", "BertConfig", vocab_size=8, max_position_embeddings=16, **SMALL)
    refused(text_model, vit_processor(tf), picture(), ValueError, "reads text", "tokenizer")
    with pytest.raises(ValueError, match="generate="):
        from_transformers(untouched, vit_processor(tf), picture(), generate=2)
    with pytest.raises(ValueError, match="target="):
        AttentionWidget.from_transformers(untouched, vit_processor(tf), picture(), target="x")
