"""A widget as one self-contained HTML page: the bundle inlined, the state embedded, no
network request and no kernel. The page computes, so everything that needs no new vectors
stays live: stages, temperature, focus, the causal toggle, cells, heads, the query dial, and
the sentence and layer switchers (their vectors are embedded too)."""

from __future__ import annotations

import atexit
import base64
import html
import json
import math
import numbers
import os
import pathlib
import re
import secrets
from collections.abc import Callable

_STATIC = pathlib.Path(__file__).parent / "static"
THEMES = ("auto", "light", "dark")

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; \
worker-src blob:; style-src 'unsafe-inline'; img-src data: blob:">
<title>{title}</title>
<style>
body {{ margin: 0; padding: 16px; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }}
body.aw-page-dark {{ background: #111418; }}
{css}
</style>
</head>
<body class="aw-page-{theme}">
<div id="attnwidget"></div>
<script type="application/json" id="attnwidget-state">{state}</script>
<script type="module">
{bundle}
</script>
</body>
</html>
"""


def _script_safe(text: str) -> str:
    """Text placed inside a <script> element cannot close it or open a comment: the only two
    sequences the HTML parser looks for there. In the bundle they can only occur in strings,
    where the added backslash reads as nothing."""
    text = re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)
    return text.replace("<!--", "<\\!--")


def _json_safe(value) -> str:
    # "<" never appears raw, so no "</script>" or "<!--" can be formed; JSON.parse reads \u003c back.
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # NaN or infinity, which JSON has not: the page could not read its data at all
        found = _not_finite(value)
        if found is None:
            raise
        raise ValueError(
            f"the page's data holds {found[1]} at {found[0]}, but a page's numbers must be finite (JSON has no NaN "
            "or infinity). This is a fault in attnwidget: please report it, with the code that made the widget."
        ) from None
    return text.replace("<", "\\u003c")


def _not_finite(value, where="data"):
    """(where, value) of the first number in ``value`` that is not finite, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, (list, tuple)) else ()
    for key, item in items:
        found = _not_finite(item, f"{where}[{key!r}]")
        if found:
            return found
    return None


def _boot(
    bundle: str,
    call: str = '{render}(document.getElementById("attnwidget"), '
    'document.getElementById("attnwidget-state").textContent);',
) -> str:
    """The bundle as an inline module that renders itself: its closing export statement
    (esbuild writes exactly one, last) becomes ``call``, where ``{render}`` names renderStandalone."""
    found = re.search(r"export\s*\{([^}]*)\}\s*;?\s*$", bundle)
    names = {}  # exported name -> the bundle's own
    for part in map(str.strip, found.group(1).split(",") if found else []):
        local, _, exported = part.partition(" as ")
        names[exported or local] = local
    if found is None or "renderStandalone" not in names:
        raise RuntimeError("the widget bundle does not export renderStandalone; rebuild it with `npm run build`")
    return bundle[: found.start()] + call.replace("{render}", names["renderStandalone"])


def to_html(payload: dict, path=None, *, theme: str = "auto", title: str = "Attention") -> str | None:
    """One self-contained HTML page of a widget's ``payload`` (``AttentionWidget.page_state()``):
    written to ``path`` when given (and None returned, so a notebook cell prints nothing), else
    returned as a string.

    ``theme`` is "light", "dark" or "auto" (follows the reader's system setting).
    """
    page = _page(payload, theme, title)
    if path is None:
        return page
    _write_whole(path, page.encode("utf-8"))
    return None


def _page(payload: dict, theme: str, title: str = "Attention") -> str:
    from .payload import with_views_now  # (the views' declarations: loaded once a page is made)

    _check_theme(theme)
    payload = with_views_now(payload)
    bundle, css = (
        (_STATIC / "widget.js").read_text(encoding="utf-8"),
        (_STATIC / "widget.css").read_text(encoding="utf-8"),
    )
    return _PAGE.format(
        title=html.escape(title),
        css=css,
        theme=theme,
        state=_json_safe({**payload, "theme": theme}),
        bundle=_script_safe(_boot(bundle)),
    )


def long_page(payload: dict, path=None, *, theme: str = "auto", title: str = "Attention") -> str | None:
    """One self-contained HTML page of a long text's payload (LongWidget.page_state()), as to_html."""
    _check_theme(theme)
    page = _PAGE.format(
        title=html.escape(title),
        css=(_STATIC / "long.css").read_text(encoding="utf-8"),
        theme=theme,
        state=_json_safe({**payload, "theme": theme}),
        bundle=_script_safe(_boot((_STATIC / "long.js").read_text(encoding="utf-8"))),
    )
    if path is None:
        return page
    _write_whole(path, page.encode("utf-8"))
    return None


def _write_whole(path, data: bytes) -> None:
    """Write ``data`` to ``path`` complete or not at all: into a new file beside it, moved into
    place (atomically) only once written. On any failure, even an interrupt, nothing new is
    left and a file already at ``path`` is as it was."""
    path = pathlib.Path(path)
    temporary = path.with_name(
        f".{path.name}.{secrets.token_hex(4)}.tmp"
    )  # same folder: os.replace cannot cross file systems
    try:
        with open(temporary, "xb") as f:  # "x": never someone else's file; mode from the umask, as for any new file
            f.write(data)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


# Headless Chromium for pictures made from Python. These flags work with no sandbox, no GPU
# and no outside network (as on CI machines and containers).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path():
    """$ATTNWIDGET_CHROMIUM, else the system's /usr/bin/chromium, else Playwright's own browser."""
    import os

    path = os.environ.get("ATTNWIDGET_CHROMIUM", "/usr/bin/chromium")
    return path if os.path.exists(path) else None


def _launch(playwright):
    return playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)


# Once every part is drawn (a condition, not a delay: a model's head thumbnails come after the
# first paint), the picture: one function, looping in the page. The page's policy forbids
# evaluating strings, which Playwright's wait_for_function does at every look after its first.
_WHEN_DRAWN = """async ([kind, scale, wait]) => {
  const root = document.querySelector(".aw-root"), end = performance.now() + wait;
  await document.fonts.ready;
  while (!root.attnwidget.ready()) {
    if (performance.now() > end) throw new Error(`the page was not drawn whole within ${wait / 1000} s`);
    await new Promise((next) => requestAnimationFrame(next));
  }
  return root.attnwidget.snapshot(kind, scale);
}"""
_WAIT_MS = 30_000  # (Playwright's own default for a wait)


class _Pictures:
    """One headless Chromium for every picture of the session, started at the first and closed at
    exit, in a thread of its own: Playwright's synchronous API refuses to start where an event
    loop runs (a notebook kernel's main thread), and stays in the thread it started in."""

    def __init__(self):
        self.pool = self.playwright = self.browser = None

    def take(self, page_html: str, kind: str, scale: float) -> str:
        if self.pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(1, thread_name_prefix="attnwidget-pictures")
            atexit.register(self.close)
        return self.pool.submit(self._take, page_html, kind, scale).result()

    def _take(self, page_html: str, kind: str, scale: float) -> str:
        if self.browser is None or not self.browser.is_connected():
            from playwright.sync_api import sync_playwright

            self.playwright = self.playwright or sync_playwright().start()
            self.browser = _launch(self.playwright)
        page = self.browser.new_page(viewport={"width": 1100, "height": 900}, device_scale_factor=scale)
        try:
            page.set_content(page_html)
            page.wait_for_selector(".aw-root")
            return page.evaluate(_WHEN_DRAWN, [kind, scale, _WAIT_MS])
        finally:
            page.close()

    def close(self) -> None:
        """Close the browser (a later picture starts another)."""
        if self.pool is not None:
            try:
                self.pool.submit(self._close).result()
            except RuntimeError:  # at exit, after the thread pools were shut: the browser ends with the process
                pass

    def _close(self) -> None:
        for part in (self.browser, self.playwright):
            try:
                if part is not None:
                    part.close() if part is self.browser else part.stop()
            except Exception:  # (already gone: at exit, Chromium may have been stopped first)
                pass
        self.browser = self.playwright = None


_PICTURES = _Pictures()


def _snapshot(payload: dict, kind: str, scale: float) -> str:
    """Render the widget's page headless and take its picture (an SVG text or a PNG data URL),
    in the theme ``payload["theme"]`` names (light when none), once every part of it is drawn."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise ImportError(
            'Saving pictures from Python needs Playwright and Chromium: pip install "attnwidget[images]", '
            "then install Chromium (apt-get install chromium, or playwright install chromium)."
        ) from None
    return _PICTURES.take(_page(payload, payload.get("theme", "light")), kind, scale)


def _check_theme(theme: str) -> None:
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, got {theme!r}")


def _themed(payload: dict | Callable[[], dict], theme: str) -> dict:
    """The page's state in ``theme``; ``payload`` may be a call that makes it: made once the arguments are checked."""
    _check_theme(theme)
    return {**(payload() if callable(payload) else payload), "theme": theme}


def _check_suffix(path, suffix: str, what: str) -> None:
    """A file named for another kind of picture (save_png("x.jpg")) is refused: it would hold what its name denies."""
    given = pathlib.Path(path).suffix.lower()
    if given and given != suffix:
        raise ValueError(
            f"save_{suffix[1:]} writes {what}: name the file {pathlib.Path(path).stem}{suffix}, not {given} (a "
            "picture in another format: convert this one, e.g. with Pillow)"
        )


def save_svg(payload: dict | Callable[[], dict], path, *, theme: str = "light") -> None:
    """Write the current view as a vector SVG picture, in the "light" or "dark" theme ("auto":
    the headless browser's, light), without the controls.

    Text is <text>, boxes <rect>, each matrix one <rect> a cell with its labels and numbers as
    <text>, and arcs and plots <path>; every colour is written out, so librsvg, cairo (and so
    PDF) and Inkscape draw what a browser does. A matrix of more than 40 000 cells (about 200
    tokens; long inputs' weights, painted by a worker, always) is one embedded PNG image, as are
    the head thumbnails.
    """
    _check_suffix(path, ".svg", "an SVG picture")
    _write_whole(path, _snapshot(_themed(payload, theme), "svg", 1).encode("utf-8"))


def save_pdf(payload: dict | Callable[[], dict], path, *, theme: str = "light") -> None:
    """Write the current view as a one-page vector PDF (for LaTeX's \\includegraphics): the SVG
    of save_svg, converted by CairoSVG; the page is the picture's size, 3/4 pt per CSS pixel."""
    _check_suffix(path, ".pdf", "a PDF")
    _check_theme(theme)  # (before anything is imported or made)
    try:
        import cairosvg
    except (ImportError, OSError) as err:  # OSError: the package is there, the cairo library is not
        raise ImportError(
            'Saving a PDF needs CairoSVG and the cairo library: pip install "attnwidget[images]" '
            f"(and, where cairo is missing, apt-get install libcairo2) ({err})"
        ) from None
    svg = _snapshot(_themed(payload, theme), "svg", 1)  # (the page's state made once CairoSVG is known to be there)
    _write_whole(path, cairosvg.svg2pdf(bytestring=svg.encode("utf-8")))


# A PNG is drawn on one canvas, and Chromium's canvas is at most 32767 pixels a side (and
# 16384² in all): 8 times a view already makes a poster; below 1/4 nothing is legible.
PNG_SCALES = (0.25, 8)


def save_png(payload: dict | Callable[[], dict], path, *, scale: float = 2, theme: str = "light") -> None:
    """Write the current view as a PNG picture, at ``scale`` times its on-screen size (0.25 to 8):
    the SVG picture of save_svg, rasterised."""
    _check_suffix(path, ".png", "a PNG picture")
    low, high = PNG_SCALES
    if not (
        isinstance(scale, numbers.Real)
        and not isinstance(scale, bool)
        and math.isfinite(scale)
        and low <= scale <= high
    ):
        raise ValueError(
            f"scale must be a finite number from {low} to {high} (times the on-screen size), got {scale!r}; "
            "for a larger picture save an SVG, which scales without limit"
        )
    data_url = _snapshot(_themed(payload, theme), "png", float(scale))
    data = base64.b64decode(data_url.partition(",")[2])
    if not data.startswith(b"\x89PNG\r\n\x1a\n"):
        raise ValueError(
            f"the browser made no PNG at scale {scale} (the view may be too large for one canvas); try a smaller "
            "scale, or save an SVG"
        )
    _write_whole(path, data)


def embed_html(payload: dict) -> str:
    """A widget's state as an HTML fragment for a static site: a ``div.attnwidget-static``
    holding the state as JSON, which the site's script draws with the widget's bundle (see
    docs/_static/attnwidget-docs.js). The widget's text stays JSON: it is never markup."""
    from .payload import with_views_now

    state = _json_safe(with_views_now(payload))
    return f'<div class="attnwidget-static"><script type="application/json">{state}</script></div>'


PLAIN_LINE = (
    "A live attention widget is shown here when this notebook runs in Jupyter; for a page that keeps it live "
    "with no kernel and no network, export the notebook with <code>jupyter nbconvert --to attnwidget</code>."
)


def plain_html(payload: Callable[[], dict] | None = None) -> str:
    """What a page without the widget's script shows in its place (a plain nbconvert export,
    nbviewer, a host without the widget): one line on how to get the live page, under a picture of
    the widget when ``payload`` (a call that makes it) is given (ATTNWIDGET_PICTURES=1: a headless
    browser at each display). A picture that cannot be taken leaves the line, and says why once."""
    picture = ""
    if payload is not None:
        try:
            url = _snapshot({**payload(), "theme": "light"}, "png", 1)
            picture = f'<img alt="The attention widget as it was shown" src="{html.escape(url)}"><br>'
        except Exception as err:  # no Chromium here, say: the line alone, and why once
            import warnings

            warnings.warn(f"attnwidget: no picture of the widget for pages without it ({err})", stacklevel=3)
    return f'<div class="attnwidget-plain">{picture}<small>{PLAIN_LINE}</small></div>'
