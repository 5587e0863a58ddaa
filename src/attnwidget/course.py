"""Course notebooks as pages that work offline: ``jupyter nbconvert --to attnwidget notebook.ipynb``.

The exporter runs the notebook with every widget shown as the page the widget already makes with
no kernel (export.embed_html), draws those with the widget's bundle inlined once, and writes the
maths as MathML, which browsers draw themselves: the page loads nothing from anywhere (no widget
manager, require.js, MathJax or mermaid from a CDN). Other ipywidgets, which need a kernel or a
widget manager, show their text fallback.
"""

from __future__ import annotations

import contextlib
import copy
import html
import os
import pathlib
import re
import secrets

import jinja2
from nbconvert.exporters import HTMLExporter
from traitlets import Bool, Int, default

from .export import _STATIC, _boot, _script_safe

_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# Code, link targets and HTML tags keep their dollars; then maths as Jupyter reads it: $$display$$,
# \[display\], a bare \begin{env}…\end{env} (displayed whole), \(inline\) and $inline$, where an inline
# formula neither starts nor ends with a space, holds no backtick (code comes first) and is not
# followed by a digit ("$5 and $10" is money).
_MATHS = re.compile(
    r"(?P<code>```.*?```|~~~.*?~~~|(?P<ticks>`+).+?(?P=ticks)|\]\([^)\s]*\)|<[^>\n]+>)"
    r"|\$\$(?P<display>.+?)\$\$|\\\[(?P<bracket>.+?)\\\]"
    r"|(?P<env>\\begin\{(?P<name>[A-Za-z]+\*?)\}.*?\\end\{(?P=name)\})"
    r"|\\\((?P<paren>.+?)\\\)"
    r"|(?<![\\$\w])\$(?P<inline>[^\s$`][^$`]*?)(?<![\s\\])\$(?![\d$])",
    re.S,
)


def mathml(source: str, mark: str = "AWMATH") -> tuple[str, list[tuple[str, str]]]:
    """``source`` (Markdown) with each formula replaced by a placeholder Markdown leaves alone
    (``mark``, its number, "X"), and the formulas as (MathML, TeX), in order. A formula MathML
    cannot express stays as its TeX, shown as code."""
    from latex2mathml.converter import convert

    found: list[tuple[str, str]] = []

    def swap(match: re.Match) -> str:
        if match["code"]:
            return match["code"]
        shown_as = (
            ("display", "block"),
            ("bracket", "block"),
            ("env", "block"),
            ("paren", "inline"),
            ("inline", "inline"),
        )
        tex, display = next((match[group], how) for group, how in shown_as if match[group] is not None)
        try:
            shown = convert(tex.strip(), display=display).replace("<math ", f'<math alttext="{html.escape(tex)}" ', 1)
        except Exception:  # (latex2mathml raises its own kinds for what it does not read)
            shown = f"<code>{html.escape(tex)}</code>"
        found.append((shown, tex))
        return f"{mark}{len(found) - 1}X"

    return _MATHS.sub(swap, source), found


class CourseExporter(HTMLExporter):
    """A notebook as one HTML page that needs no kernel and no network, its attention widgets live.

    ``jupyter nbconvert --to attnwidget notebook.ipynb`` (``--theme dark`` for the dark theme).
    The notebook is run first, in its own folder, ``timeout`` seconds a cell at most.
    ``--CourseExporter.execute=False`` keeps the outputs it has: a widget is then live only where it
    was shown with ATTNWIDGET_STATIC_HTML=1, and otherwise shows its line on how to get the live page."""

    export_from_notebook = "Course page (attnwidget)"
    execute = Bool(
        True, help="Run the notebook before exporting it (its widgets need to be shown again to be embedded)"
    ).tag(config=True)
    timeout = Int(600, help="Seconds a cell may run").tag(config=True)

    @default("template_name")
    def _template_name_default(self):
        return "attnwidget"

    @default("extra_template_basedirs")
    def _default_extra_template_basedirs(self):
        return [str(pathlib.Path(__file__).parent / "templates"), *super()._default_extra_template_basedirs()]

    @default("default_preprocessors")
    def _default_preprocessors(self):
        # the notebook is run here, with its widgets' pages (from_notebook_node): --execute must not run it again
        return [p for p in HTMLExporter().default_preprocessors if not str(p).endswith("ExecutePreprocessor")]

    @jinja2.pass_context
    def markdown2html(self, context, source):
        mark = "AWMATH" + secrets.token_hex(4).upper()  # (no text of the notebook's can be taken for one)
        text, formulas = mathml(source, mark)
        rendered = super().markdown2html(context, text)
        # MathML where a formula is text; inside a tag (a heading's id, made from its text) its TeX
        return re.sub(
            rf"<[^>]*>|{mark}(\d+)X",
            lambda m: (
                re.sub(rf"{mark}(\d+)X", lambda f: html.escape(formulas[int(f[1])][1]), m[0])
                if m[0].startswith("<")
                else formulas[int(m[1])][0]
            ),
            rendered,
        )

    def from_notebook_node(self, nb, resources=None, **kw):
        nb = copy.deepcopy(nb)  # (the caller's notebook is left as it was)
        resources = dict(resources or {})
        if self.execute:
            self._run(nb, resources)
        nb.metadata.pop("widgets", None)  # saved widget state would load a widget manager from a CDN
        for cell in nb.cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if _WIDGET_VIEW in data and "attnwidget-static" in data.get("text/html", ""):
                    del data[_WIDGET_VIEW]  # drawn by the page itself
        bundle = (_STATIC / "widget.js").read_text(encoding="utf-8")
        resources["attnwidget"] = {
            "css": (_STATIC / "widget.css").read_text(encoding="utf-8"),
            "script": _script_safe(
                _boot(bundle, _DRAW.replace("{theme}", "dark" if self.theme == "dark" else "light"))
            ),
        }
        return super().from_notebook_node(nb, resources, **kw)

    def _run(self, nb, resources) -> None:
        from nbclient import NotebookClient

        folder = resources.get("metadata", {}).get("path") or os.getcwd()
        with _environment(ATTNWIDGET_STATIC_HTML="1"):  # read by the kernel it starts: widgets carry their page
            NotebookClient(nb, timeout=self.timeout, resources={"metadata": {"path": folder}}).execute()


# Every embedded widget drawn by the bundle, in the page's theme; a text that is not JSON is passed
# as it is, for the widget to say in the page what is wrong.
_DRAW = """for (const host of document.querySelectorAll(".attnwidget-static")) {
  const text = host.querySelector("script[type='application/json']").textContent;
  let payload = text;
  try { payload = { ...JSON.parse(text), theme: "{theme}" }; } catch {}
  {render}(host, payload);
}"""


@contextlib.contextmanager
def _environment(**values: str):
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
