"""The memory panel (a user's privacy and control over their memory): one static page at
``/panel`` where a person views, searches, corrects, deletes, pins and exports their own
memory through the ``/v1`` REST API, in plain JavaScript with no build step.

The page holds no data and no secrets: it asks for an API key (kept in the tab's
``sessionStorage``) and sends it as a bearer token; in the app's loopback dev mode it
works without one. Its files ship as package data under ``langmem_layer/server/http/static``.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response

__all__ = ["ASSETS", "router"]

#: The panel's files and their media types; nothing else is served from the directory.
ASSETS = {
    "panel.html": "text/html; charset=utf-8",
    "panel.css": "text/css; charset=utf-8",
    "panel.js": "text/javascript; charset=utf-8",
}

# Everything the page loads comes from this app; no inline script can run, and the page
# cannot be framed by another site (the key is typed into it).
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


def _asset(name: str) -> Response:
    media_type = ASSETS.get(name)
    if media_type is None:
        raise HTTPException(404, "No such panel file.")
    body = resources.files("langmem_layer.server.http").joinpath("static", name).read_bytes()
    return Response(body, media_type=media_type, headers=_HEADERS)


@router.get("/panel")
async def panel() -> Response:
    """The memory panel page."""
    return _asset("panel.html")


@router.get("/panel/{name}")
async def panel_asset(name: str) -> Response:
    """The panel's stylesheet and script."""
    return _asset(name)
