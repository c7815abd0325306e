"""The memory REST API under ``/v1``: thin adapters over
``MemoryLayer``'s async methods, always for the authenticated
principal's user (``current_principal``).

Another user's memory id answers exactly as an id that does not exist (404): every
call is scoped to the principal's user, so the library never finds it.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from langmem_layer.errors import InvalidContentError
from langmem_layer.facade import MemoryLayer
from langmem_layer.server.http.problems import PROBLEM_JSON
from langmem_layer.server.http.schemas import (
    Admission,
    CorrectRequest,
    Decision,
    DeleteResult,
    ExportDocument,
    ImportResult,
    JobState,
    Me,
    Memory,
    MemoryPage,
    NewMemory,
    Problem,
    Provenance,
    SurfaceRequest,
)
from langmem_layer.server.http.security import current_principal
from langmem_layer.server.http.state import layer_of, state_of
from langmem_layer.server.keys import Principal
from langmem_layer.types import HistoryEntry, Kind, Layer, Status

__all__ = ["router"]


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {s: {"model": Problem, "content": {PROBLEM_JSON: {}},
                "description": "A problem document (RFC 9457)."} for s in statuses}


#: Answers any route may give: no or bad credentials, another user without admin,
#: bad input, a body over the limit, the database unavailable.
_COMMON = (400, 401, 403, 413, 422, 503)
router = APIRouter(prefix="/v1", responses=_problems(*_COMMON))

Caller = Annotated[Principal, Depends(current_principal)]
Layer_ = Annotated[MemoryLayer, Depends(layer_of)]
MemoryId = Annotated[str, "the memory's id"]
_ONE = _problems(404, 409)


@router.get("/me", response_model=Me, tags=["account"])
async def me(principal: Caller) -> Me:
    """Who the request acts as."""
    return Me(user_id=principal.user_id, admin=principal.admin)


@router.get("/memories", response_model=MemoryPage, tags=["memories"])
async def list_memories(
    principal: Caller, layer: Layer_,
    q: Annotated[str | None, Query(max_length=2000, description=(
        "Only the memories that match this text, best first: a word in common, or a "
        "similarity that reaches the relevance floor recall uses."))] = None,
    profile: Annotated[str | None, Query(min_length=1, max_length=200,
                                         description="Only this scope.")] = None,
    kind: Annotated[list[Kind] | None, Query(description="Only these kinds.")] = None,
    layer_: Annotated[list[Layer] | None, Query(alias="layer",
                                                description="Only these layers.")] = None,
    status: Annotated[list[Status] | None, Query(description="Only these statuses "
                                                 "(default: every status).")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> MemoryPage:
    """List and search the user's memories, one page at a time.

    Without ``q``: every memory, newest change first. With ``q``: only those that match
    it (a word in common, or a similarity that reaches recall's relevance floor), best
    first; each one's ``similarity`` is its similarity to ``q`` (null without a vector).
    """
    found = await layer.admin.abrowse(
        principal.user_id, query=q, profile=profile, kinds=kind, layers=layer_,
        statuses=status, limit=limit + 1, offset=offset)
    return MemoryPage(items=[Memory.of(r) for r in found[:limit]], limit=limit, offset=offset,
                      next_offset=offset + limit if len(found) > limit else None)


@router.post("/memories", response_model=Memory, status_code=201, tags=["memories"])
async def create_memory(body: NewMemory, principal: Caller, layer: Layer_) -> Memory:
    """Write a memory directly (no extraction, no gate)."""
    return Memory.of(await layer.aremember(
        principal.user_id, body.content, kind=body.kind, layer=body.layer, policy=body.policy,
        pinned=body.pinned, profile=body.profile, confidence=body.confidence,
        salience=body.salience, due_at=body.due_at))


@router.get("/memories/{memory_id}", response_model=Memory, responses=_ONE,
            tags=["memories"])
async def get_memory(memory_id: MemoryId, principal: Caller, layer: Layer_) -> Memory:
    """One memory, whatever its status."""
    return Memory.of(await layer.aget(principal.user_id, memory_id))


@router.post("/memories/{memory_id}/correct", response_model=Memory, responses=_ONE,
             tags=["memories"])
async def correct_memory(memory_id: MemoryId, body: CorrectRequest, principal: Caller,
                         layer: Layer_) -> Memory:
    """Correct a memory's text: re-embedded at once, the previous text kept in history."""
    return Memory.of(await layer.acorrect(principal.user_id, memory_id, body.content))


@router.patch("/memories/{memory_id}", response_model=Memory, responses=_ONE,
              tags=["memories"])
async def update_memory(memory_id: MemoryId, body: SurfaceRequest, principal: Caller,
                        layer: Layer_) -> Memory:
    """Pin or unpin a memory and/or change how it may surface in replies."""
    return Memory.of(await layer.admin.aset_surface(principal.user_id, memory_id,
                                              pinned=body.pinned, policy=body.policy))


@router.post("/memories/{memory_id}/pin", response_model=Memory, responses=_ONE,
             tags=["memories"])
async def pin_memory(memory_id: MemoryId, principal: Caller, layer: Layer_) -> Memory:
    """Pin a memory: always recalled first."""
    return Memory.of(await layer.admin.aset_surface(principal.user_id, memory_id, pinned=True))


@router.post("/memories/{memory_id}/unpin", response_model=Memory, responses=_ONE,
             tags=["memories"])
async def unpin_memory(memory_id: MemoryId, principal: Caller, layer: Layer_) -> Memory:
    """Unpin a memory."""
    return Memory.of(await layer.admin.aset_surface(principal.user_id, memory_id, pinned=False))


@router.delete("/memories/{memory_id}", response_model=DeleteResult, responses=_ONE,
               tags=["memories"])
async def delete_memory(
    memory_id: MemoryId, principal: Caller, layer: Layer_,
    hard: Annotated[bool, Query(description="Erase it with its vectors, links and cache "
                                "rows in one transaction (default: archive it).")] = False,
) -> DeleteResult:
    """Delete a memory: archived by default, erased with ``hard=true``."""
    await layer.aforget(principal.user_id, memory_id, hard=hard)
    return DeleteResult(id=memory_id, hard=hard)


@router.get("/memories/{memory_id}/history", response_model=list[HistoryEntry],
            responses=_ONE, tags=["memories"])
async def memory_history(memory_id: MemoryId, principal: Caller,
                         layer: Layer_) -> list[HistoryEntry]:
    """Every change in a memory's life, oldest first."""
    return await layer.admin.ahistory(principal.user_id, memory_id)


#: How far back in the memory's thread the decision log is searched for its admission.
_WHY_LOG_ENTRIES = 200


@router.get("/memories/{memory_id}/why", response_model=Provenance, responses=_ONE,
            tags=["memories"])
async def memory_why(memory_id: MemoryId, principal: Caller, layer: Layer_) -> Provenance:
    """Why a memory exists: its source text, the gate decisions that admitted or changed
    it, and its history."""
    found = await layer.aget(principal.user_id, memory_id)
    history = await layer.admin.ahistory(principal.user_id, memory_id)
    source = found.record.source
    # The log keeps decisions by text and target id, not by the memory's id: a decision
    # is this memory's when it targeted it, or proposed a text it had (before a correction).
    texts = {found.record.content} | {h.old for h in history
                                      if h.event == "content" and h.old}
    entries = await layer.admin.adecisions(principal.user_id, thread_id=source.thread_id,
                                     limit=_WHY_LOG_ENTRIES)
    admissions = [
        Admission(log_id=e.id, at=e.at, thread_id=e.thread_id, op=d.get("op"),
                  proposed=d.get("proposed"), content=d.get("content"),
                  accepted=bool(d.get("accepted")), reason=str(d.get("reason") or ""),
                  confidence=d.get("confidence"))
        for e in entries for d in e.decisions
        if d.get("target_id") == memory_id or d.get("content") in texts]
    return Provenance(memory=Memory.of(found), source=source, decisions=admissions,
                      history=history)


@router.get("/decisions", response_model=list[Decision], tags=["memories"])
async def decisions(
    principal: Caller, layer: Layer_,
    thread_id: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
) -> list[Decision]:
    """The decision log: why things were or were not remembered, newest turn first."""
    found = await layer.admin.adecisions(principal.user_id, thread_id=thread_id, limit=limit)
    return [Decision.of(e) for e in found]


def _filename(user_id: str) -> str:
    return "langmem-export-" + (re.sub(r"[^A-Za-z0-9_-]", "_", user_id)[:64] or "user") + ".json"


@router.get("/export", response_model=ExportDocument, tags=["transfer"],
            responses={200: {"description": "A JSON download (Content-Disposition: "
                             "attachment)."}})
async def export(principal: Caller, layer: Layer_) -> JSONResponse:
    """Everything stored for the user, as a JSON file that ``/v1/import`` takes back."""
    data = await layer.aexport(principal.user_id)
    return JSONResponse(data, headers={
        "Content-Disposition": f'attachment; filename="{_filename(principal.user_id)}"'})


_IMPORT_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": ExportDocument.model_json_schema()},
        "multipart/form-data": {"schema": {
            "type": "object", "required": ["file"],
            "properties": {"file": {"type": "string", "format": "binary",
                                    "description": "A file from /v1/export."}}}},
    },
}


async def _upload(request: Request) -> bytes:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=10)
        except HTTPException:
            raise
        except Exception as e:  # a malformed multipart body
            raise HTTPException(400, f"Malformed multipart body: {e}") from e
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise HTTPException(422, "The multipart upload has no 'file' field: send the "
                                "export as file=@export.json.")
        return await upload.read()
    if content_type == "application/json" or content_type.endswith("+json"):
        return await request.body()
    raise HTTPException(415, "Send the export as application/json or as a multipart "
                        "upload (field 'file').")


@router.post("/import", response_model=ImportResult, tags=["transfer"],
             openapi_extra={"requestBody": _IMPORT_BODY}, responses=_problems(415))
async def import_(request: Request, principal: Caller, layer: Layer_) -> ImportResult:
    """Load an export into the user (re-embedded). A malformed file is refused with the
    reason, and nothing is written."""
    raw = await _upload(request)
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidContentError(f"The file is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise InvalidContentError("The file is not a langmem_layer export (expected a JSON "
                                  "object from /v1/export).")
    try:
        count = await layer.aimport_(principal.user_id, data)
    except (KeyError, TypeError, AttributeError) as e:
        raise InvalidContentError(f"The file is not a valid langmem_layer export: "
                                  f"{type(e).__name__}: {e}") from e
    return ImportResult(imported=count)


@router.get("/jobs", response_model=list[JobState], tags=["operations"])
async def jobs(request: Request, principal: Caller) -> list[JobState]:
    """The maintenance jobs' latest runs and when each is next due (admins only)."""
    if not principal.admin:
        raise HTTPException(403, "Job status is for admin keys only.")
    state = state_of(request)
    found = await asyncio.to_thread(_job_status, state.store, state.database_url,
                                    state.settings)
    return [JobState.of(st) for st in found]


def _job_status(store: Any, url: str | None, settings: Any) -> list[Any]:
    """The job runner's status, read through a sync store (the runner is sync)."""
    from langmem_layer.jobs import JobContext
    from langmem_layer.jobs.status import status
    from langmem_layer.store.sync import PostgresMemoryStore

    if isinstance(store, PostgresMemoryStore):
        return status(JobContext(store, settings=settings))
    # A server's served store (langmem_layer.server.served.ServedStore) knows its database.
    url = url or getattr(store, "database_url", None)
    if url is None:
        raise HTTPException(503, "Job status needs a PostgresMemoryStore, or an app that "
                            "opened its own store (create_app without store=).")
    # The app serves an async store; this rare admin read borrows one connection of its
    # own for its duration rather than keeping a second pool open for the app's life.
    with PostgresMemoryStore.from_conn_string(url, index=None) as sync_store:
        return status(JobContext(sync_store, settings=settings))
