"""The memory store for ``langgraph.json``: ``"store": {"path": "./graphs/store.py:store"}``.

The server enters it once and leaves it at shutdown; it owns the store, the memory
layer and its extraction worker for the server's lifetime (see
``langmem_layer.server.served``). Nothing connects at import.
"""

from langmem_layer.server.served import langgraph_store as store

__all__ = ["store"]
