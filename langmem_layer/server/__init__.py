"""Serving memory: API keys, the HTTP app (REST, panel, LangServe), the LangGraph
server's auth handler and lifetime, and the MCP server. Needs the ``server`` or ``mcp``
extra; nothing here is imported by ``import langmem_layer``."""
