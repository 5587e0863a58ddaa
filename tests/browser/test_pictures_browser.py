"""Pictures of text that XML cannot hold as given: control characters and lone surrogates come
out as their visible stand-ins (␀, ␛, �) in a well-formed SVG and a valid PNG, from Python,
from the command line and from the buttons of an exported page."""

import re
import struct
import subprocess
import sys
import xml.dom.minidom
import xml.etree.ElementTree as ET
import zlib

import numpy as np
import pytest
from test_export_browser import open_page

from attnwidget import AttentionWidget
from attnwidget.widget import visible_text

pytestmark = pytest.mark.browser

RAW = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# The last token is cut by the page where it shows a shortened name (at 16 and at 24 UTF-16
# units), each time in the middle of an emoji's surrogate pair.
TOKENS = ["a\x00b", "\x1b[31m", "v\x0bt", "c1\x85\x9b", "\ud800", "x\ufffe\x7f", "a" * 14 + "😀" + "b" * 6 + "😀" + "c"]
AXES = ["\x1bx", "y\udfff"]


def hostile_widget():
    n = len(TOKENS)
    rng = np.random.default_rng(0)
    return AttentionWidget(
        tokens=TOKENS,
        q=rng.normal(size=(n, 4)),
        k=rng.normal(size=(n, 4)),
        v=rng.normal(size=(n, 2)),
        value_axes=AXES,
        stage="blend",
        focus=n - 1,
    )


def check_svg(data: bytes):
    """Well-formed XML in UTF-8, with the stand-ins and never the raw characters; its size."""
    text = data.decode("utf-8")
    root = ET.fromstring(data)
    xml.dom.minidom.parseString(data)
    assert not RAW.search(text)
    for token in TOKENS[:-1]:
        assert f">{visible_text(token)}<" in text, visible_text(token)
    assert "␛" in text and "␀" in text and "␋" in text and "␡" in text and "\ufffd" in text
    return float(root.get("width")), float(root.get("height"))


def check_png(data: bytes):
    """A PNG whose every chunk is whole (CRC) and whose pixels decompress to the size its
    header gives; returns that size."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, []
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        body = data[at + 8 : at + 8 + length]
        assert struct.unpack(">I", data[at + 8 + length : at + 12 + length])[0] == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        at += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    width, height, depth, colour = struct.unpack(">IIBB", chunks[0][1][:10])
    assert (depth, colour) == (8, 6)  # RGBA: what a canvas writes
    pixels = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    assert len(pixels) == height * (1 + 4 * width)
    return width, height


def same_size(png, svg, scale):
    # the PNG is the unrounded CSS size × scale, rounded up; the SVG's is rounded up first
    assert all(abs(p - s * scale) <= scale + 1 for p, s in zip(png, svg)), (png, svg, scale)


def test_pictures_from_python_of_hostile_text(tmp_path):
    w = hostile_widget()
    w.save_svg(tmp_path / "lab.svg")
    w.save_png(tmp_path / "lab.png", scale=1.5)
    size = check_svg((tmp_path / "lab.svg").read_bytes())
    same_size(check_png((tmp_path / "lab.png").read_bytes()), size, 1.5)


def test_pictures_from_the_command_line_of_hostile_text(tmp_path):
    # the last word is letters outside the BMP: the page cuts its shortened name mid-pair
    sentence = "bank\x1b river \x9b\x07 " + "a" * 14 + "𝐀𝐀"
    for kind in ("svg", "png"):
        out = tmp_path / f"lab.{kind}"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "attnwidget",
                "export",
                sentence,
                "--stage",
                "blend",
                "--focus",
                "5",
                "-o",
                str(out),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        if kind == "svg":
            text = out.read_bytes().decode("utf-8")
            ET.fromstring(text)
            assert not RAW.search(text) and ">␛<" in text and ">␇<" in text and ">\ufffd<" in text
            size = float(ET.fromstring(text).get("width")), float(ET.fromstring(text).get("height"))
        else:
            same_size(check_png(out.read_bytes()), size, 2)


def test_picture_buttons_of_an_exported_page_with_hostile_text(browser, tmp_path):
    path = tmp_path / "hostile.html"
    hostile_widget().to_html(path, theme="light")
    page, problems = open_page(browser, path)
    saved = {}
    for kind in ("svg", "png"):
        with page.expect_download(timeout=10_000) as info:
            page.click(f".aw-save-{kind}")
        saved[kind] = tmp_path / f"button.{kind}"
        info.value.save_as(saved[kind])
    size = check_svg(saved["svg"].read_bytes())
    same_size(check_png(saved["png"].read_bytes()), size, 2)
    # a PNG larger than a canvas can hold is refused in words, not given as an empty file
    message = page.evaluate(
        "document.querySelector('.aw-root').attnwidget.snapshot('png', 64).then(() => '', (e) => e.message)"
    )
    assert "too large" in message and "smaller scale" in message, message
    assert not problems, problems
    page.context.close()
