"""``LinkManyOp``: many links of one user in one statement (the reflection jobs' writes)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import psycopg

from langmem_layer.jobs.evidence import parse_vector
from langmem_layer.store import ops as mops
from langmem_layer.store.aio import AsyncPostgresMemoryStore
from langmem_layer.store.sync import PostgresMemoryStore

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def _links(found: list[mops.Link]) -> set[tuple[str, str, str]]:
    return {(li.src_key, li.link_type, li.dst_key) for li in found}


def test_many_links_in_one_op_repeats_are_no_ops(store: PostgresMemoryStore) -> None:
    triples = (("r", "derived_from", "a"), ("r", "derived_from", "b"),
               ("r", "derived_from", "a"), ("s", "elaborates", "b"))
    store.batch([mops.LinkManyOp("u1", triples, NOW)])
    store.batch([mops.LinkManyOp("u1", triples[:2], NOW), mops.LinkManyOp("u1", ())])
    (found,) = store.batch([mops.LinksOp("u1", ("r", "s"))])
    assert len(found) == 3
    assert _links(found) == set(triples)
    assert {li.created_at for li in found} == {NOW}
    # Another user's links are their own.
    assert store.batch([mops.LinksOp("u2", ("r", "s"))])[0] == []


async def test_many_links_async(astore: AsyncPostgresMemoryStore) -> None:
    await astore.abatch([mops.LinkManyOp("u1", (("r", "derived_from", "a"),), NOW)])
    (found,) = await astore.abatch([mops.LinksOp("u1", ("r",))])
    assert _links(found) == {("r", "derived_from", "a")}


def test_vectors_read_in_binary_form(pg_uri: str, store: PostgresMemoryStore) -> None:
    with psycopg.connect(pg_uri) as conn:
        raw, text = conn.execute(
            "SELECT vector_send(v), v::text FROM (SELECT '[0.5,-1.25,3e-05]'::vector AS v) t"
        ).fetchone()  # type: ignore[misc]
    vec = parse_vector(raw)
    assert vec.dtype.name == "float32"
    assert vec.tolist() == np.asarray(text.strip("[]").split(","), dtype=np.float32).tolist()
    assert parse_vector(None) is None
