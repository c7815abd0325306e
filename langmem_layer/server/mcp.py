"""An MCP server over one person's memory: ``langmem-layer mcp``.

MCP clients (Claude Code, Cursor, Copilot, Claude Desktop, a LangGraph agent through
``langchain-mcp-adapters``) share one user's memory through it. It exposes the memory
tools of ``langmem_layer.facade.tools.create_memory_tools`` — ``remember``, ``recall``,
``correct``, ``update``, ``forget``; the same tools, run with the connection's user and
profile as their run config, so they write through the same gate and history as
extraction — and a read-only resource, ``memory://block``, the memory block an agent
would get (``memory://block/{query}`` for the block recalled for a query).

The user is the server's (``--user`` or ``LANGMEM_USER_ID``), or over HTTP the user of
the API key the client sends (``Authorization: Bearer <key>``, keys from
``langmem-layer keys create --user USER``); no tool takes a user id, and an argument a
model adds (``user_id``) is dropped by the tool's schema. The profile is chosen per
connection, as agents are assigned a profile when they connect: over streamable HTTP by
the ``X-Langmem-Profile`` header or the ``profile`` query parameter of the endpoint URL;
over stdio (one process per connection) by ``--profile`` or ``LANGMEM_PROFILE``; else
the settings' default profile.

Requires the ``mcp`` extra (``pip install 'langmem-layer[mcp]'``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import BaseModel, create_model

from langmem_layer.errors import ConfigurationError, MissingUserError
from langmem_layer.facade.tools import create_memory_tools
from langmem_layer.flow import require_user

if TYPE_CHECKING:
    from mcp.server.fastmcp import Context, FastMCP

    from langmem_layer.facade import MemoryLayer
    from langmem_layer.settings import MemorySettings

__all__ = ["KEY_USER", "PROFILE_HEADER", "bearer_auth", "create_mcp_server", "serve"]

#: The HTTP header a streamable-HTTP client sets to pick its profile.
PROFILE_HEADER = "X-Langmem-Profile"
#: Where the bearer check leaves the verified key's user in the ASGI scope.
KEY_USER = "langmem.user_id"
#: The interfaces the HTTP transport may bind: it does not authenticate its clients.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: The resource holding the memory block (no query: what the agent always sees).
BLOCK_URI = "memory://block"
INSTRUCTIONS = (
    "Long-term memory of the user you are working with, shared by all their agents. "
    "Use recall before answering questions about the user or their past work, remember "
    "for durable facts, preferences, events and plans worth keeping, correct or forget "
    "with the ids recall shows. Read memory://block for what you should always know.")


def _require_mcp() -> None:
    try:
        import mcp.server.fastmcp  # noqa: F401
    except ImportError as e:
        raise ConfigurationError(
            "The MCP server needs the official MCP SDK: pip install 'langmem-layer[mcp]'"
        ) from e


def _profile_name(settings: MemorySettings, profile: str | None, source: str) -> str:
    """``profile`` checked against the configured profiles, else the default one."""
    if not profile:
        return settings.default_profile
    if profile not in settings.profiles:
        raise ConfigurationError(
            f"Unknown profile {profile!r} from {source}: choose one of "
            f"{', '.join(settings.profiles)}, or declare it in LANGMEM_PROFILES "
            f"(e.g. LANGMEM_PROFILES={','.join((*settings.profiles, profile))}).")
    return profile


class _Identity:
    """Who a request runs as: the server's user, the connection's profile."""

    def __init__(self, memory: MemoryLayer, user_id: str | None, profile: str | None
                 ) -> None:
        self.memory = memory
        self.user_id = require_user(user_id) if user_id else None
        self.profile = _profile_name(memory.settings, profile,
                                     "the server's configuration")

    def config(self, ctx: Context[Any, Any, Any]) -> RunnableConfig:
        """The run config of the request in ``ctx`` (what the memory tools read)."""
        request = ctx.request_context.request
        profile = self.profile
        scope = getattr(request, "scope", None) or {}
        user_id = scope.get(KEY_USER) or self.user_id  # a verified API key's user first
        if user_id is None:
            raise MissingUserError(
                "No user: start the server with --user (or LANGMEM_USER_ID), or connect "
                "over HTTP with 'Authorization: Bearer <key>' (langmem-layer keys create).")
        if request is not None:  # streamable HTTP: the connection may pick its profile
            chosen = (getattr(request, "headers", {}).get(PROFILE_HEADER)
                      or getattr(request, "query_params", {}).get("profile"))
            if chosen:
                profile = _profile_name(self.memory.settings, chosen, "the connection")
        configurable: dict[str, Any] = {"user_id": user_id, "profile": profile}
        client = ctx.request_context.session.client_params
        if client is not None and client.clientInfo.name:
            configurable["agent_id"] = client.clientInfo.name  # trust is per agent
        return {"configurable": configurable}


def _arguments_model(tool: BaseTool) -> Any:
    """The tool's argument model as FastMCP validates it: unknown arguments (a
    ``user_id`` a model adds) are ignored, as the LangChain tool's schema ignores them."""
    from mcp.server.fastmcp.utilities.func_metadata import ArgModelBase

    schema = tool.tool_call_schema
    assert isinstance(schema, type) and issubclass(schema, BaseModel)
    fields: dict[str, Any] = {name: (info.annotation, info)
                              for name, info in schema.model_fields.items()}
    return create_model(f"{tool.name}Arguments", __base__=ArgModelBase, **fields)


def _mcp_tool(tool: BaseTool, identity: _Identity) -> Any:
    """A FastMCP tool that runs the LangChain memory tool as the connection's user.

    A tool error (content the rule refuses, an unknown id, the gate's refusal) is raised
    as ``ToolError``: the SDK answers it with
    ``isError: true`` and the error's text, as it does for any exception a tool raises.
    """
    from mcp.server.fastmcp.exceptions import ToolError
    from mcp.server.fastmcp.tools import Tool
    from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata

    async def run(ctx: Context[Any, Any, Any], **arguments: Any) -> str:
        # Called as a tool call, the tool answers a ToolMessage that says whether it
        # failed (status "error"), instead of a bare string.
        call = {"type": "tool_call", "name": tool.name, "args": arguments,
                "id": f"mcp-{uuid.uuid4()}"}
        message: ToolMessage = await tool.ainvoke(call, identity.config(ctx))
        if message.status == "error":
            # The SDK prefixes "Error executing tool <name>: "; no second "Error: ".
            raise ToolError(message.text.removeprefix("Error: "))
        return message.text

    model = _arguments_model(tool)
    return Tool(fn=run, name=tool.name, title=None, description=tool.description,
                parameters=tool.tool_call_schema.model_json_schema(),  # type: ignore[union-attr]
                fn_metadata=FuncMetadata(arg_model=model), is_async=True,
                context_kwarg="ctx", annotations=None)


def create_mcp_server(memory: MemoryLayer, *, user_id: str | None = None,
                      profile: str | None = None, host: str = "127.0.0.1",
                      port: int = 8000, name: str = "langmem-layer") -> FastMCP:
    """An MCP server (FastMCP) over ``memory``, for one user.

    Example:
        >>> server = create_mcp_server(memory, user_id="alice", profile="work")
        >>> await server.run_stdio_async()  # or run_streamable_http_async()

    Args:
        memory: The memory layer (its async API is used; an async store suits it).
        user_id: The user a connection acts for unless its API key names one (see
            ``bearer_auth``); default ``LANGMEM_USER_ID``. Without one, a request
            with no verified key fails with ``MissingUserError``.
        profile: The default profile; default ``LANGMEM_PROFILE``, else the settings'
            default profile. An HTTP connection may choose another with the
            ``X-Langmem-Profile`` header or a ``profile`` query parameter.
        host: Interface for streamable HTTP (loopback by default).
        port: Port for streamable HTTP.
        name: The server's name as clients show it.

    Raises:
        ConfigurationError: The ``mcp`` extra is not installed, or the profile is not
            one of the configured profiles.
        MissingUserError: No user id was configured.
    """
    _require_mcp()
    from mcp.server.fastmcp import FastMCP

    identity = _Identity(memory, user_id or os.environ.get("LANGMEM_USER_ID"),
                         profile or os.environ.get("LANGMEM_PROFILE"))
    tools = [_mcp_tool(tool, identity) for tool in create_memory_tools(memory)]
    server: FastMCP = FastMCP(name, instructions=INSTRUCTIONS, tools=tools, host=host,
                              port=port, log_level="WARNING")

    async def block(query: str | None) -> str:
        conf: Mapping[str, Any] = identity.config(server.get_context())["configurable"]
        built = await memory.acontext_block(conf["user_id"], query, profile=conf["profile"])
        return built.text or ("(nothing to show: no pinned memory or open plan yet; read "
                                f"{BLOCK_URI}/<query> for what is recalled for a query)")

    @server.resource(BLOCK_URI, name="memory-block", mime_type="text/markdown",
                     description="The user's memory block: what an agent should know "
                     "about them in this profile (read-only).")
    async def memory_block() -> str:
        return await block(None)

    @server.resource(BLOCK_URI + "/{query}", name="memory-block-for",
                     mime_type="text/markdown",
                     description="The memory block recalled for a query (read-only).")
    async def memory_block_for(query: str) -> str:
        return await block(query)

    return server


async def serve(transport: Literal["stdio", "http"] = "stdio", *,
                database_url: str | None = None, data_dir: str | None = None,
                user_id: str | None = None, profile: str | None = None,
                host: str = "127.0.0.1", port: int = 8000, embeddings: bool = True) -> None:
    """Open the memory database and serve MCP until the client or a signal stops it.

    Args:
        transport: ``"stdio"`` (the client starts the server) or ``"http"`` (streamable
            HTTP at ``http://HOST:PORT/mcp``).
        database_url: PostgreSQL URL; default ``LANGMEM_DATABASE_URL``, else the embedded
            server in ``data_dir``.
        data_dir: The embedded server's directory.
        user_id: As for ``create_mcp_server``. Over HTTP without one, every
            request needs an API key (``Authorization: Bearer <key>``).
        profile: As for ``create_mcp_server``.
        host: As for ``create_mcp_server``.
        port: As for ``create_mcp_server``.
        embeddings: False to load no embedding model (lexical recall only; what is
            written meanwhile has no vectors: an export and import re-embeds it).

    Raises:
        ConfigurationError: The ``mcp`` extra is missing, the profile is unknown, or
            ``host`` is not loopback for HTTP with a configured user (its clients
            would act as that user without credentials).
        MissingUserError: No user id was configured for stdio.
    """
    _require_mcp()
    from langmem_layer.environment import database_url as resolve_url
    from langmem_layer.environment import settings_from_env
    from langmem_layer.facade import MemoryLayer
    from langmem_layer.store.aio import AsyncPostgresMemoryStore

    # A wrong user, profile or host fails before the database is opened.
    user_id = user_id or os.environ.get("LANGMEM_USER_ID")
    if user_id or transport == "stdio":
        user_id = require_user(user_id)
    if transport == "http" and user_id and host not in LOOPBACK:
        raise ConfigurationError(
            f"--host {host}: with --user every client that reaches the server acts as "
            f"{user_id!r} without credentials; serve on loopback (127.0.0.1, the default), "
            "or leave --user out so that each client sends an API key "
            "('Authorization: Bearer <key>', from `langmem-layer keys create USER`).")
    settings = settings_from_env()
    _profile_name(settings, profile or os.environ.get("LANGMEM_PROFILE"),
                  "the server's configuration")
    url = resolve_url(database_url, data_dir=data_dir)
    async with AsyncPostgresMemoryStore.from_conn_string(
            url, index="default" if embeddings else None) as store:
        await store.setup()
        # The tools write through the gate directly; no turn is queued for extraction,
        # so the layer's worker never starts here.
        memory = MemoryLayer(store, settings=settings)
        server = create_mcp_server(memory, user_id=user_id, profile=profile, host=host,
                                   port=port)
        try:
            if transport == "stdio":
                await server.run_stdio_async()
            else:
                await _serve_http(server, memory.store, keys_only=user_id is None)
        finally:
            await memory.aclose()


def bearer_auth(app: Any, store: Any, *, required: bool) -> Any:
    """The ASGI ``app`` behind API-key authentication (``langmem_layer.server.keys``).

    A request with ``Authorization: Bearer <key>`` acts as the key's user (left in the
    scope under ``KEY_USER``); an unknown or revoked key gets 401. Without the
    header, the request gets 401 when ``required``, else acts as the server's user.
    """
    from starlette.responses import JSONResponse

    from langmem_layer.server.keys import averify_key

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
            principal = None
            if scheme.lower() == "bearer" and token.strip():
                principal = await averify_key(store, token.strip())
            if principal is None and (required or scheme):
                reply = JSONResponse(
                    {"error": "send 'Authorization: Bearer <key>' with a valid API key "
                              "(langmem-layer keys create USER)"}, status_code=401,
                    headers={"WWW-Authenticate": "Bearer"})
                await reply(scope, receive, send)
                return
            if principal is not None:
                scope = {**scope, KEY_USER: principal.user_id}
        await app(scope, receive, send)

    return guarded


async def _serve_http(server: FastMCP, store: Any, *, keys_only: bool) -> None:
    """Streamable HTTP until SIGINT or SIGTERM, then return (not die by the signal)."""
    import uvicorn

    class Server(uvicorn.Server):
        # uvicorn re-raises the signal that stopped it once it has shut down, which
        # would kill the process before the store closes and the embedded PostgreSQL
        # stops: forget it instead, so that serve() returns and cleanup runs.
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    self._captured_signals.clear()

    app = bearer_auth(server.streamable_http_app(), store, required=keys_only)
    config = uvicorn.Config(app, host=server.settings.host,
                            port=server.settings.port, log_level="warning")
    await Server(config).serve()
