"""Authentication and authorization for the LangGraph server (``langgraph.json``'s ``auth``).

A request's bearer token names its user; nothing in the request body can name another.
:func:`build_auth` returns the ``langgraph_sdk.Auth`` object ``graphs/auth.py`` exposes:

- ``authenticate``: ``Authorization: Bearer <key>`` is verified against the memory
  database (:func:`verify_token`); a missing or unknown key is refused with 401.
- assistants are readable by every user; one a user creates is changed by it alone.
- threads and crons carry their owner in ``metadata.owner`` and are visible to it alone.
- a run gets ``configurable.user_id`` (and ``context.user_id``) set to the
  authenticated user, whatever the client sent: the memory nodes read the user there.
- the store API (``/store/...``, Studio's store view) is confined to the user's own
  namespace ``("memories", <user>, ...)``; naming another user's is refused with 403.

An admin key (``Principal.admin``) is not confined.

``langgraph_sdk`` is imported only by :func:`build_auth`: the library does not need it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langmem_layer.errors import AccessDeniedError
from langmem_layer.store.core import MEMORY_ROOT

if TYPE_CHECKING:
    from langmem_layer.auth import Principal

__all__ = ["bearer_token", "build_auth", "scope_namespace", "verify_token"]

OWNER = "owner"


Verify = Callable[[str], Awaitable["Principal | None"]]


def bearer_token(authorization: str | None) -> str:
    """The key of an ``Authorization: Bearer <key>`` header.

    Raises:
        AccessDeniedError: 401, no such header or another scheme.
    """
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AccessDeniedError(401, "Send the API key as 'Authorization: Bearer <key>' "
                               "(create one with langmem_layer.auth.create_key).")
    return token.strip()


async def verify_token(token: str) -> Principal | None:
    """The principal of an API key, checked against the server's memory database.

    Returns:
        None when the key is unknown or revoked.
    """
    from langmem_layer import auth, serving

    return await auth.averify_key(serving.current().store, token)


def scope_namespace(namespace: tuple[str, ...] | None, user_id: str) -> tuple[str, ...]:
    """Confine a store API namespace (or prefix) to ``("memories", user_id, ...)``.

    An empty or missing namespace, or ``("memories",)``, becomes the user's own root.

    Raises:
        AccessDeniedError: 403, the namespace is another user's or outside the memories.
    """
    ns = tuple(namespace or ())
    if not ns or ns == (MEMORY_ROOT,):
        return (MEMORY_ROOT, user_id)
    if ns[0] == MEMORY_ROOT and ns[1] == user_id:
        return ns
    raise AccessDeniedError(403, f"Namespace {ns!r} is not yours: use "
                           f"({MEMORY_ROOT!r}, {user_id!r}, ...).")


def _force_user(value: dict[str, Any], user_id: str) -> None:
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict):
        return
    config = kwargs.get("config")
    if isinstance(config, dict):
        configurable = config.get("configurable")
        if not isinstance(configurable, dict):
            configurable = config["configurable"] = {}
        configurable["user_id"] = user_id
    context = kwargs.get("context")
    if isinstance(context, dict):
        context["user_id"] = user_id


def build_auth(verify: Verify | None = None) -> Any:
    """The ``langgraph_sdk.Auth`` handlers described in the module docstring.

    Args:
        verify: Returns the principal of a key, or None (default :func:`verify_token`).
    """
    from langgraph_sdk import Auth

    check = verify or verify_token
    auth = Auth()

    def http_error(e: AccessDeniedError) -> Exception:
        return Auth.exceptions.HTTPException(status_code=e.status, detail=e.detail)

    def is_admin(ctx: Any) -> bool:
        return "admin" in (getattr(ctx, "permissions", None) or ())

    @auth.authenticate
    async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
        try:
            token = bearer_token(authorization)
        except AccessDeniedError as e:
            raise http_error(e) from None
        principal = await check(token)
        if principal is None:
            raise Auth.exceptions.HTTPException(
                status_code=401, detail="Unknown or revoked API key.")
        return {"identity": principal.user_id, "is_authenticated": True,
                "permissions": ["admin"] if principal.admin else []}

    async def owned(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        if is_admin(ctx):
            return None
        if ctx.action in ("create", "create_run") and isinstance(value, dict):
            # In place: the server keeps its own reference to the metadata dict.
            metadata = value.get("metadata")
            if isinstance(metadata, dict):
                metadata[OWNER] = ctx.user.identity
            else:
                value["metadata"] = {OWNER: ctx.user.identity}
        return {OWNER: ctx.user.identity}

    async def shared_read(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        # Assistants (the graphs' configurations) are readable by all; changing one
        # is its owner's (or an admin's) business.
        if ctx.action in ("read", "search"):
            return None
        return await owned(ctx, value)

    auth.on.assistants(shared_read)
    auth.on.threads(owned)
    auth.on.crons(owned)

    @auth.on.threads.create_run
    async def create_run(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        if not is_admin(ctx):
            _force_user(value, ctx.user.identity)
        return await owned(ctx, value)

    @auth.on.store()
    async def store(ctx: Auth.types.AuthContext, value: Any) -> None:
        if is_admin(ctx):
            return
        try:
            value["namespace"] = scope_namespace(value.get("namespace"), ctx.user.identity)
        except AccessDeniedError as e:
            raise http_error(e) from None

    return auth
