"""What the app's requests share: the store, the layer and the auth configuration.

Kept on ``app.state.langmem`` so that every route and dependency (the agent routes'
too) reads the one instance the lifespan opened.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request

from langmem_layer.facade import MemoryLayer
from langmem_layer.server.keys import Principal
from langmem_layer.settings import MemorySettings

__all__ = ["Authenticate", "ServerState", "layer_of", "state_of"]

#: The caller's own verification (JWT, OIDC ...): the principal of a request, or None
#: when it carries no credentials this hook knows; may be a coroutine function.
Authenticate = Callable[[Request], "Principal | Awaitable[Principal | None] | None"]


@dataclass
class ServerState:
    """The app's shared state.

    Attributes:
        settings: The layer's settings.
        authenticate: The caller's verification hook, tried after API keys.
        dev_user: Loopback-only single-user mode: the user of key-less requests.
        store: The memory store (set when the app starts).
        layer: The layer over it (set when the app starts).
        database_url: The URL the app opened its store on (None when a store was given).
    """

    settings: MemorySettings
    authenticate: Authenticate | None = None
    dev_user: str | None = None
    store: Any = None
    layer: MemoryLayer | None = None
    database_url: str | None = None


def state_of(request: Request) -> ServerState:
    """The app's ``ServerState``."""
    state: ServerState = request.app.state.langmem
    return state


def layer_of(request: Request) -> MemoryLayer:
    """The app's layer; 503 while the app has not started (or has stopped)."""
    layer = state_of(request).layer
    if layer is None:
        raise HTTPException(503, "The memory store is not open: the app is starting or "
                            "stopping; retry shortly.")
    return layer
