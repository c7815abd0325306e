"""Authentication and authorization for the LangGraph server (``langgraph.json``'s ``auth``).

A request's bearer token names its user; nothing in the request body can name another.
``build_auth`` returns the ``langgraph_sdk.Auth`` object ``graphs/auth.py`` exposes:

- ``authenticate``: ``Authorization: Bearer <key>`` is verified against the memory
  database (``verify_token``); a missing or unknown key is refused with 401.
- assistants are readable by every user; one a user creates is changed by it alone.
- threads and crons carry their owner in ``metadata.owner`` and are visible to it alone.
- a run gets ``configurable.user_id`` (and ``context.user_id``) set to the
  authenticated user, whatever the client sent: the memory nodes read the user there.
- the store API (``/store/...``, Studio's store view) is confined to the user's own
  namespace ``("memories", <user>, ...)``; naming another user's is refused with 403.
- the graphs in ``ADMIN_GRAPHS`` (the ``jobs`` graph: it acts on every user's
  memory) are an admin's: a non-admin's run, cron, or assistant of one is refused with
  403 before anything is created. A cron an admin creates keeps the admin's
  permission for its runs, as the server keeps it for a run.

An admin key (``Principal.admin``) is not confined.

``langgraph_sdk`` is imported only by ``build_auth``: the library does not need it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid5

from langmem_layer.errors import AccessDeniedError
from langmem_layer.jobs.graph import ADMIN_PERMISSION
from langmem_layer.store.core import MEMORY_ROOT

if TYPE_CHECKING:
    from langmem_layer.server.keys import Principal

__all__ = ["ADMIN_GRAPHS", "admin_graph", "bearer_token", "build_auth", "scope_namespace",
           "verify_token"]

OWNER = "owner"

#: Graphs of ``langgraph.json`` that only an admin may run (they act on every user).
ADMIN_GRAPHS = frozenset({"jobs"})
#: The namespace a LangGraph server derives a graph's own assistant id from
#: (``langgraph_api.graph.NAMESPACE_GRAPH``: ``uuid5(NAMESPACE_GRAPH, graph_id)``).
NAMESPACE_GRAPH = UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")


Verify = Callable[[str], Awaitable["Principal | None"]]


def bearer_token(authorization: str | None) -> str:
    """The key of an ``Authorization: Bearer <key>`` header.

    Raises:
        AccessDeniedError: 401, no such header or another scheme.
    """
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AccessDeniedError(401, "Send the API key as 'Authorization: Bearer <key>' "
                               "(create one with langmem_layer.server.keys.create_key).")
    return token.strip()


async def verify_token(token: str) -> Principal | None:
    """The principal of an API key, checked against the server's memory database.

    Returns:
        None when the key is unknown or revoked.
    """
    from langmem_layer.server import keys as auth
    from langmem_layer.server import served as serving

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


def admin_graph(assistant_id: Any) -> str | None:
    """The admin-only graph an assistant id names, or None.

    A client names a graph's own assistant by the graph's name or by the id the server
    derives from it; both are recognised.
    """
    text = str(assistant_id or "")
    for graph in ADMIN_GRAPHS:
        if text in (graph, str(uuid5(NAMESPACE_GRAPH, graph))):
            return graph
    return None


def _admin_only(graph: str) -> AccessDeniedError:
    return AccessDeniedError(403, f"The {graph!r} graph acts on every user's memory: "
                             "run it, or schedule it, with an admin key.")


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


def _keep_permissions(payload: dict[str, Any], permissions: list[str]) -> None:
    """Record the creator's permissions in a cron's run settings.

    A cron's runs are made later, by the server, as the cron's user with the
    permissions its payload carries (``langgraph_auth_permissions``, a key the server
    strips from what clients send): recording them here is what lets an admin's cron
    of the ``jobs`` graph run, and keeps a user's cron from ever holding more.
    """
    config = payload.get("config")
    if not isinstance(config, dict):
        config = payload["config"] = {}
    configurable = config.get("configurable")
    if not isinstance(configurable, dict):
        configurable = config["configurable"] = {}
    configurable["langgraph_auth_permissions"] = permissions


def build_auth(verify: Verify | None = None) -> Any:
    """The ``langgraph_sdk.Auth`` handlers described in the module docstring.

    Args:
        verify: Returns the principal of a key, or None (default ``verify_token``).
    """
    from langgraph_sdk import Auth

    check = verify or verify_token
    auth = Auth()

    def http_error(e: AccessDeniedError) -> Exception:
        return Auth.exceptions.HTTPException(status_code=e.status, detail=e.detail)

    def is_admin(ctx: Any) -> bool:
        return ADMIN_PERMISSION in (getattr(ctx, "permissions", None) or ())

    def refuse_admin_graph(ctx: Any, assistant_id: Any) -> None:
        graph = admin_graph(assistant_id)
        if graph and not is_admin(ctx):
            raise http_error(_admin_only(graph))

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
        # is its owner's (or an admin's) business, and one of an admin graph is an
        # admin's alone (a run of it would run jobs).
        if ctx.action in ("read", "search"):
            return None
        if ctx.action in ("create", "update") and isinstance(value, dict):
            refuse_admin_graph(ctx, value.get("graph_id"))
        return await owned(ctx, value)

    async def crons(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        payload = value.get("payload") if isinstance(value, dict) else None
        if ctx.action in ("create", "update") and isinstance(payload, dict):
            refuse_admin_graph(ctx, payload.get("assistant_id"))
            if ctx.action == "create":
                _keep_permissions(payload, list(getattr(ctx, "permissions", None) or ()))
        return await owned(ctx, value)

    auth.on.assistants(shared_read)
    auth.on.threads(owned)
    auth.on.crons(crons)

    @auth.on.threads.create_run
    async def create_run(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str] | None:
        refuse_admin_graph(ctx, value.get("assistant_id"))
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
