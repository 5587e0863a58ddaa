"""How `make test` shares the suite between its two pytest-xdist workers (``-n 2``): a test file's tests
run in one worker, so its module-scoped fixtures (a JupyterLab page, a model) are made once; and the two
files that read the course notebooks' one execution per session (test_notebooks.py's ``executed``)
share a worker, so each notebook runs once."""

import pytest

SHARED = {"tests/test_notebook_patterns.py": "tests/test_notebooks.py"}


@pytest.hookimpl(optionalhook=True)  # (a hook of pytest-xdist's, which `make compat` does not install)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadFileScheduling

    class ByFile(LoadFileScheduling):
        def _split_scope(self, nodeid):
            path = super()._split_scope(nodeid)
            return SHARED.get(path, path)

    return ByFile(config, log)
