"""Who may call the service: a loopback-only server may run open; any other needs a bearer token."""

from __future__ import annotations

import hmac
import ipaddress


class BindError(ValueError):
    """The server would listen beyond loopback without a token; the message says what to do."""


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1); False for wildcards and anything else."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def check_bind(host: str, token: str | None) -> None:
    if not token and not is_loopback(host):
        raise BindError(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could run code through the "
            "verifier's build and worker machinery. Pass --token (or set MUSACODER_SERVICE_TOKEN), or listen on "
            "127.0.0.1.")


def token_matches(authorization: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    if not authorization:
        return False
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())
