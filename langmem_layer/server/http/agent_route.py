"""The memory agent served through LangServe: ``/agent/invoke``, ``/batch``, ``/stream``...

``add_agent_routes`` registers the compiled agent graph with ``langserve.add_routes``,
so LangServe's own client (``RemoteRunnable``) and playground work against it. The
thread comes from the request's config (``configurable.thread_id``); the user never
does: it is the authenticated principal's, set by the server on every run. A config
naming another user is refused with 403 before anything runs, unless the principal is
an admin, who may act for any user.
"""

# No ``from __future__ import annotations``: FastAPI reads the dependency's annotation
# at runtime, and it names a local variable (the app's principal dependency).
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Annotated, Any, Protocol

from fastapi import Depends, FastAPI, HTTPException, Request
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langgraph.warnings import LangGraphDeprecatedSinceV10
from pydantic import BaseModel

__all__ = ["Principal", "add_agent_routes", "principal_of"]

# Where the authenticated principal waits for the config modifier: request.state lives
# in the ASGI scope, which the dependency's and LangServe's Request objects share.
_STATE_KEY = "langmem_principal"


class Principal(Protocol):
    """Who is calling: what the app's authentication dependency returns."""

    @property
    def user_id(self) -> str:
        """The user whose memory the caller owns."""
        ...

    @property
    def admin(self) -> bool:
        """Whether the caller may act on other users' memory."""
        ...


def principal_of(request: Request) -> Principal:
    """The principal authenticated for ``request`` by ``add_agent_routes``' dependency.

    Raises:
        HTTPException: 401 when no principal was authenticated for the request.
    """
    principal = getattr(request.state, _STATE_KEY, None)
    if principal is None:
        raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
    return principal


def _run_as(config: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """``config`` with ``configurable.user_id`` set to the user the run acts for."""
    configurable = dict(config.get("configurable") or {})
    asked = configurable.get("user_id")
    if asked in (None, ""):
        configurable["user_id"] = principal.user_id
    elif str(asked) != principal.user_id and not principal.admin:
        # Refused, not overridden: a client naming another user has a bug or an intent,
        # and silently running as the caller would hide either.
        raise HTTPException(
            403, "configurable.user_id names another user; omit it (the server sets it "
                 "from your credentials) or use an admin key to act for another user")
    else:
        configurable["user_id"] = str(asked)
    return {**config, "configurable": configurable}


def _unaggregated(config: RunnableConfig | None) -> RunnableConfig | None:
    """``config`` without LangServe's event aggregators among its callbacks."""
    from langserve.callbacks import AsyncEventAggregatorCallback

    callbacks = (config or {}).get("callbacks")
    if config is None or not isinstance(callbacks, list) or not any(
            isinstance(c, AsyncEventAggregatorCallback) for c in callbacks):
        return config
    kept = [c for c in callbacks if not isinstance(c, AsyncEventAggregatorCallback)]
    rest = config.copy()
    del rest["callbacks"]
    if kept:
        rest["callbacks"] = kept
    return rest


class _Served(RunnableBinding[Any, Any]):
    """The agent as its routes run it: without LangServe's event aggregator.

    LangServe's invoke, batch and stream handlers add a callback to every run that
    collects its events, and answer with them only for routes added with
    ``include_callback_events=True``, which these never are. Unused, it still made
    LangChain build and dispatch an event at each node's and the model's start and
    end, a few tasks more per turn; without it a served run does what the same run
    in process does (tracing a user configured, LangSmith's included, is untouched).
    """

    def config_schema(self, *, include: Sequence[str] | None = None) -> type[BaseModel]:
        # The graph's own (its context schema's keys), which LangServe validates each
        # request's ``configurable`` against; a binding would derive it from config specs.
        # LangGraph deprecates ``config_schema`` for ``context_schema``, which the graph
        # declares already; LangServe only knows the former.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=LangGraphDeprecatedSinceV10)
            return self.bound.config_schema(include=include)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> Any:
        return await super().ainvoke(input, _unaggregated(config), **kwargs)

    async def abatch(self, inputs: list[Any],
                     config: RunnableConfig | list[RunnableConfig] | None = None, *,
                     return_exceptions: bool = False, **kwargs: Any) -> list[Any]:
        configs = ([_unaggregated(c) or {} for c in config] if isinstance(config, list)
                   else _unaggregated(config))
        return await super().abatch(inputs, configs, return_exceptions=return_exceptions,
                                    **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> AsyncIterator[Any]:
        async for chunk in super().astream(input, _unaggregated(config), **kwargs):
            yield chunk


def add_agent_routes(app: FastAPI, graph: Runnable, *,
                     principal_dependency: Callable[..., Any], path: str = "/agent",
                     playground: bool = True) -> None:
    """Serve ``graph`` (the compiled memory agent) with LangServe under ``path``.

    Every route (invoke, batch, stream, stream_log, stream_events, the schemas, the
    playground) requires ``principal_dependency``; the runs' ``configurable.user_id``
    is its user, and a request naming another user is refused (403) unless the
    principal is an admin.

    Args:
        app: The FastAPI app.
        graph: The compiled agent graph (see
            ``langmem_layer.facade.agent_graph.build_agent_graph``).
        principal_dependency: A FastAPI dependency (sync or async; it may take the
            ``Request`` and other dependencies) that returns the caller, an object with
            ``user_id`` and ``admin`` (``Principal``), or raises ``HTTPException``
            (401) when the request carries no valid credentials.
        path: Where the routes go.
        playground: Serve LangServe's playground page at ``{path}/playground/``.
    """

    async def authenticate(request: Request,
                           principal: Annotated[Any, Depends(principal_dependency)]) -> None:
        if principal is None:
            raise HTTPException(401, "Not authenticated",
                                headers={"WWW-Authenticate": "Bearer"})
        setattr(request.state, _STATE_KEY, principal)

    def run_as_caller(config: dict[str, Any], request: Request) -> dict[str, Any]:
        return _run_as(config, principal_of(request))

    from langserve import add_routes

    add_routes(
        app, _Served(bound=graph), path=path, config_keys=("configurable",),
        per_req_config_modifier=run_as_caller,
        dependencies=[Depends(authenticate)],
        disabled_endpoints=None if playground else ["playground"],
    )
