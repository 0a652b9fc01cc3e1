"""Checking an OpenAI-compatible endpoint before a run spends anything on it."""

from __future__ import annotations

import os
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from vftui.bounds import load_json
from vftui.errors import UserError
from vftui.loopback import is_loopback, unproxied

MAX_MODEL_LIST_BYTES = (
    4 * 1024**2
)  # /models: a few ids and their details; past this it is not a model list


def check_url(base_url: str) -> str:
    parsed = urlparse(base_url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UserError(f"--base-url '{base_url}' is not a URL like http://127.0.0.1:8000/v1")
    try:
        _ = parsed.port
    except ValueError as e:
        raise UserError(f"--base-url '{base_url}' has a bad port: {e}") from e
    return base_url.rstrip("/")


def api_key_for(
    base_url: str, api_key_env: str, environ: dict[str, str] | None = None, private: bool = False
) -> str:
    """The key from ``api_key_env``; required for remote endpoints, optional on loopback and on ``private`` ones
    (the job's own SLURM allocation's, to which atroposlib sends no key of its own either)."""
    environ = dict(os.environ) if environ is None else environ
    key = environ.get(api_key_env, "")
    if key:
        return key
    if private or is_loopback(base_url):
        return "EMPTY"
    host = urlparse(base_url).hostname
    raise UserError(
        f"no API key for {host}: set {api_key_env} (or name another variable with --api-key-env)"
    )


@dataclass(frozen=True)
class Probe:
    models: list[str]
    # each model's ``root`` where the server reports one: what vLLM and SGLang loaded (a Hub name or a path)
    # under the name they serve it as
    roots: dict[str, str] = field(default_factory=dict)


def probe(base_url: str, api_key: str, timeout: float = 10.0) -> Probe:
    """GET /models: unreachable, rejected or not-an-API endpoints are UserErrors; the list is read up to
    ``MAX_MODEL_LIST_BYTES`` as decoded, asked for unencoded. An answer that is no model list is looked at
    again: an API one level down (``/v1``, left out of the URL) or a web page is said as such."""
    url = f"{base_url}/models"
    status, body, web_page = _get(url, base_url, api_key, timeout)
    if status in (401, 403):
        raise UserError(f"the endpoint at {base_url} rejected the API key (HTTP {status})")
    if status >= 400 or _model_list(body) is None:
        if not _ends_in_v1(base_url) and _api_answers(f"{base_url}/v1", api_key, timeout):
            raise UserError(
                f"no OpenAI-compatible API answers at {base_url}, but one answers at {base_url}/v1: "
                "add /v1 to --base-url"
            )
        if web_page and status < 500:  # a proxy's page of its own trouble (502, 503) is not this
            raise UserError(
                f"the endpoint at {base_url} answered with a web page (HTTP {status} for /models), "
                "not an OpenAI-compatible API: give --base-url the model server's address (vLLM's, "
                "SGLang's, ...), like http://127.0.0.1:8000/v1"
            )
    if status >= 400:
        return Probe(models=[])
    if body is None:
        raise UserError(
            f"{url} did not answer like an OpenAI-compatible API (a model list over "
            f"{MAX_MODEL_LIST_BYTES // 1024**2} MB)"
        )
    try:
        data = load_json(body).get("data") or []
        listed = [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        return Probe(
            models=[m["id"] for m in listed],
            roots={m["id"]: m["root"] for m in listed if isinstance(m.get("root"), str)},
        )
    except (ValueError, AttributeError, TypeError) as e:
        raise UserError(
            f"{url} did not answer like an OpenAI-compatible API (no JSON model list)"
        ) from e


def _get(url: str, base_url: str, api_key: str, timeout: float) -> tuple[int, bytes | None, bool]:
    """GET ``url``: its status, its body (None past ``MAX_MODEL_LIST_BYTES``) and whether it is a web page
    (HTML); an endpoint that cannot be reached, or does not answer in time, is a UserError."""
    headers = {"Authorization": f"Bearer {api_key}", "Accept-Encoding": "identity"}
    try:
        # redirects followed, as the OpenAI client follows them; loopback never through a proxy
        with (
            httpx.Client(**unproxied(url), timeout=timeout, follow_redirects=True) as client,
            client.stream("GET", url, headers=headers) as response,
        ):
            body = _capped(response, time.monotonic() + timeout)
            kind = response.headers.get("content-type", "").lower()
    except httpx.ConnectError as e:
        raise UserError(f"cannot reach the endpoint at {base_url}: {_unreachable(e)}") from e
    except httpx.TimeoutException as e:
        raise UserError(f"the endpoint at {base_url} did not answer within {timeout:.0f} s") from e
    except httpx.HTTPError as e:
        raise UserError(f"cannot talk to the endpoint at {base_url}: {type(e).__name__}") from e
    except ImportError as e:  # httpx's SOCKS proxies need its extra
        raise UserError(
            f"the environment names a SOCKS proxy for {base_url} (ALL_PROXY or HTTPS_PROXY); vftui's "
            "requests go through HTTP proxies only (NO_PROXY can leave this host out)"
        ) from e
    return response.status_code, body, _is_web_page(kind, body)


def _is_web_page(content_type: str, body: bytes | None) -> bool:
    """HTML, by its type or by how it begins (a server that calls its page text/plain)."""
    start = (body or b"")[:512].lstrip().lower()
    return "html" in content_type or start.startswith((b"<!doctype html", b"<html"))


def _model_list(body: bytes | None) -> list | None:
    """The ``data`` list of an OpenAI model list, or None where ``body`` is no such thing."""
    if body is None:
        return None
    try:
        value = load_json(body)
    except ValueError:  # not JSON, not UTF-8 (a UnicodeDecodeError is one)
        return None
    data = value.get("data") if isinstance(value, dict) else None
    return data if isinstance(data, list) else None


def _ends_in_v1(base_url: str) -> bool:
    return urlparse(base_url).path.rstrip("/").endswith("/v1")


def _api_answers(base_url: str, api_key: str, timeout: float) -> bool:
    """Whether an OpenAI-compatible API answers at ``base_url``: its model list, or its refusal of the key."""
    try:
        status, body, _ = _get(f"{base_url}/models", base_url, api_key, timeout)
    except UserError:
        return False
    return status in (401, 403) or (status < 400 and _model_list(body) is not None)


def _capped(response: httpx.Response, deadline: float) -> bytes | None:
    """The body, or None past ``MAX_MODEL_LIST_BYTES``; a body still coming at ``deadline`` (a byte at a time, each
    within the read timeout) is a timeout."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_MODEL_LIST_BYTES:
            return None
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the answer did not end in time")
        chunks.append(chunk)
    return b"".join(chunks)


def _unreachable(error: httpx.ConnectError) -> str:
    """Why a connection failed, from the error under httpx's: a refusal, a name that does not resolve, TLS."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(
        cause, (ssl.SSLError, socket.gaierror, ConnectionRefusedError)
    ):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, ssl.SSLError):
        return (
            f"the TLS handshake failed ({error}); for a server that speaks plain HTTP, give http://"
        )
    if isinstance(cause, socket.gaierror):
        return f"its host name does not resolve ({error})"
    return "connection refused or no route"


def choose_model(requested: str | None, probed: Probe, base_url: str) -> str:
    if requested:
        return requested
    if len(probed.models) == 1:
        return probed.models[0]
    listed = ", ".join(probed.models[:10]) or "none listed"
    raise UserError(f"name the model with --model (the endpoint at {base_url} offers: {listed})")


def auth_errors() -> tuple[type[BaseException], ...]:
    """The client errors that mean the key was rejected: not worth retrying."""
    from openai import AuthenticationError, PermissionDeniedError

    return (AuthenticationError, PermissionDeniedError)
