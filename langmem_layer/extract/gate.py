"""The write gate: decide which proposed memory operations are applied.

Extractors propose loosely; the gate is the one place that says no. It is pure: the
caller fetches each operation's nearest existing memories (``neighbors``) and the gate
only decides, so it is cheap to test and identical for every extractor.

Rules, every threshold from ``GateSettings``:

* ``add`` and ``update`` (they carry content) are rejected when their content breaks
  the content rule (``content_problem``: empty, shorter than ``min_content_chars``
  or longer than ``max_content_chars`` once stripped, or holding a NUL character;
  rejected, not raised, so one bad operation never loses the others), when ``salience``
  is below ``min_salience``, or when an ephemeral operation's salience is not above
  ``ephemeral_min_salience``.
* Every operation is rejected when its ``confidence`` is below ``min_confidence``; a
  destructive ``forget`` or ``contradict`` is no more trustworthy than an ``add``.
* ``reinforce``, ``contradict``, ``close_open_loop`` and ``forget`` need a
  ``target_id`` or a non-blank ``target_hint``.
* An ``add`` whose content hash equals an earlier ``add`` of the same batch is rejected
  as a duplicate within the batch.
* An ``add`` that duplicates a neighbor is accepted but rewritten to ``reinforce`` that
  neighbor. Duplicate means, in this order of preference: the same content hash
  (case- and whitespace-folded); lexically near-identical, i.e. the Jaccard index of
  the two sets of lower-cased word tokens is at least 0.9 (one extra or missing word in
  ten or more); or cosine similarity strictly above ``duplicate_cosine``. Neighbors
  that are ``contradicted`` or ``archived`` are skipped: reinforcing a memory the user
  retracted would resurrect nothing and lose the new statement.
* ``update`` needs no target here; resolving which memory it replaces is the write
  path's job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from langmem_layer.extract.extractor import MemoryOperation, OpType
from langmem_layer.sanitize import NUL
from langmem_layer.settings import GateSettings
from langmem_layer.types import Recalled, Status, content_hash

__all__ = ["LEXICAL_DUPLICATE_JACCARD", "GateDecision", "WriteGate", "content_problem"]

#: Token-set Jaccard index at or above which two contents are lexical duplicates.
LEXICAL_DUPLICATE_JACCARD = 0.9

_NO_NEIGHBORS: Mapping[int, Sequence[Recalled]] = MappingProxyType({})
_CONTENT_OPS = frozenset({OpType.ADD, OpType.UPDATE})
_RETIRED = frozenset({Status.CONTRADICTED, Status.ARCHIVED})
_TOKEN = re.compile(r"\w+")


def content_problem(content: str | None, settings: GateSettings) -> str | None:
    """Why ``content`` cannot be a memory, or None when it can: the one content rule.

    Every way a memory is written applies it: the gate to an extractor's or a tool's
    operation (a rejection), and ``langmem_layer.write.new_memory.check_content`` to
    ``remember`` and ``correct`` from Python, REST, the memory tools and MCP (an
    ``InvalidContentError`` with this text). The content is
    measured stripped; the message says how to fix it.

    Args:
        content: The proposed text.
        settings: The limits (``min_content_chars``, ``max_content_chars``).
    """
    text = (content or "").strip()
    if not text:
        return "Memory content is empty: pass the text to remember."
    if NUL in text:
        return (f"Memory content contains a NUL character (U+0000) at position "
                f"{text.index(NUL)}, which PostgreSQL cannot store; remove it.")
    if len(text) < settings.min_content_chars:
        return (f"Memory content is too short ({len(text)} characters; the minimum is "
                f"{settings.min_content_chars}, MemorySettings.gate.min_content_chars): say "
                "what to remember, e.g. 'Is vegetarian.'")
    if len(text) > settings.max_content_chars:
        return (f"Memory content is too long ({len(text)} characters; the limit is "
                f"{settings.max_content_chars}, MemorySettings.gate.max_content_chars): "
                "split it or summarise it.")
    return None


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's verdict on one proposed operation.

    Attributes:
        operation: The operation to apply; an ``add`` may have been rewritten to
            ``reinforce``. Equal to ``proposed`` otherwise.
        proposed: The operation as the extractor proposed it.
        accepted: Whether ``operation`` should be applied.
        reason: Why it was accepted or rejected, for logs and debugging.
    """

    operation: MemoryOperation
    proposed: MemoryOperation
    accepted: bool
    reason: str


class WriteGate:
    """Accepts, rejects or rewrites proposed memory operations.

    Args:
        settings: The thresholds; the defaults of ``GateSettings`` when omitted.
    """

    def __init__(self, settings: GateSettings | None = None) -> None:
        self.settings = settings or GateSettings()

    def review(
        self,
        operations: Sequence[MemoryOperation],
        *,
        neighbors: Mapping[int, Sequence[Recalled]] = _NO_NEIGHBORS,
    ) -> list[GateDecision]:
        """Decide on each operation of a batch.

        Args:
            operations: The proposed operations, typically one extractor call's output.
            neighbors: For index ``i``, the existing memories nearest to
                ``operations[i].content``, best first, with ``similarity`` (cosine)
                set where known.

        Returns:
            One decision per operation, in the same order.
        """
        batch_hashes: dict[str, int] = {}
        decisions: list[GateDecision] = []
        for index, op in enumerate(operations):
            decisions.append(self._review_one(index, op, neighbors.get(index, ()), batch_hashes))
        return decisions

    def _review_one(
        self,
        index: int,
        op: MemoryOperation,
        near: Sequence[Recalled],
        batch_hashes: dict[str, int],
    ) -> GateDecision:
        s = self.settings

        def reject(reason: str) -> GateDecision:
            return GateDecision(op, op, accepted=False, reason=f"rejected: {reason}")

        if op.confidence < s.min_confidence:
            return reject(f"confidence {op.confidence:g} below {s.min_confidence:g}")
        if op.op not in _CONTENT_OPS:
            if not op.target_id and not (op.target_hint or "").strip():
                return reject(f"no target for {op.op.value} (needs target_id or target_hint)")
            return GateDecision(op, op, accepted=True, reason=f"accepted: {op.op.value} target")

        if problem := content_problem(op.content, s):
            return reject(problem)
        content = (op.content or "").strip()
        if op.salience < s.min_salience:
            return reject(f"salience {op.salience:g} below {s.min_salience:g}")
        if op.ephemeral and op.salience <= s.ephemeral_min_salience:
            return reject(
                f"ephemeral with salience {op.salience:g} not above {s.ephemeral_min_salience:g}"
            )
        if op.op is not OpType.ADD:
            return GateDecision(op, op, accepted=True, reason="accepted: update")

        digest = content_hash(content)
        if digest in batch_hashes:
            earlier = batch_hashes[digest]
            return reject(f"duplicate within this batch (same content as operation {earlier})")
        batch_hashes[digest] = index

        duplicate = self._duplicate_of(content, digest, near)
        if duplicate is None:
            return GateDecision(op, op, accepted=True, reason="accepted: new memory")
        neighbor, why = duplicate
        rewritten = op.model_copy(update={"op": OpType.REINFORCE, "target_id": neighbor.key})
        reason = f"near-duplicate of {neighbor.key} ({why}): reinforced"
        return GateDecision(rewritten, op, accepted=True, reason=reason)

    def _duplicate_of(
        self, content: str, digest: str, near: Sequence[Recalled]
    ) -> tuple[Recalled, str] | None:
        """The neighbor ``content`` duplicates and why, preferring the strongest evidence."""
        live = [n for n in near if n.record.status not in _RETIRED]
        for n in live:
            if (n.record.content_hash or content_hash(n.record.content)) == digest:
                return n, "same content"
        tokens = _tokens(content)
        for n in live:
            score = _jaccard(tokens, _tokens(n.record.content))
            if score >= LEXICAL_DUPLICATE_JACCARD:
                return n, f"token overlap {score:.3g}"
        for n in live:
            if n.similarity is not None and n.similarity > self.settings.duplicate_cosine:
                return n, f"cosine {n.similarity:.3g}"
        return None


def _tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)
