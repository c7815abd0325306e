"""The HTTP app: the memory REST API with API-key authentication, and the
agent routes. Needs the ``server`` extra (FastAPI, uvicorn); nothing here is imported by
``import langmem_layer``.

- ``langmem_layer.server.http.app``: ``create_app`` and a
  module-level ``app`` for ``uvicorn langmem_layer.server.http.app:app``;
- ``langmem_layer.server.http.security``: who a request acts as (``current_principal``);
- ``langmem_layer.server.http.routes``: the ``/v1`` memory routes;
- ``langmem_layer.server.http.schemas``: their request and response models;
- ``langmem_layer.server.http.problems``: errors as RFC 9457 problem documents;
- ``langmem_layer.server.http.agent_route``: the memory agent through LangServe;
- ``langmem_layer.server.http.lifespan``: the server's lifetime (store, layer,
  extraction worker);
- ``langmem_layer.server.http.serve``: uvicorn with a clean exit on SIGTERM;
- ``langmem_layer.server.http.panel``: the memory panel page at ``/panel`` (static files in
  ``static/``, plain JavaScript over the ``/v1`` routes).
"""
