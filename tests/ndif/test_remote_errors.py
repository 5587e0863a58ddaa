"""A remote read that fails says what happened and what to do (integrations/remote_errors.py).

nnsight's own client sends the trace to a small server on 127.0.0.1 that answers as an NDIF server does
in each failure (its words are ndif 0.1.2's), so every exception here is one nnsight itself raised: the
refusals of /request, the ERROR statuses of a job, a job's websocket closed or dropped, a port where
nothing listens, a server that is not NDIF. `make test-ndif` meets the same failures on a real stack.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from dataclasses import dataclass, field

import pytest

tornado = pytest.importorskip("tornado")
pytest.importorskip("nnsight")
import tornado.httpserver  # noqa: E402
import tornado.netutil  # noqa: E402
import tornado.web  # noqa: E402
import tornado.websocket  # noqa: E402
from ndif_models import build, keyed  # noqa: E402
from test_integrations import gpt2_tokenizer, tf  # noqa: E402  (fixtures)
from test_nnsight_remote import wrap  # noqa: E402

from attnwidget.integrations import from_nnsight  # noqa: E402

TEXT = "I sat on the riverbank"
RECEIVED = json.dumps({"id": "job", "status": "RECEIVED", "description": "Your job has been received."})
# ndif 0.1.2's words: services/api/auth.py, versioning.py, app.py, queue/processor.py, modeling/base.py,
# common/errors.py
NO_KEY = "Missing or invalid API key. Please visit https://login.ndif.us/ to create a new one."
OLD_CLIENT = "Client nnsight version 0.8.1 is below the minimum supported 99.0. Please `pip install --upgrade nnsight`."
NOT_READY = "Service temporarily unavailable: compute backend is reconnecting. Please try again in a few minutes."
NOT_DEPLOYED = "Could not deploy this model. could not read 'no/such-model' from the Hub: Repository Not Found"
TIMED_OUT = "Your job exceeded the execution timeout of 0.001s."
EVICTED = "Replica was evicted while processing your request. Sorry for the inconvenience. Please try again later."
UNREADABLE = (
    "Your request payload could not be read (UnpicklingError: invalid load key). It may be truncated or corrupted "
    "in transit, or compressed differently than the request declared. Re-sending it usually resolves this; if it "
    "persists, check that the client and server nnsight versions match."
)


@dataclass
class Answer:
    """How the server answers a request: an HTTP status and ``detail`` for a refusal, or RECEIVED and then
    ``then`` on the job's websocket (a status's description, "close" or "drop")."""

    status: int = 200
    detail: str = ""
    then: str = ""
    delay: float = 0.0  # seconds before answering /request
    keys: list = field(default_factory=list)  # the API key of each request received


class Subscribe(tornado.websocket.WebSocketHandler):
    def open(self):
        self.application.settings["sockets"].append(self)
        self.write_message(json.dumps({"session_id": "session"}))


class Request(tornado.web.RequestHandler):
    async def post(self):
        answer: Answer = self.application.settings["answer"]
        answer.keys.append(self.request.headers.get("ndif-api-key"))
        await asyncio.sleep(answer.delay)
        if answer.status != 200:
            self.set_status(answer.status)
            self.finish({"detail": answer.detail})
            return
        self.finish(RECEIVED)
        job = self.application.settings["sockets"][-1]
        if answer.then == "close":
            job.close()
        elif answer.then == "drop":  # the connection lost, no closing message
            job.ws_connection.stream.close()
        else:
            job.write_message(json.dumps({"id": "job", "status": "ERROR", "description": answer.then}))


@contextlib.contextmanager
def ndif(answer: Answer, routes=True):
    """An NDIF-like server on 127.0.0.1 (its own thread and event loop): its address."""
    loop, ready, port = asyncio.new_event_loop(), threading.Event(), []

    def serve():
        asyncio.set_event_loop(loop)
        handlers = [("/subscribe", Subscribe), ("/request", Request)] if routes else []
        server = tornado.httpserver.HTTPServer(tornado.web.Application(handlers, answer=answer, sockets=[]))
        sockets = tornado.netutil.bind_sockets(0, "127.0.0.1")
        server.add_sockets(sockets)
        port.append(sockets[0].getsockname()[1])
        ready.set()
        loop.run_forever()
        server.stop()
        loop.run_until_complete(server.close_all_connections())
        loop.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return keyed(build(tmp_path_factory.mktemp("ndif-models"))["llama"])


@pytest.fixture
def key(monkeypatch):
    from nnsight import CONFIG

    monkeypatch.setattr(CONFIG.API, "APIKEY", "0b9c3e52-54b1-4b5a-9d84-5f1f0e6f0a11")
    return CONFIG


def fails(lm, answer: Answer, exception=RuntimeError, routes=True):
    """The read's exception, and nnsight's beneath it."""
    with ndif(answer, routes) as host, pytest.raises(exception) as caught:
        from_nnsight(lm, TEXT, remote=host)
    return str(caught.value), caught.value.__cause__, host


def remote_error():
    from nnsight.intervention.backends.remote import RemoteError

    return RemoteError


def test_no_api_key_says_how_to_set_one(lm, key, monkeypatch):
    monkeypatch.setattr(key.API, "APIKEY", None)
    said, cause, host = fails(lm, answer := Answer(401, NO_KEY))
    assert answer.keys == [None] and isinstance(cause, remote_error())
    assert f"the NDIF server at {host} asks for an API key and none is set" in said
    assert 'nnsight.CONFIG.set_default_api_key("<your key>")' in said and "NDIF_API_KEY" in said


def test_a_key_the_server_refuses_is_said_so(lm, key):
    said, cause, host = fails(lm, answer := Answer(403, "Invalid API key."))
    assert answer.keys == [key.API.APIKEY] and isinstance(cause, remote_error())
    assert "refused the API key nnsight holds (Invalid API key.)" in said and "set_default_api_key" in said


def test_a_model_the_server_does_not_host_is_named(lm, key):
    said, cause, host = fails(lm, Answer(then=NOT_DEPLOYED), ValueError)
    assert isinstance(cause, remote_error())
    assert f"the NDIF server at {host} does not serve '{lm.repo_id}' (Could not deploy this model." in said
    assert "nnsight.ndif.status() lists them" in said and "without remote=" in said


@pytest.mark.parametrize(("answer"), [Answer(400, OLD_CLIENT), Answer(then=UNREADABLE)], ids=["refused", "unreadable"])
def test_a_server_of_another_nnsight_version_says_which_versions(lm, key, answer):
    from importlib.metadata import version

    said, cause, _ = fails(lm, answer)
    assert isinstance(cause, remote_error())
    assert "works with another version of nnsight or transformers than this Python" in said
    assert f"nnsight {version('nnsight')}, transformers {version('transformers')}" in said
    assert (OLD_CLIENT if answer.status == 400 else "check that the client and server nnsight versions match") in said
    assert "nnsight.ndif.compare()" in said and "pip install --upgrade nnsight" in said


def test_a_job_past_the_servers_time_limit_is_said_so(lm, key):
    said, cause, _ = fails(lm, Answer(then=TIMED_OUT))
    assert isinstance(cause, remote_error())
    assert f"stopped the read when it had run longer than the server allows ({TIMED_OUT}); nothing was read" in said
    assert "shorter text" in said


def test_a_server_that_does_not_answer_in_time_is_said_so(lm, key, monkeypatch):
    # (nnsight waits 600 s for an answer to its request: its own limit, shortened here)
    monkeypatch.setattr("nnsight.intervention.backends.remote._READ_TIMEOUT", 0.5)
    said, cause, host = fails(lm, Answer(delay=3))
    assert isinstance(cause, remote_error()) and type(cause.__cause__).__name__ == "ReadTimeout"
    assert said.startswith(f"the NDIF server at {host} did not answer in time (ReadTimeout: timed out)")


def test_a_server_not_ready_says_to_wait(lm, key):
    said, cause, _ = fails(lm, Answer(503, NOT_READY))
    assert isinstance(cause, remote_error()) and f"is not ready to run jobs ({NOT_READY})" in said


@pytest.mark.parametrize(
    ("then", "how", "raised"),
    [("close", "it closed the job's connection", "ValidationError"),
     ("drop", "the connection to it was lost", "WebSocketConnectionClosedException"),
     (EVICTED, f"it said: {EVICTED}", "RemoteError")],
    ids=["closed", "dropped", "evicted"],
)  # fmt: skip
def test_a_server_that_stops_during_the_job_is_said_so(lm, key, then, how, raised):
    # closed: nnsight reads the empty message of a closed websocket as a status, and pydantic refuses it;
    # evicted: what ndif says when it is stopped while the job runs
    said, cause, host = fails(lm, Answer(then=then))
    assert type(cause).__name__ == raised
    assert said == f"the NDIF server at {host} stopped before the read ended ({how}): nothing was read; run it again"


def test_an_address_where_nothing_listens_is_said_so(lm, key):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(RuntimeError) as caught:
        from_nnsight(lm, TEXT, remote=host)
    assert isinstance(caught.value.__cause__, ConnectionRefusedError)
    assert str(caught.value).startswith(f"nothing answers at {host} ([Errno 111] Connection refused)")
    assert "nnsight.CONFIG.API.HOST" in str(caught.value)


def test_a_server_that_is_not_ndif_is_said_so(lm, key):
    said, cause, host = fails(lm, Answer(), routes=False)
    assert type(cause).__name__ == "WebSocketBadStatusException"
    assert said.startswith(f"{host} answered, but not as an NDIF server does (Handshake status 404")


def test_a_list_of_texts_is_read_whole_or_not_at_all(lm, key):
    with ndif(Answer(then=TIMED_OUT)) as host, pytest.raises(RuntimeError, match="nothing was read"):
        from_nnsight(lm, [TEXT, "I read"], remote=host)


def test_a_model_without_a_hub_name_is_refused_before_anything_is_sent(tf, gpt2_tokenizer):
    unnamed = wrap(tf, gpt2_tokenizer, "llama")  # wrapped from a model object: nnsight has no name to send
    with ndif(answer := Answer()) as host, pytest.raises(ValueError) as caught:
        from_nnsight(unnamed, TEXT, remote=host)
    assert answer.keys == [] and type(caught.value.__cause__).__name__ == "HFValidationError"
    assert "names the model by its Hugging Face repository" in str(caught.value)
    assert 'nnsight.LanguageModel("<organisation>/<model>")' in str(caught.value)


def test_a_hub_out_of_reach_is_said_before_anything_is_sent(lm, key, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # (nnsight asks the Hub for the name it sends)
    monkeypatch.setattr(lm, "repo_id", "attnwidget-tests/never-asked")
    with ndif(answer := Answer()) as host, pytest.raises(RuntimeError) as caught:
        from_nnsight(lm, TEXT, remote=host)
    assert answer.keys == [] and type(caught.value.__cause__).__name__ == "OfflineModeIsEnabled"
    assert "asks the Hugging Face Hub for 'attnwidget-tests/never-asked'" in str(caught.value)


def test_a_remote_read_loads_no_weights_here(tmp_path):
    lm = keyed(build(tmp_path)["gpt2"])  # nnsight's meta model: the weights stay on the server
    with ndif(Answer(then=TIMED_OUT)) as host, pytest.raises(RuntimeError):
        from_nnsight(lm, TEXT, remote=host)
    assert lm.dispatched is False and {p.device.type for p in lm._module.parameters()} == {"meta"}
