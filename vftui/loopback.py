"""Loopback is reached directly, never through a proxy.

The proxy variables (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``) apply to an endpoint
as they do for the openai client, but not to this machine's own addresses (127.0.0.0/8, ::1, localhost): a
proxy cannot reach them as this machine does, and a desktop's ``HTTP_PROXY`` without ``NO_PROXY`` sent the
embedded simulation's requests to it, so that the README's first command failed.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import urlparse

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")  # as httpx's mount patterns write them


def is_loopback_host(host: str) -> bool:
    """``localhost``, or a loopback address (an IPv6 one with or without its brackets)."""
    host = host.lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_loopback(url: str) -> bool:
    return is_loopback_host(urlparse(url).hostname or "")


def unproxied(*urls: str) -> dict[str, Any]:
    """An httpx client's settings for asking ``urls``: a loopback host reached directly, as though
    ``NO_PROXY`` named it; other hosts keep the environment's proxies. A client for loopback alone reads no
    proxy at all (a desktop's ``ALL_PROXY=socks://`` is no error), only ``SSL_CERT_FILE``/``SSL_CERT_DIR``."""
    if urls and all(is_loopback(url) for url in urls):
        settings: dict[str, Any] = {"trust_env": False}
        if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
            import httpx

            settings["verify"] = httpx.create_ssl_context(trust_env=True)
        return settings
    hosts = set(LOOPBACK_NAMES)
    for url in urls:
        host = urlparse(url).hostname or ""
        if is_loopback_host(host):
            hosts.add(f"[{host}]" if ":" in host else host)
    return {"mounts": {f"all://{host}": None for host in sorted(hosts)}}
