"""Topics of one user's memories: clusters by embedding similarity and shared references.

A topic is never an exact string: two statements are about the same topic when their
vectors are close (cosine at or above ``similarity``) or they share a reference that is
specific enough (named by few of the user's statements). Clusters are the connected
components of that relation, computed in Python over one user's vectors.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from langmem_layer.synth.synthesizer import Evidence

__all__ = ["cluster", "cosine_matrix", "unit"]


def unit(vectors: Sequence[Any]) -> Any:
    """Vectors as a float32 matrix of unit rows."""
    import numpy as np

    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim != 2 or not len(m):
        return m.reshape(0, 0)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def cosine_matrix(a: Sequence[Any], b: Sequence[Any]) -> Any:
    """Cosine similarity of every vector of ``a`` with every vector of ``b``."""
    ua, ub = unit(a), unit(b)
    if not ua.size or not ub.size:
        import numpy as np

        return np.zeros((len(a), len(b)), dtype=np.float32)
    return ua @ ub.T


def cluster(items: Sequence[Evidence], *, similarity: float = 0.72,
            ref_share: float = 0.1) -> list[list[int]]:
    """Group ``items`` into topics; returns index lists, largest first.

    Args:
        items: Statements with vectors (an item without one joins by references only).
        similarity: Cosine at or above which two statements share a topic.
        ref_share: A reference links the statements naming it when at most this share
            of ``items`` (or at most 10 of them, whichever is more) names it: "berlin"
            binds a topic, a reference on a large user's every statement binds nothing.
    """
    n = len(items)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    with_vec = [i for i in range(n) if items[i].vector is not None]
    if len(with_vec) > 1:
        import numpy as np

        sims = cosine_matrix([items[i].vector for i in with_vec],
                             [items[i].vector for i in with_vec])
        rows, cols = np.nonzero(np.triu(sims >= similarity, k=1))
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            union(with_vec[r], with_vec[c])
    by_ref: dict[str, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        for ref in set(item.refs):
            by_ref[ref].append(i)
    limit = max(10, int(ref_share * n))
    for members in by_ref.values():
        if 1 < len(members) <= limit:
            for j in members[1:]:
                union(members[0], j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in range(n):
        groups[find(i)].append(i)
    return sorted(groups.values(), key=lambda g: (-len(g), g[0]))
