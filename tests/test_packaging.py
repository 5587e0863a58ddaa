"""The wheel ships the front-end bundle; Python and JS agree on the version."""

import json
import pathlib
import subprocess
import sys
import zipfile

import attnwidget

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_wheel_contains_the_bundle_and_data(tmp_path):
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("attnwidget-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for path in ("attnwidget/static/widget.js", "attnwidget/static/widget.css", "attnwidget/data/lab.json", "attnwidget/widget.py"):
        assert path in names, f"{path} missing from {wheel.name}"
    bundle = zipfile.ZipFile(wheel).read("attnwidget/static/widget.js")
    assert b"render" in bundle and len(bundle) > 10_000


def test_one_version_everywhere():
    package = json.loads((ROOT / "package.json").read_text())
    assert attnwidget.__version__ == package["version"]


def test_the_widget_loads_the_built_bundle():
    from attnwidget.widget import _STATIC, AttentionWidget

    bundle = (_STATIC / "widget.js").read_text()  # missing: run `npm run build` (make test does)
    assert str(AttentionWidget._esm) == bundle
