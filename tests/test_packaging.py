"""The wheel ships the front-end bundle, the type hints and the metadata PyPI shows; the version is package.json's."""

import json
import pathlib
import subprocess
import sys
import zipfile

import attnwidget

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_contains_the_bundle_and_data(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("attnwidget-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in (
        "attnwidget/static/widget.js",
        "attnwidget/static/widget.css",
        "attnwidget/data/lab.json",
        "attnwidget/widget.py",
    ):
        assert path in names, f"{path} missing from {wheel.name}"
    bundle = zipfile.ZipFile(wheel).read("attnwidget/static/widget.js")
    assert b"render" in bundle and len(bundle) > 10_000
    assert "attnwidget/py.typed" in names  # the type hints are for users too
    # what PyPI shows: the licence, the links, and the README whose picture has an absolute address
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    version = json.loads((ROOT / "package.json").read_text())["version"]
    for line in (
        f"Version: {version}",
        "License-Expression: MIT",
        "Project-URL: Documentation",
        "Classifier: Typing :: Typed",
        "Description-Content-Type: text/markdown",
    ):
        assert line in meta, line
    assert any(n.endswith("licenses/LICENSE") for n in names)
    images = [line for line in meta.splitlines() if line.startswith("![")]
    assert images and all("](https://" in line for line in images), images


def test_the_version_is_package_jsons():
    """One version: pyproject reads package.json's (hatch-nodejs-version); nothing to keep equal."""
    package = json.loads((ROOT / "package.json").read_text())
    assert attnwidget.__version__ == package["version"]
    assert 'dynamic = ["version"' in (ROOT / "pyproject.toml").read_text()


def test_the_widget_loads_the_built_bundle():
    from attnwidget.widget import _STATIC, AttentionWidget

    bundle = (_STATIC / "widget.js").read_text()  # missing: run `npm run build` (make test does)
    assert str(AttentionWidget._esm) == bundle
