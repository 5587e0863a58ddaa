"""Vision transformers (ViT, DeiT, DINOv2, ...) read on one image.

The image is checked, given to the model's image processor, and read as a text's tokens are
(hf.read): every layer's q, k and v caught where the model computes attention, in one forward
pass of its own. The tokens are the model's, in order: "[CLS]", DeiT's distillation token
"[DIST]", DINOv2's registers "[REG1]", "[REG2]", … and then one per patch, row by row, named by
its place in the patch grid ("r0c3": row 0, column 3). The image comes with them as the model saw
it (``ModelAttention.image``), for the page to draw under its patches.

Imported only by ``attnwidget.integrations.from_transformers``, after torch and transformers are
known to be importable.
"""

from __future__ import annotations

import base64
import inspect
import io
import sys

import numpy as np
import torch

from . import hf
from .common import ModelAttention
from .configs import is_vision

USE = "from_transformers(model, image_processor, image)"
LOAD = "AutoImageProcessor.from_pretrained(name)"
_EMPTY = "the image is empty ({height} × {width} pixels): pass an image of at least one pixel"


def is_image(x) -> bool:
    """A numpy array or a PIL image (PIL is looked for only once it is loaded: an image of its own means it is)."""
    pil = sys.modules.get("PIL.Image")
    return isinstance(x, np.ndarray) or (pil is not None and isinstance(x, pil.Image))


def is_image_processor(x) -> bool:
    from transformers.image_processing_utils import BaseImageProcessor

    return isinstance(x, BaseImageProcessor) or (callable(x) and hasattr(x, "image_mean"))


def wanted(model, processor, image) -> bool:
    """Whether a call of from_transformers is about an image: it gives one (or a list of them), an
    image processor, or a model that reads images."""
    several = isinstance(image, (list, tuple)) and any(is_image(i) for i in image)
    return is_image(image) or several or is_image_processor(processor) or is_vision(getattr(model, "config", None))


def extract(model, processor, image) -> ModelAttention:
    """Q, K, V of every layer and head of a vision transformer on ``image``, read as
    ``integrations.from_transformers`` describes; bad input refused before the model runs."""
    base = hf._base_model(model)
    config = base.config
    name = hf._display_name(config, model)
    inner = getattr(processor, "image_processor", None)  # a processor of images and text (CLIP's): its images' part
    processor = inner if not is_image_processor(processor) and is_image_processor(inner) else processor
    _check_call(config, name, processor, image)
    pixels = _processed(processor, _picture(image))
    rows, cols, patch = _grid(base, name, pixels)
    if getattr(config, "window_size", 0):  # (Swin's: each window a batch of its own)
        raise NotImplementedError(
            f"{name} attends within windows of patches (config.window_size): attnwidget shows attention over the "
            "whole image, as ViT, DeiT and DINOv2 compute it"
        )
    dtype = next(base.parameters()).dtype
    found = hf.read(base, base, {"pixel_values": pixels.to(dtype)}, [], name)
    n, specials = found.layers[0][0].shape[1], _specials(base)
    if n - rows * cols not in (0, len(specials)):
        dropped = " (it leaves out a random share of them: config.mask_ratio = 0.0 keeps all)"
        raise NotImplementedError(
            f"{name} reads {n} tokens for an image of {rows} × {cols} patches: attnwidget cannot tell which tokens are "
            f"the patches{dropped if getattr(config, 'mask_ratio', 0) else ''}"
        )
    specials = specials[: n - rows * cols]  # (none: a model of patches alone, such as SigLIP's)
    found.tokens = specials + [f"r{r}c{c}" for r in range(rows) for c in range(cols)]
    found.image = {
        "src": _png(pixels, processor),
        "rows": rows,
        "cols": cols,
        "first": len(specials),
        "patch": patch[0] if patch[0] == patch[1] else list(patch),
        "size": list(pixels.shape[2:]),
    }
    return found


def _check_call(config, name: str, processor, image) -> None:
    """A model that reads images, its image processor and one image."""
    several = isinstance(image, (list, tuple))
    if several and not all(isinstance(i, str) for i in image):
        raise ValueError(
            "one image at a time: pass one image, and make one widget for each image (a list of images is not read)"
        )
    text = isinstance(image, str) or several  # (a list of texts)
    if not is_vision(config):
        if text:
            raise TypeError(
                f"{type(processor).__name__} is an image processor: it reads images, not text; for a text, pass the "
                "model's tokenizer (AutoTokenizer.from_pretrained(name))"
            )
        raise ValueError(
            f"{name} reads text, not images alone (its config has no image_size and patch_size, or holds a language "
            "model's config): pass its tokenizer and a "
            "text, or a vision model (ViT, DeiT, DINOv2, ...) with its image processor and the image"
        )
    if not is_image_processor(processor):
        if text:
            raise ValueError(f"{name} reads images, not text: pass its image processor ({LOAD}) and an image, {USE}")
        raise TypeError(
            f"an image is read with the model's image processor ({LOAD}), not a {type(processor).__name__}: {USE}"
        )
    if text:
        raise TypeError(
            f"{name} reads images, not text, and so does its {type(processor).__name__}: pass an image (a PIL image "
            "or a numpy array); a text needs a text model and its tokenizer"
        )


def _picture(image):
    """The image as a PIL RGB image: RGB or greyscale, as PIL images or arrays of uint8 (0–255) or
    floats (0–1); anything else refused with what to do about it."""
    from PIL import Image

    if isinstance(image, Image.Image):
        if image.mode not in ("RGB", "L"):
            raise ValueError(
                f"the image is in mode {image.mode!r}; attnwidget reads RGB or greyscale (L) images: convert it first, "
                'image.convert("RGB")' + (" (which drops its alpha channel)" if "A" in image.mode else "")
            )
        if 0 in image.size:  # (PIL makes one of 0 × 0 and reads it as black)
            raise ValueError(_EMPTY.format(height=image.height, width=image.width))
        return image.convert("RGB")  # (a grey image: each pixel's grey in all three channels)
    if not isinstance(image, np.ndarray):
        raise TypeError(
            "image must be a PIL image or a numpy array (height × width × 3 for RGB, height × width for grey), got "
            f"{type(image).__name__}"
        )
    a = image[..., 0] if image.ndim == 3 and image.shape[-1] == 1 else image
    if a.ndim == 3 and a.shape[0] in (1, 3, 4) and a.shape[-1] not in (3, 4):
        raise ValueError(
            f"the array has shape {a.shape}: channels first, as torch keeps them; attnwidget reads height × width × 3 "
            "(channels last): image.transpose(1, 2, 0)"
        )
    if a.ndim == 3 and a.shape[-1] == 4:
        raise ValueError(
            f"the array has 4 channels (shape {a.shape}), RGBA perhaps; attnwidget reads RGB: drop the fourth, "
            'image[..., :3], or Image.fromarray(image).convert("RGB")'
        )
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[-1] == 3)):
        raise ValueError(
            f"the array has shape {a.shape}: an image is height × width × 3 (RGB) or height × width (grey)"
        )
    if a.size == 0:
        raise ValueError(_EMPTY.format(height=a.shape[0], width=a.shape[1]))
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all():
            raise ValueError("the image holds values that are not finite (NaN or infinity)")
        low, high = float(a.min()), float(a.max())
        if low < 0 or high > 1:
            raise ValueError(
                f"a float image must be in [0, 1]; this one spans {low:g} to {high:g}: divide one of 0–255 by 255 "
                "(image / 255), or give it as uint8"
            )
        a = np.rint(a.astype(np.float64) * 255).astype(np.uint8)  # 8 bits, as an image processor's resizing takes it
    elif a.dtype != np.uint8:
        fix = "* 255 for black and white" if a.dtype == bool else "for values from 0 to 255"
        raise ValueError(
            f"the array is {a.dtype}; attnwidget reads uint8 (0–255) or float (0–1) images: convert it, "
            f"image.astype(np.uint8) {fix}"
        )
    return Image.fromarray(np.ascontiguousarray(a)).convert("RGB")


def _processed(processor, picture) -> torch.Tensor:
    """The processor's pixel_values of the picture: 1 × channels × height × width."""
    std = getattr(processor, "image_std", None)
    values = np.atleast_1d(np.asarray(1.0 if std is None else std, dtype=np.float64))
    zero = np.flatnonzero(values == 0)
    if getattr(processor, "do_normalize", True) and zero.size:  # it divides by them: infinite pixels
        where = "" if zero.size == values.size else f" in channel{'s' * (zero.size > 1)} {', '.join(map(str, zero))}"
        raise ValueError(
            f"{type(processor).__name__}'s image_std is 0{where} (image_std = {values.tolist()}): normalising "
            f"divides each channel by it; use the model's own image processor, {LOAD}, or give image_std the values "
            "the model was trained with"
        )
    pixels = processor(images=picture, return_tensors="pt")["pixel_values"]
    if not (isinstance(pixels, torch.Tensor) and pixels.ndim == 4 and pixels.shape[0] == 1):
        raise ValueError(
            f"{type(processor).__name__} gives pixel_values of shape {tuple(getattr(pixels, 'shape', ()))}, not one "
            f"image's (1 × channels × height × width): use the model's own image processor, {LOAD}"
        )
    return pixels


def _pair(size) -> tuple[int, int]:
    return (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))


def _grid(base, name: str, pixels) -> tuple[int, int, tuple[int, int]]:
    """The patch grid (rows, columns, a patch's height and width) of the processed image; an image
    the model cannot read as a whole grid refused."""
    config = base.config
    _, channels, height, width = pixels.shape
    fix = f"use the image processor made for the model, {LOAD}"
    want = getattr(config, "num_channels", 3)
    if channels != want:
        raise ValueError(
            f"the image processor gives images of {channels} channels but {name} reads {want} (config.num_channels): "
            f"{fix}"
        )
    ph, pw = _pair(config.patch_size)
    h, w = _pair(config.image_size)
    said = f"{ph}" if ph == pw else f"{ph} × {pw}"
    if _fits_any_grid(base):
        if height % ph or width % pw:
            raise ValueError(
                f"the image processor gives {height} × {width} images, which {name} cannot cut into whole patches of "
                f"{said} pixels: make it give a multiple of {said} on each side, such as its own ({LOAD})"
            )
    elif (height, width) != (h, w):
        raise ValueError(
            f"the image processor gives {height} × {width} images but {name} reads {h} × {w} (config.image_size): "
            f"{fix}, or one made with size={{'height': {h}, 'width': {w}}}"
        )
    return height // ph, width // pw, (ph, pw)


def _fits_any_grid(base) -> bool:
    """Whether the model fits its position table to any grid of patches by itself (DINOv2 does); ViT,
    DeiT and CLIP do it only when asked (interpolate_pos_encoding=True, not asked here): they read
    config.image_size alone."""
    asked = "interpolate_pos_encoding" in inspect.signature(base.forward).parameters
    return not asked and callable(getattr(getattr(base, "embeddings", None), "interpolate_pos_encoding", None))


def _specials(base) -> list[str]:
    """The tokens a vision transformer puts before its patches, in its order."""
    embeddings = getattr(base, "embeddings", None)
    names = ["[CLS]"]
    if getattr(embeddings, "distillation_token", None) is not None:  # DeiT's
        names.append("[DIST]")
    return names + [f"[REG{i}]" for i in range(1, int(getattr(base.config, "num_register_tokens", 0) or 0) + 1)]


def _png(pixels, processor) -> str:
    """The pixels as the model saw them, taken back to 0–255 from the processor's normalising, as a
    PNG data URL."""
    from PIL import Image

    a = pixels[0].detach().to("cpu", torch.float64).numpy().transpose(1, 2, 0)
    if getattr(processor, "do_normalize", True):
        a = a * np.asarray(processor.image_std, dtype=np.float64) + np.asarray(processor.image_mean, dtype=np.float64)
    if getattr(processor, "do_rescale", True):
        a = a / float(getattr(processor, "rescale_factor", 1 / 255))
    buffer = io.BytesIO()
    Image.fromarray(np.clip(np.rint(a), 0, 255).astype(np.uint8)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
