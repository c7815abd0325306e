"""A batch's execution plan: handler generators stepped together, free of I/O.

Every operation is handled by a generator that first yields at most one
:class:`Embed` request, then :class:`Query` requests, and finally returns the
operation's result. A :class:`Plan` steps all generators of a batch together so that
all texts of the batch are embedded in as few calls as possible, outside the database
transaction, and then runs the queries in order inside one transaction. The sync and
async stores only execute what the plan asks for.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langmem_layer.errors import EmbeddingDimensionError

__all__ = ["Embed", "Handler", "Plan", "Query", "Step"]


class Embed(NamedTuple):
    """Request: embed ``documents`` (with embed_documents) and ``queries`` (embed_query)."""

    documents: list[str]
    queries: list[str]


class Query(NamedTuple):
    """Request: run one SQL statement; the reply is its rows (list of dicts), or []."""

    sql: str
    params: Any


Handler = Generator[Embed | Query, Any, Any]


@dataclass
class Step:
    indices: list[int]
    gen: Handler
    multi: bool = False
    request: Embed | Query | None = None
    result: Any = None
    done: bool = False


@dataclass
class Plan:
    """Steps a batch's handlers: embeddings first, then queries in op order."""

    steps: list[Step]
    size: int
    dims: int | None
    model_id: str | None
    _cursor: int = 0
    _embed_slots: list[tuple[Step, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for step in self.steps:
            self._advance(step, None)

    def _advance(self, step: Step, reply: Any) -> None:
        try:
            step.request = step.gen.send(reply)
        except StopIteration as stop:
            step.request, step.result, step.done = None, stop.value, True

    def embedding_work(self) -> tuple[list[str], list[str]]:
        """All documents and queries the batch needs embedded."""
        docs: list[str] = []
        queries: list[str] = []
        for step in self.steps:
            if isinstance(step.request, Embed):
                docs.extend(step.request.documents)
                queries.extend(step.request.queries)
        return docs, queries

    def deliver_embeddings(
        self, doc_vectors: Sequence[Sequence[float]], query_vectors: Sequence[Sequence[float]]
    ) -> None:
        """Hand each handler its vectors, after checking their size."""
        for vec in [*doc_vectors, *query_vectors]:
            if self.dims is not None and len(vec) != self.dims:
                raise EmbeddingDimensionError(
                    f"The embedding model {self.model_id!r} returned {len(vec)}-dimensional "
                    f"vectors but the store is configured with dims={self.dims}. Pass "
                    f"index={{'dims': {len(vec)}, ...}} (or the model that makes "
                    f"{self.dims}-dimensional vectors). Nothing was written."
                )
        d = q = 0
        for step in self.steps:
            if isinstance(step.request, Embed):
                nd, nq = len(step.request.documents), len(step.request.queries)
                reply = (
                    [list(v) for v in doc_vectors[d : d + nd]],
                    [list(v) for v in query_vectors[q : q + nq]],
                )
                d, q = d + nd, q + nq
                self._advance(step, reply)

    def next_query(self) -> Query | None:
        """The next statement to run, or ``None`` when the batch is done."""
        while self._cursor < len(self.steps):
            step = self.steps[self._cursor]
            if isinstance(step.request, Query):
                return step.request
            if isinstance(step.request, Embed):
                raise RuntimeError("handler asked for embeddings after its first query")
            self._cursor += 1
        return None

    def deliver_rows(self, rows: list[dict[str, Any]]) -> None:
        """Reply to the statement returned by :meth:`next_query`."""
        self._advance(self.steps[self._cursor], rows)

    def results(self) -> list[Any]:
        """Results in the order of the batch's ops."""
        out: list[Any] = [None] * self.size
        for step in self.steps:
            if step.multi:
                for i, r in zip(step.indices, step.result, strict=True):
                    out[i] = r
            else:
                out[step.indices[0]] = step.result
        return out


