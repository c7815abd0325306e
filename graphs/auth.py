"""Request authentication for ``langgraph.json``: ``"auth": {"path": "./graphs/auth.py:auth"}``.

The bearer key names the user; runs, threads and the store API are confined to it
(see ``langmem_layer.server.langgraph_auth``).
"""

from langmem_layer.server.langgraph_auth import build_auth

auth = build_auth()
