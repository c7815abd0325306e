"""The memory REST API inside the LangGraph server: ``"http": {"app": "./graphs/http.py:app"}``.

``langgraph dev`` and a deployed server serve its routes (``/v1/...``) beside the
graphs, on the store the server opened for its lifetime (``"store"`` in
``langgraph.json``, see ``langmem_layer.server.served.memory_app``). Every ``/v1`` route
authenticates with the app's own dependency, on the same API keys (the same table, the
same ``averify_key``) as the server's ``auth`` handler. Nothing connects at import.
"""

from langmem_layer.server.served import memory_app

app = memory_app()

__all__ = ["app"]
