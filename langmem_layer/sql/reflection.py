"""SQL of the reflection jobs (consolidation, reflections): one user's memories with
their vectors, the synthesized records with their evidence, the evidence's state.

Every statement binds the user with an equality predicate on each per-user table.
Writes go through the store's ops (``PutOp``, ``LinkOp``, ``SetStatusOp``,
``ReinforceOp``), which embed, link and record history as every other write does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from langmem_layer.sql import Sql
from langmem_layer.sql.generic_items import VALUE
from langmem_layer.sql.moved import STATUS, moved
from langmem_layer.types import utc_iso

__all__ = ["evidence_state", "memories", "synthesized"]


#: The history reason of a memory the user asked to forget (control.FORGOTTEN).
FORGOTTEN = "forgotten at the user's request"

# The vector's binary form (pgvector's send function: a 4-byte header, then big-endian
# float4s), which numpy reads as is; a real[] or the text form is parsed a float at a
# time, which cost more than the rest of a user's run.
_VECTOR = """(SELECT vector_send(e.embedding) FROM langmem_embeddings e
              WHERE e.user_id = %(user_id)s AND e.prefix = i.prefix AND e.key = i.key
                AND e.model_id = %(model_id)s AND e.field = 'content') AS vector"""


def memories(user_id: str, model_id: str | None, *, layers: Sequence[str] | None = None,
             policies: Sequence[str] | None = None, exclude_kinds: Sequence[str] = (),
             since: datetime | None = None, synthesis: str | None = None,
             observed: bool = False) -> Sql:
    """``user_id``'s active memories (prefix, key, value, vector), oldest first; the
    vector in pgvector's binary form (``vector_send``), None without one.

    Args:
        user_id: The tenant.
        model_id: The embedding model whose vectors to read (None: no vectors).
        layers: Only these layers.
        policies: Only these surface policies.
        exclude_kinds: Leave out these kinds.
        since: Only memories that occurred at or after this time.
        synthesis: Only records a reflection job wrote with this ``metadata.synthesis``.
        observed: Only memories no reflection job wrote (what the user said or did).
    """
    vector = _VECTOR if model_id is not None else "NULL::bytea AS vector"
    return (
        f"""SELECT i.prefix, i.key, {VALUE} AS value, {vector}
        FROM langmem_items i
        WHERE i.user_id = %(user_id)s AND i.is_memory
          AND {STATUS} = 'active'
          AND (%(layers)s::text[] IS NULL OR i.value ->> 'layer' = ANY(%(layers)s::text[]))
          AND (%(policies)s::text[] IS NULL
               OR i.value ->> 'policy' = ANY(%(policies)s::text[]))
          AND NOT (i.value ->> 'kind' = ANY(%(exclude)s::text[]))
          AND (%(since)s::text IS NULL OR i.value ->> 'occurred_at' >= %(since)s::text)
          AND (%(synthesis)s::text IS NULL
               OR {moved('metadata')} ->> 'synthesis' = %(synthesis)s::text)
          AND NOT (%(observed)s AND {moved('metadata')} ? 'synthesis')
        ORDER BY i.value ->> 'occurred_at', i.key""",
        {"user_id": user_id, "model_id": model_id,
         "layers": list(layers) if layers is not None else None,
         "policies": list(policies) if policies is not None else None,
         "exclude": list(exclude_kinds), "since": utc_iso(since) if since else None,
         "synthesis": synthesis, "observed": observed},
    )


def synthesized(user_id: str, model_id: str | None, synthesis: str) -> Sql:
    """The active records written by the ``synthesis`` job, with their vectors."""
    return memories(user_id, model_id, synthesis=synthesis)


def evidence_state(user_id: str, pairs: Sequence[tuple[str, str]]) -> Sql:
    """The state of each (record, evidence key) pair: the evidence's status, policy,
    content, whether the user asked to forget it, and whether it still exists.

    A row per pair, in one statement for all of a user's synthesized records.
    """
    return (
        f"""SELECT p.src AS record, p.dst AS key, i.key IS NOT NULL AS exists,
                  {STATUS} AS status, i.value ->> 'policy' AS policy,
                  {VALUE} AS value,
                  coalesce(EXISTS (
                      SELECT 1 FROM jsonb_array_elements(
                          coalesce({moved('history')}, '[]'::jsonb)) h
                      WHERE h ->> 'reason' = %(forgotten)s), false) AS forgotten
        FROM unnest(%(src)s::text[], %(dst)s::text[]) AS p(src, dst)
        LEFT JOIN langmem_items i
               ON i.user_id = %(user_id)s AND i.key = p.dst AND i.is_memory""",
        {"user_id": user_id, "src": [s for s, _ in pairs], "dst": [d for _, d in pairs],
         "forgotten": FORGOTTEN},
    )
