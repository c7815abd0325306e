"""The HTTP app as the tests and the bench serve it: :func:`create_app` with test parts.

``uvicorn tests.langserve_app:app`` serves it on ``LANGMEM_DATABASE_URL`` with the test
embedder, the rule extractor and the offline chat model. Besides the library's API keys,
a caller may name itself in ``X-Test-User`` (an admin with ``X-Test-Admin: 1``),
through the app's ``authenticate`` hook.
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI, Request

from langmem_layer.extract.rules import RuleExtractor
from langmem_layer.facade import MemoryLayer
from langmem_layer.facade.agent_graph import build_agent_graph
from langmem_layer.offline_chat import OfflineChatModel
from langmem_layer.server.http.app import create_app
from langmem_layer.server.keys import Principal
from tests.fakes import BagOfWordsEmbeddings


def header_principal(request: Request) -> Principal | None:
    """The caller named in ``X-Test-User``; None (then 401) without it."""
    user = request.headers.get("x-test-user")
    if not user:
        return None
    return Principal(user, admin=request.headers.get("x-test-admin") == "1")


def offline_agent(layer: MemoryLayer) -> Any:
    return build_agent_graph(layer, model=OfflineChatModel())


def make_app(database_url: str | None = None, **options: Any) -> FastAPI:
    """The test app on ``database_url`` (default ``LANGMEM_DATABASE_URL``)."""
    index = {"embed": BagOfWordsEmbeddings(dims=64), "dims": 64, "model_id": "bow-64"}
    options.setdefault("store_options", {"index": index})
    options.setdefault("layer_options", {"extractor": RuleExtractor()})
    options.setdefault("graph_factory", offline_agent)
    options.setdefault("pool_size", 4)
    return create_app(database_url=database_url or os.environ["LANGMEM_DATABASE_URL"],
                      authenticate=header_principal, **options)


def __getattr__(name: str) -> Any:
    # ``uvicorn tests.langserve_app:app``: built on first access, from the environment.
    if name == "app":
        return make_app()
    raise AttributeError(name)
