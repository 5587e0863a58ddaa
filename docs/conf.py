"""Sphinx configuration of the documentation site (`make docs` builds it into build/site/).

The notebooks are executed during the build. Every widget they show is written into the page
as its own embedded state, drawn by the widget's bundle (served from _static): the page
computes for itself, so the slider and clicks work with no kernel and no network.
"""

import json
import os
import pathlib
import shutil
import subprocess

from docutils import nodes

import attnwidget

# Read by AttentionWidget._repr_mimebundle_ in the kernels the build starts: each widget is also
# shown as a page that computes by itself (see attnwidget.export.embed_html).
os.environ["ATTNWIDGET_STATIC_HTML"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the real-model notebooks load weights from disk only
os.environ.setdefault(
    "HF_HUB_DISABLE_PROGRESS_BARS", "1"
)  # executed outputs: what a cell computed, not a loader's progress

project = "attnwidget"
author = "The attnwidget developers"
copyright = "2026, The attnwidget developers"
release = version = attnwidget.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
exclude_patterns = ["_build", "README.md", "**.ipynb_checkpoints", "_traits.md"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # the README's own headings start below the page's title

# notebooks: run at every build, and a failing cell fails the build
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# the widget's own embedded page, not a widget view (which would need a kernel, or a CDN)
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}  # no html-manager from a CDN: the pages load nothing from elsewhere


def _traits_table():
    """The API page's table of the widget's state, from its declaration (attnwidget/state.py): no
    hand-kept list that could drift from the code."""
    from attnwidget import state

    rows = ["| trait | set from Python or the page | what it holds |", "| --- | --- | --- |"]
    for f in state.FIELDS:
        if f.travel != "kernel":
            settable = "yes" if f.writable else "read-only"
            rows.append(f"| `{f.name}` | {settable} | {' '.join(f.doc.split()).replace('|', '/')} |")
    return "\n".join(rows) + "\n"


(pathlib.Path(__file__).parent / "_traits.md").write_text(_traits_table(), encoding="utf-8")

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "pydata_sphinx_theme"
html_math_renderer = "mathml"  # registered in setup(): maths typeset at build time
html_title = "attnwidget"
html_static_path = ["_static"]
html_css_files = ["attnwidget.css"]
html_js_files = [("attnwidget-docs.js", {"type": "module"})]
html_sidebars = {"**": []}  # the pages are in the top bar: the widgets get the width
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
}


def _copy_bundle(app):
    """The widget's bundle and styles, as built (npm run build), beside the site's own scripts."""
    static = pathlib.Path(attnwidget.__file__).parent / "static"
    out = pathlib.Path(app.srcdir) / "_static"
    out.mkdir(exist_ok=True)
    shutil.copyfile(static / "widget.js", out / "attnwidget.js")
    shutil.copyfile(static / "widget.css", out / "attnwidget.css")


# Maths is typeset at build time, to MathML that the browser draws itself: no script, font or
# network at reading time. KaTeX (an npm dev dependency) does the typesetting, one node run per
# formula (the site has a handful).
_KATEX = next(
    (
        str(d / "node_modules" / "katex")
        for d in pathlib.Path(__file__).resolve().parents
        if (d / "node_modules" / "katex").is_dir()
    ),
    None,
)
_TYPESET = """
const katex = require(process.argv[1]);
const [tex, display] = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(katex.renderToString(tex, { output: "mathml", displayMode: display, throwOnError: true }));
"""


def _mathml(tex, display):
    if _KATEX is None:
        raise RuntimeError("the docs typeset their maths with KaTeX: run `npm ci` first")
    done = subprocess.run(
        ["node", "-e", _TYPESET, _KATEX], input=json.dumps([tex, display]), capture_output=True, text=True, check=True
    )
    return done.stdout


def _visit_math(self, node):
    self.body.append(_mathml(node.astext(), False))
    raise nodes.SkipNode


def _visit_math_block(self, node):
    self.body.append(f'<div class="math-block">{_mathml(node.astext(), True)}</div>')
    raise nodes.SkipNode


def setup(app):
    app.connect("builder-inited", _copy_bundle)
    app.add_html_math_renderer("mathml", (_visit_math, None), (_visit_math_block, None))
