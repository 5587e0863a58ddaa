"""The wheel, installed into a clean virtual environment on a machine with no Node.js, shows the
widget: the front end ships built inside it."""

import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_wheel_installs_into_a_clean_venv_with_no_node_and_draws(browser, tmp_path):
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (tmp_path / "dist").glob("attnwidget-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # no system site packages
    bare = tmp_path / "bin"  # a PATH with the venv's python and nothing else: no node, no npm
    bare.mkdir()
    (bare / "python").symlink_to(venv / "bin" / "python")
    env = {"PATH": str(bare), "HOME": str(tmp_path), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    page = tmp_path / "lab.html"
    script = (
        "import shutil; assert shutil.which('node') is None and shutil.which('npm') is None\n"
        "from attnwidget import AttentionWidget\n"
        "w = AttentionWidget(stage='weights', focus=5)\n"
        "data, _ = w._repr_mimebundle_()\n"
        "assert 'application/vnd.jupyter.widget-view+json' in data\n"
        f"w.to_html({str(page)!r})\n"
    )
    shown = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    view = browser.new_page()
    try:
        view.goto(page.as_uri())
        view.wait_for_function("document.querySelector('.aw-root')?.attnwidget?.firstPaint > 0")
        assert view.locator(".aw-readout").inner_text().startswith("bank reads river 0.556")
    finally:
        view.close()
