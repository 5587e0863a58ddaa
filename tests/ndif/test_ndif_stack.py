"""Remote reads against a real NDIF stack on this machine: run by `make test-ndif` (tests/ndif/stack.sh),
skipped elsewhere.

The stack serves the tiny random models of ndif_models.py from a local folder; each read sent to it with
``remote=`` its address, or ``remote=True`` with nnsight configured for it, equals the read of the same
model here in every layer and head. Then the failures a remote user meets, from the real server: a model
it does not host, a job past its execution time-out, an address where nothing listens; the server
stopped while a read waits on it (phase 2, marked ``stopped``); a server that accepts only newer
nnsight clients (phase 3, marked ``other_version``).
"""

from __future__ import annotations

import os
import pathlib
import signal
import threading

import numpy as np
import pytest

HOST = os.environ.get("ATTNWIDGET_NDIF_HOST")
pytestmark = pytest.mark.skipif(not HOST, reason="needs a running NDIF stack: make test-ndif")
FOLDER = pathlib.Path(os.environ.get("ATTNWIDGET_NDIF_MODELS", "."))
TEXT = "I sat on the riverbank and read by the water"


@pytest.fixture(scope="module")
def read():
    from attnwidget.integrations import from_nnsight

    return from_nnsight


def model(name: str):
    from ndif_models import keyed

    return keyed(FOLDER / name)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_read_on_the_server_equals_the_read_here_in_every_layer_and_head(read, name, monkeypatch):
    from nnsight import CONFIG

    from attnwidget import AttentionWidget

    lm = model(name)  # nnsight's meta model: the weights are on the server alone
    monkeypatch.setattr(CONFIG.API, "HOST", HOST)  # remote=True: the server nnsight is configured for
    theres = read(lm, TEXT, remote=HOST), read(lm, TEXT, remote=True)
    assert lm.dispatched is False
    here = read(lm, TEXT)  # (loads the weights here)
    for there in theres:
        assert there.tokens == here.tokens and len(there.layers) == len(here.layers) == 2
        assert (there.causal, there.scale, there.architecture) == (here.causal, here.scale, here.architecture)
        assert there.fetched > 0 and there.device == "cpu"
        for (q, k, v), (q0, k0, v0) in zip(there.layers, here.layers):
            for a, b in ((q, q0), (k, k0), (v, v0)):
                np.testing.assert_allclose(a, b, atol=1e-6)
    w, w0 = AttentionWidget.from_nnsight(lm, TEXT, remote=HOST), AttentionWidget.from_nnsight(lm, TEXT)
    assert w._sources.model.remote.missing == {1}  # the first read: layer 0 and the overview the server computed
    w._answer("overview")
    w0._answer("overview")
    assert w._sources.model.remote.missing == {1}
    thumbs = [np.frombuffer(x.overview["thumbs"]["view"], np.uint8).astype(int) for x in (w, w0)]
    assert np.abs(thumbs[0] - thumbs[1]).max() <= 1
    for name, values in w.overview["summaries"].items():
        np.testing.assert_allclose(values, w0.overview["summaries"][name], rtol=1e-5, atol=1e-6, err_msg=name)
    for layer in range(2):
        for head in range(4):
            w.layer, w.head, w0.layer, w0.head = layer, head, layer, head
            np.testing.assert_allclose(w.weights, w0.weights, atol=1e-6)


def test_a_model_the_server_does_not_host_is_named(read, monkeypatch):
    from nnsight.modeling.huggingface import _ID_CACHE

    lm = model("llama")
    # a name the Hub would answer for, which the server (offline) can neither find nor deploy
    monkeypatch.setattr(lm, "repo_id", "attnwidget-tests/not-hosted")
    monkeypatch.setitem(_ID_CACHE, lm.repo_id, lm.repo_id)
    with pytest.raises(ValueError) as caught:
        read(lm, TEXT, remote=HOST)
    said = str(caught.value)
    assert (
        f"the NDIF server at {HOST} does not serve 'attnwidget-tests/not-hosted' (Could not deploy this model." in said
    )
    assert "Traceback" not in said and type(caught.value.__cause__).__name__ == "RemoteError"


def test_a_job_past_the_servers_time_limit_is_said_so(read):
    # `timed` is deployed with an execution time-out of 1 ms
    with pytest.raises(RuntimeError) as caught:
        read(model("timed"), TEXT, remote=HOST)
    assert (
        "stopped the read when it had run longer than the server allows (Your job exceeded the execution timeout"
        in str(caught.value)
    )


def test_an_address_where_nothing_listens_is_said_so(read):
    port = int(HOST.rsplit(":", 1)[1]) + 10  # (in the stack's range of ports, where nothing listens)
    with pytest.raises(RuntimeError, match=rf"nothing answers at http://127.0.0.1:{port} \(\[Errno 111\]"):
        read(model("llama"), TEXT, remote=f"http://127.0.0.1:{port}")


@pytest.mark.other_version
def test_a_server_that_wants_a_newer_nnsight_says_which_versions(read):
    with pytest.raises(RuntimeError) as caught:
        read(model("llama"), TEXT, remote=HOST)
    said = str(caught.value)
    assert "works with another version of nnsight or transformers than this Python (nnsight 0.8.1" in said
    assert "Client nnsight version 0.8.1 is below the minimum supported 99.0" in said


@pytest.mark.stopped
def test_a_server_stopped_while_a_read_waits_is_said_so(read):
    """The model actors paused, so the job cannot end; once the server has the job, its API is stopped."""
    import subprocess

    from nnsight.intervention.backends import display

    actors = [int(p) for p in subprocess.run(
        ["pgrep", "-s", os.environ["ATTNWIDGET_NDIF_RAY_SESSION"], "-f", "ray::ModelActor"],
        capture_output=True, text=True, check=True,
    ).stdout.split()]  # fmt: skip
    received, failed = threading.Event(), []
    update = display.StatusDisplay.update

    def watched(self, response):  # (nnsight's status display: it sees each status the server sends)
        received.set()
        return update(self, response)

    def run():
        try:
            read(model("llama"), TEXT, remote=HOST)
        except Exception as e:
            failed.append(e)

    display.StatusDisplay.update = watched
    for pid in actors:
        os.kill(pid, signal.SIGSTOP)
    try:
        reading = threading.Thread(target=run)
        reading.start()
        assert received.wait(120), "the server never answered the request"
        os.killpg(int(os.environ["ATTNWIDGET_NDIF_API_SESSION"]), signal.SIGTERM)
        reading.join(120)
    finally:
        display.StatusDisplay.update = update
        for pid in actors:
            os.kill(pid, signal.SIGCONT)
    assert not reading.is_alive() and len(failed) == 1
    # ndif, stopped, tells the job that its replica was evicted, or closes the job's connection first
    said = str(failed[0])
    assert said.startswith(f"the NDIF server at {HOST} stopped before the read ended (")
    assert said.endswith("): nothing was read; run it again")
    assert "(it said: Replica was evicted" in said or "(it closed the job's connection)" in said
