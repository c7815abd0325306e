"""Settings: every threshold, weight and budget in one validated place.

Defaults come from the specification (R-numbers in the field descriptions). Any
field can be overridden in code (``MemorySettings(similarity_floor=0.6)``) or from
the environment with :meth:`MemorySettings.from_env` (``LANGMEM_SIMILARITY_FLOOR=0.6``).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["GateSettings", "MemorySettings", "RankingWeights"]


class RankingWeights(BaseModel):
    """Weights of the composite ranking score (R4.2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    relevance: float = 0.35
    salience: float = 0.20
    pinned: float = 0.15
    urgency: float = 0.20
    confidence: float = 0.10
    recency: float = 0.10


class GateSettings(BaseModel):
    """Thresholds of the write gate (R3.4)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_content_chars: int = Field(default=8, ge=1, description="Shorter content is rejected.")
    max_content_chars: int = Field(default=4000, ge=1, description="Longer content is an error.")
    min_confidence: float = Field(default=0.4, ge=0, le=1)
    min_salience: float = Field(default=0.2, ge=0, le=1)
    ephemeral_min_salience: float = Field(
        default=0.6, ge=0, le=1, description="Ephemeral content needs salience above this."
    )
    duplicate_cosine: float = Field(
        default=0.88, ge=0, le=1, description="Cosine above which a new memory reinforces."
    )


class MemorySettings(BaseModel):
    """Settings of a :class:`~langmem_layer.MemoryLayer`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_profile: str = "work"
    profiles: tuple[str, ...] = ("work", "personal")
    gate: GateSettings = Field(default_factory=GateSettings)
    weights: RankingWeights = Field(default_factory=RankingWeights)
    rrf_k: int = Field(default=60, ge=1, description="Reciprocal Rank Fusion constant (R4.1).")
    candidates_per_source: int = Field(default=40, ge=1)
    similarity_floor: float = Field(
        default=0.7, ge=-1, le=1, description="Vector hits below this are dropped (R4.3)."
    )
    episodic_similarity_floor: float = Field(default=0.72, ge=-1, le=1)
    recall_limit: int = Field(default=10, ge=1)
    decay_flag_below: float = Field(default=0.15, ge=0, le=1)
    context_window_tokens: int = Field(default=128_000, ge=256)
    context_budget_fraction: float = Field(
        default=0.20, gt=0, le=1, description="Share of the window for the memory block (R6.1)."
    )
    semantic_share: float = Field(default=0.60, gt=0, le=1)
    encoding: str = "o200k_base"
    conflict_policy: Literal["latest", "trust", "review"] = Field(
        default="latest",
        description="Two agents disagree on a single-valued fact (R3.6): the latest write "
        "wins, the more trusted agent wins, or both stay linked for human review.",
    )
    extraction_batch_size: int = Field(default=20, ge=1, description="Entries per worker pass.")
    extraction_lease_seconds: float = Field(default=300.0, gt=0)
    extraction_retry_base_seconds: float = Field(
        default=30.0, ge=0, description="First retry delay; doubles per failed attempt."
    )
    extract_every_n_turns: int = Field(
        default=1, ge=1, description="Background extraction runs after every N turns."
    )
    embedding_batch_size: int = Field(default=100, ge=1)

    @model_validator(mode="after")
    def _default_profile_known(self) -> MemorySettings:
        if self.default_profile not in self.profiles:
            object.__setattr__(self, "profiles", (*self.profiles, self.default_profile))
        return self

    @property
    def context_budget_tokens(self) -> int:
        """Token budget of the memory block."""
        return int(self.context_window_tokens * self.context_budget_fraction)

    @classmethod
    def from_env(cls, prefix: str = "LANGMEM_", **overrides: Any) -> MemorySettings:
        """Build settings from ``LANGMEM_*`` environment variables plus ``overrides``.

        Only top-level scalar fields are read from the environment; nested settings
        (``gate``, ``weights``) are passed as overrides.
        """
        values: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            raw = os.environ.get(prefix + name.upper())
            if raw is None or info.annotation in (GateSettings, RankingWeights):
                continue
            values[name] = tuple(raw.split(",")) if name == "profiles" else raw
        values.update(overrides)
        return cls.model_validate(values)
