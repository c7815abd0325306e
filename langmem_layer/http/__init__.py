"""The HTTP surface: the memory agent over LangServe and the server's lifetime.

Needs the ``server`` extra (FastAPI, uvicorn, ``langserve[server]``); nothing here is
imported by ``langmem_layer`` itself.
"""
