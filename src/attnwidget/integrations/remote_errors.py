"""What went wrong in a remote read, said in words with what to do.

nnsight 0.8.1 reports a failed remote trace in several shapes: its ``RemoteError`` carrying the server's
words (an HTTP refusal's ``detail``, or a job's ERROR status), the socket's own ``OSError`` when nothing
answers, websocket-client's exceptions, and pydantic's ``ValidationError`` when the server closes the
job's websocket before the job ends (nnsight then parses the empty closing message as a status). Each
becomes a ``RuntimeError`` (``ValueError`` for a model the server does not host, or cannot be named to
it) that names the problem, the server and what to do, chained to nnsight's exception. Nothing of a
failed trace is kept: the read raises, so no widget is half-filled.

Imported only by ``attnwidget.integrations.from_nnsight``, after nnsight is known to be importable.
"""

from __future__ import annotations

import contextlib
import socket

KEY = (
    'get a key at https://login.ndif.us, then set it with nnsight.CONFIG.set_default_api_key("<your key>") '
    "(saved for later sessions) or the NDIF_API_KEY environment variable (read when nnsight is imported)"
)
VERSIONS = "nnsight.ndif.compare() shows both sides' versions"
# The server's words for each problem (ndif 0.1.x, and NDIF as it has answered users), lower-cased
NOT_HOSTED = (
    "could not deploy this model", "unavailable for deployment", "is not dedicated", "hotswapping is not supported",
    "not deployed", "repository not found",
)  # fmt: skip
STOPPED = ("was evicted while processing", "cancelled or preempted")
OTHER_VERSION = ("nnsight version", "python version", "payload could not be read", "architecture on this server")


@contextlib.contextmanager
def explained(model, remote: bool | str):
    """Run a remote trace of ``model`` (``remote`` as ``model.trace`` takes it); a failure nnsight reports
    comes out as an exception saying what happened and what to do."""
    if remote == "local":  # run here: its failures are a local trace's
        yield
        return
    from nnsight import CONFIG
    from nnsight.intervention.backends.remote import RemoteError
    from pydantic import ValidationError
    from websocket import WebSocketBadStatusException, WebSocketConnectionClosedException, WebSocketException

    host = remote if isinstance(remote, str) else CONFIG.API.HOST
    named(model)
    try:
        yield
    except RemoteError as e:
        raise said(e, host, _name(model), bool(CONFIG.API.APIKEY)) from e
    except ValidationError as e:
        if e.title != "ResponseModel":
            raise
        raise RuntimeError(stopped(host, "it closed the job's connection")) from e
    except WebSocketConnectionClosedException as e:
        raise RuntimeError(stopped(host, "the connection to it was lost")) from e
    except WebSocketBadStatusException as e:
        raise RuntimeError(
            f"{host} answered, but not as an NDIF server does ({e}): check the address (remote=, or "
            "nnsight.CONFIG.API.HOST) and run this again"
        ) from e
    except (ConnectionError, TimeoutError, socket.gaierror, WebSocketException) as e:
        raise RuntimeError(unreachable(host, e)) from e


def named(model) -> None:
    """Refuse, before anything is sent, a model nnsight cannot name to the server: nnsight sends a model's
    Hugging Face repository, in the Hub's own spelling, which it asks the Hub for (and keeps)."""
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError

    name = getattr(model, "repo_id", None)
    try:
        model.to_model_key()
    except HFValidationError as e:
        raise ValueError(
            "a remote read names the model by its Hugging Face repository, and this one has "
            f"{'no name' if not name else f'the name {name!r}, which is not one'} (it was wrapped from a model "
            'object or a folder): wrap it by its name, nnsight.LanguageModel("<organisation>/<model>"), or read '
            "it on this machine: from_nnsight(model, text) without remote="
        ) from e
    except RepositoryNotFoundError as e:
        raise ValueError(f"the Hugging Face Hub has no repository {name!r}, and NDIF serves models by it") from e
    except OSError as e:  # (the Hub's errors for no answer, and offline mode, are OSErrors)
        raise RuntimeError(
            f"nnsight asks the Hugging Face Hub for {name!r}'s name before a remote read, and could not ({e}): "
            "connect to the Hub (and unset HF_HUB_OFFLINE), then run this again"
        ) from e


def said(e: Exception, host: str, name: str, has_key: bool) -> Exception:
    """The exception to raise for nnsight's ``RemoteError`` ``e``, whose text is the server's words (after
    "Failed to send request: " when the request was refused, or never arrived, before it ran)."""
    import httpx

    at = f"the NDIF server at {host}"
    text = str(e).split("\nTraceback", 1)[0].strip()  # (a server's traceback says nothing the user can act on)
    words = text.removeprefix("Failed to send request:").strip()
    lower = words.lower()
    cause = e.__cause__
    status = getattr(getattr(cause, "response", None), "status_code", None)
    if isinstance(cause, httpx.TimeoutException):
        return RuntimeError(
            f"{at} did not answer in time ({type(cause).__name__}: {words}): it is busy or out of reach; check "
            "the network and the server's state (nnsight.ndif.status()), and run this again"
        )
    if isinstance(cause, httpx.TransportError):
        return RuntimeError(unreachable(host, words))
    if status in (401, 403) or (status == 400 and "api key" in lower):
        if not has_key:
            return RuntimeError(f"{at} asks for an API key and none is set: {KEY}; then run this again")
        return RuntimeError(f"{at} refused the API key nnsight holds ({words}): {KEY}; then run this again")
    if any(s in lower for s in NOT_HOSTED):
        return ValueError(
            f"{at} does not serve {name} ({words}): read a model it hosts (nnsight.ndif.status() lists them), "
            "or read this one on this machine: from_nnsight(model, text) without remote="
        )
    if any(s in lower for s in OTHER_VERSION):
        return RuntimeError(
            f"{at} works with another version of nnsight or transformers than this Python ({versions()}); it "
            f"said: {words} Install the versions it runs ({VERSIONS}; pip install --upgrade nnsight), restart "
            "Python, and run this again"
        )
    if any(s in lower for s in STOPPED):
        return RuntimeError(stopped(host, f"it said: {words}"))
    if "timeout" in lower or "timed out" in lower:
        return RuntimeError(
            f"{at} stopped the read when it had run longer than the server allows ({words}); nothing was read. "
            "Read a shorter text, or run it again when the server is less busy (nnsight.ndif.status())"
        )
    if status == 503:
        return RuntimeError(f"{at} is not ready to run jobs ({words}): run this again in a few minutes")
    return RuntimeError(f"{at} could not run the read; it said: {text}")


def stopped(host: str, how: str) -> str:
    return f"the NDIF server at {host} stopped before the read ended ({how}): nothing was read; run it again"


def unreachable(host: str, why) -> str:
    return (
        f"nothing answers at {host} ({why}): check the address (remote=, or nnsight.CONFIG.API.HOST and the "
        "NDIF_HOST environment variable) and the network, and run this again once the server is up"
    )


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("nnsight", "transformers", "torch"))


def _name(model) -> str:
    name = getattr(model, "repo_id", None) or getattr(getattr(model, "_module", None), "name_or_path", None)
    return repr(name) if name else "this model"
