"""Who a request acts as: ``current_principal``, the app's one auth dependency.

In order: a bearer API key of ``langmem_layer.server.keys``; else the caller's own hook
(``authenticate``, for JWT or OIDC); else, in dev mode, the dev user for a key-less
request from loopback. Anything else is 401 with ``WWW-Authenticate: Bearer``. An
admin principal may act on another user with ``?user_id=``; anyone else asking for
another user gets 403.
"""

from __future__ import annotations

import inspect
import ipaddress

from fastapi import HTTPException, Query, Request, Security
from fastapi.security import HTTPBearer

from langmem_layer.server.http.state import state_of
from langmem_layer.server.keys import Principal, averify_key, token_user

__all__ = ["bearer", "current_principal", "is_loopback"]

#: Documents the scheme in the OpenAPI document; the header is read below, so that a
#: malformed one is refused instead of ignored.
bearer = HTTPBearer(auto_error=False, scheme_name="ApiKey",
                    description="An API key from `langmem-layer keys create`.")

# A request that came through a proxy is not "from loopback" even when the proxy is.
_FORWARDED = (b"forwarded", b"x-forwarded-for", b"x-real-ip")


def _unauthorized(detail: str) -> HTTPException:
    return HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})


def is_loopback(request: Request) -> bool:
    """Whether the request comes straight from this machine (no proxy in between)."""
    if any(name in _FORWARDED for name, _ in request.scope.get("headers", ())):
        return False
    host = request.client.host if request.client else None
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _authenticate(request: Request) -> Principal:
    state = state_of(request)
    if state.store is None:
        raise HTTPException(503, "The memory store is not open: the app is starting or "
                            "stopping; retry shortly.")
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token_user(token) is not None:
            principal = await averify_key(state.store, token)
            if principal is None:
                raise _unauthorized("The API key is unknown or revoked.")
            return principal
    if state.authenticate is not None:
        found = state.authenticate(request)
        if inspect.isawaitable(found):
            found = await found
        if found is not None:
            return found
    if header is not None:
        raise _unauthorized("Invalid credentials: send 'Authorization: Bearer <API key>'.")
    if state.dev_user is not None:
        if is_loopback(request):
            return Principal(state.dev_user)
        raise _unauthorized("Dev mode serves key-less requests from loopback only: send "
                            "'Authorization: Bearer <API key>'.")
    raise _unauthorized("Missing credentials: send 'Authorization: Bearer <API key>' "
                        "(`langmem-layer keys create --user U`).")


async def current_principal(
    request: Request,
    user_id: str | None = Query(
        None, description="Admins only: act on this user's memory instead of their own."),
    _credentials: object = Security(bearer),
) -> Principal:
    """The principal the request acts as (a FastAPI dependency).

    Raises:
        HTTPException: 401 without valid credentials; 403 when a non-admin names
            another user in ``user_id``.
    """
    principal = await _authenticate(request)
    if user_id is None or user_id == principal.user_id:
        return principal
    if not principal.admin:
        raise HTTPException(403, "Only an admin key may act on another user's memory.")
    return Principal(user_id, admin=True)
