"""A small app for the HTTP tests and the bench: the memory agent's routes and lifespan.

``uvicorn tests.langserve_app:app`` serves it on ``LANGMEM_DATABASE_URL`` with the test
embedder, the rule extractor and the offline chat model. Authentication is a stand-in
(the caller named in ``X-Test-User``, an admin with ``X-Test-Admin: 1``); the real app
wires the library's API keys instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, HTTPException, Request

from langmem_layer.agent import build_agent_graph
from langmem_layer.http.lifespan import agent_lifespan
from langmem_layer.layer import MemoryLayer
from langmem_layer.offline import OfflineChatModel
from langmem_layer.write.rules import RuleExtractor
from tests.fakes import BagOfWordsEmbeddings


@dataclass(frozen=True)
class TestPrincipal:
    user_id: str
    admin: bool = False


def header_principal(request: Request) -> TestPrincipal:
    """The caller named in ``X-Test-User``; 401 without it."""
    user = request.headers.get("x-test-user")
    if not user:
        raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})
    return TestPrincipal(user, admin=request.headers.get("x-test-admin") == "1")


def offline_agent(layer: MemoryLayer) -> Any:
    return build_agent_graph(layer, model=OfflineChatModel())


def make_app(database_url: str | None = None, **options: Any) -> FastAPI:
    """The test app on ``database_url`` (default ``LANGMEM_DATABASE_URL``)."""
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    options.setdefault("store_options", {"index": index})
    options.setdefault("layer_options", {"extractor": RuleExtractor()})
    options.setdefault("graph_factory", offline_agent)
    return FastAPI(lifespan=agent_lifespan(
        header_principal, database_url=database_url or os.environ["LANGMEM_DATABASE_URL"],
        **options))


def __getattr__(name: str) -> Any:
    # ``uvicorn tests.langserve_app:app``: built on first access, from the environment.
    if name == "app":
        return make_app()
    raise AttributeError(name)
