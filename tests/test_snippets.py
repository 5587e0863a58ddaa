"""Every ```python block of README.md and docs/*.md runs as written.

Which blocks: every fence opened with ```python in README.md and in the hand-written pages
docs/*.md (the generated docs/_traits.md and the notebooks are left out; other fences, such as
```bash, are not Python and are not collected). Each block is one test, named by its file and
the line of its fence.

Namespaces: one per file. A file's blocks run in order in a single fresh interpreter, each in
the namespace its predecessors left, because the pages are written as one session: README's
Quick start makes the `w` that later blocks read, and its own arrays `q`, `k`, `v` are reused
by "The computation alone". The interpreter runs with HF_HUB_OFFLINE=1 and its working
directory set to a temporary folder of its own, where the files a block writes land.

Markers, on the last non-blank line before a fence:

- ``<!-- no-test: reason -->`` skips the block, and the test says the reason. For blocks that
  cannot run on a machine with no network (a model from the Hub) or that stand for the
  reader's own objects.
- ``<!-- test: each statement raises -->`` runs each statement of the block alone; each must
  raise the exception its comment names (``# TraitError: message ...``), with a message that
  starts with the comment's text up to "...".

Every other block must run without raising: an exception fails its test. The blocks after it
in the same file still run, on what it left, and a failure of theirs names the earlier one.
"""

import json
import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("_"))]
FENCE = re.compile(r"^```python\s*$")
SKIP = re.compile(r"^<!--\s*no-test:\s*(?P<reason>.+?)\s*-->$")
RAISES = re.compile(r"^<!--\s*test:\s*each statement raises\s*-->$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence, 1-based
    code: str
    mode: str  # "run", "raises" or "skip"
    reason: str = ""

    @property
    def name(self):
        return f"{self.page}:{self.line}"


def blocks_of(path):
    """The ```python blocks of one Markdown file, with the marker before each."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    found, i = [], 0
    while i < len(lines):
        if not FENCE.match(lines[i]):
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        code = "\n".join(lines[i + 1 : end]) + "\n"
        if skip := SKIP.match(before):
            found.append(Block(page, i + 1, code, "skip", skip["reason"]))
        elif RAISES.match(before):
            found.append(Block(page, i + 1, code, "raises"))
        elif re.match(r"<!--\s*(no-)?test", before):
            raise ValueError(f"{page}:{i}: a marker this test does not know: {before}")
        else:
            found.append(Block(page, i + 1, code, "run"))
        i = end + 1
    return found


BLOCKS = [block for path in PAGES for block in blocks_of(path)]

# Runs in the fresh interpreter: every block of one page, in order, in one namespace. Each
# block's outcome is written as soon as it is known, so a block that hangs or kills the
# interpreter still leaves those before it reported.
RUNNER = r"""
import ast, io, json, re, sys, tokenize, traceback

blocks, out = json.load(open(sys.argv[1], encoding="utf-8")), sys.argv[2]
namespace = {"__name__": "__main__"}
outcomes = {}


def report(name, outcome):
    outcomes[name] = outcome
    with open(out, "w", encoding="utf-8") as f:
        json.dump(outcomes, f)


def comments(code):
    found = {}
    for token in tokenize.generate_tokens(io.StringIO(code).readline):
        if token.type == tokenize.COMMENT:
            found[token.start[0]] = token.string.lstrip("#").strip()
    return found


def each_raises(block):
    # each statement alone; it must raise what its comment names, with the message it quotes
    said = comments(block["code"])
    for statement in ast.parse(block["code"]).body:
        expected = said.get(statement.end_lineno, "")
        match = re.match(r"(\w+): (.*?)(?:\s*\.\.\.)?$", expected)
        if not match:
            return f"line {statement.lineno}: no '# Error: message' comment to check against"
        source = ast.get_source_segment(block["code"], statement)
        try:
            exec(compile(source, block["name"], "exec"), namespace)
        except Exception as error:
            if type(error).__name__ != match[1] or not str(error).startswith(match[2]):
                return f"{source!r} raised {type(error).__name__}: {error}, not {expected}"
        else:
            return f"{source!r} raised nothing; the page says {expected}"
    return None


for block in blocks:
    if block["mode"] == "skip":
        continue
    try:
        if block["mode"] == "raises":
            failure = each_raises(block)
        else:
            exec(compile(block["code"], block["name"], "exec"), namespace)
            failure = None
    except BaseException:
        failure = traceback.format_exc()
    report(block["name"], failure)
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Runs each page's blocks once, in a fresh interpreter per page; {block name: None or why it failed}."""
    cache = {}

    def of(page):
        if page not in cache:
            folder = tmp_path_factory.mktemp(re.sub(r"\W", "_", page))
            listing, out = folder / "blocks.json", folder / "outcomes.json"
            listing.write_text(json.dumps([dict(vars(b), name=b.name) for b in BLOCKS if b.page == page]))
            env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
            work = folder / "work"
            work.mkdir()
            done = subprocess.run(
                [sys.executable, "-c", RUNNER, str(listing), str(out)],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            ran = json.loads(out.read_text()) if out.exists() else {}
            cache[page] = (ran, done)
        return cache[page]

    return of


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_snippet_runs_as_written(block, outcomes):
    if block.mode == "skip":
        pytest.skip(f"{block.name}: {block.reason}")
    ran, done = outcomes(block.page)
    earlier = [b for b in BLOCKS if b.page == block.page and b.line < block.line and b.mode != "skip"]
    failed_before = [b.name for b in earlier if ran.get(b.name)]
    if block.name not in ran:
        pytest.fail(f"{block.name} did not run (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    if ran[block.name]:
        note = f" (after {', '.join(failed_before)} failed)" if failed_before else ""
        pytest.fail(f"{block.name} failed{note}:\n{ran[block.name]}")


def test_every_python_fence_is_collected():
    """A ```python fence the collector misses (indented in a list, say) would go untested."""
    for path in PAGES:
        fences = sum(line.strip() == "```python" for line in path.read_text(encoding="utf-8").splitlines())
        assert len(blocks_of(path)) == fences, path
    assert sum(b.mode == "run" for b in BLOCKS) >= 10
