"""Calibration profiles: retrieval defaults that fit the embedding model in use.

The default relevance floors (0.70 / 0.72) and RRF k = 60 assume an
embedder whose cosines between a question and the memory answering it are high. They
are not for the default local model: all-MiniLM-L6-v2 gives such pairs 0.25-0.65 (median
0.48), so the 0.70 floor drops almost every real hit. A profile holds the values that
fit one model; ``MemoryLayer`` picks it from the store's embedding
model id (``profile_for``) and fills it into the settings (``apply_profile``).

Explicit settings always win: a field the caller set (pydantic's ``model_fields_set``:
passed to ``MemorySettings(...)``, or read from a ``LANGMEM_*`` variable by
``MemorySettings.from_env``) is kept; the profile fills only the fields left unset.
``weights`` is one field: set explicitly, the caller's ``RankingWeights`` is kept whole;
left unset, the profile's weight overrides apply over the default weights. Pass
``MemorySettings(calibration="defaults")`` to keep the uncalibrated defaults whatever
the model (or name another profile to force it). ``"spec"``, that profile's former
name, is still accepted for one release, with a ``DeprecationWarning``.

The figures behind each profile are in ``PROFILES`` and the docs
(``docs/reading.md``, "Defaults that fit the embedder"); ``langmem-layer calibrate``
derives one from a user's own labelled queries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langmem_layer.errors import ConfigurationError
from langmem_layer.settings import MemorySettings, RankingWeights

__all__ = ["PROFILES", "CalibrationProfile", "apply_profile", "profile_for"]


@dataclass(frozen=True, slots=True)
class CalibrationProfile:
    """Retrieval settings that fit one embedding model.

    Attributes:
        name: The profile's name (``MemorySettings.calibration`` may name it).
        models: Model ids it is chosen for (compared without a provider prefix such as
            ``openai:`` or ``sentence-transformers/``, case-insensitively).
        values: ``MemorySettings`` fields it sets; ``weights`` as a dict of the
            ``RankingWeights`` fields it changes.
        basis: Where the values come from (the measurement, or the reasoning).
    """

    name: str
    models: tuple[str, ...]
    values: dict[str, Any] = field(default_factory=dict)
    basis: str = ""

    def settings(self, base: MemorySettings | None = None) -> MemorySettings:
        """``base`` (default: no explicit settings) with this profile applied."""
        return _fill(base or MemorySettings(), self)


#: The profiles shipped, by name. ``defaults`` is the neutral fallback for unknown models.
PROFILES: dict[str, CalibrationProfile] = {p.name: p for p in (
    CalibrationProfile(
        name="minilm",
        models=("all-minilm-l6-v2",),
        values={"rrf_k": 5, "similarity_floor": 0.10, "episodic_similarity_floor": 0.10,
                "search_similarity_floor": 0.30,
                "candidates_per_source": 40, "weights": {"recency": 0.0}},
        basis="LoCoMo calibration split (conv-26, conv-30; `langmem-layer calibrate` from "
        "the defaults): RRF k 60 -> 5 and recency 0.10 -> 0 take recall@10 from 0.643 to "
        "0.715; there, floors 0.3 / 0.5 / 0.7 (0.714 / 0.712 / 0.715) and 20 / 40 candidates "
        "(0.715 / 0.715) tie. Floors 0.30: this model's question/answer cosines are "
        "0.25-0.65 (median 0.48), 0.30 keeps ~90 % of real hits, the default 0.70 under 5 %; "
        "where vector search is the main source (the fixture eval: few memories a user) "
        "hit@3 is 70 % at 0.70 and 92 % at 0.30. 40 candidates: the tie broken toward the "
        "longer lists (0.721 vs 0.717 on the whole file in the ablation, ~17 % more read "
        "time at 100k memories). Held-out split (conv-41, -42, -43) figures: docs/reading.md. "
        "Floors 0.30 -> 0.10 once the block filled to a token target (docs: retrieval): on "
        "LoCoMo the evidence in block is unchanged (0.814 / 0.812), and in the fixture eval, "
        "where a user has a handful of memories, a question that shares no word with the "
        "memory answering it (jogging -> asthma, cosine 0.14; the office -> the employer, "
        "0.22) is answered: hit@3 92 % -> 98 %, every 'miss' check still met. The search "
        "floor stays at 0.30: unrelated text reaches 0.25 with this model ('zebra quantum "
        "bicycle' against 'Works at Acme Robotics.'), and a search must show nothing then.",
    ),
    CalibrationProfile(
        name="openai-3-small",
        models=("text-embedding-3-small",),
        values={"rrf_k": 10, "similarity_floor": 0.25, "episodic_similarity_floor": 0.25,
                "search_similarity_floor": 0.25},
        basis="Not measured here (no key). text-embedding-3 models spread cosines lower "
        "than ada-002: related question/passage pairs are typically 0.3-0.6 and unrelated "
        "text 0.0-0.2, so a 0.70 floor would drop most real hits; 0.25 sits above the "
        "unrelated band. RRF k = 10: the same short candidate lists as for MiniLM, with a "
        "stronger vector list. Recency keeps the default weight (not measured).",
    ),
    CalibrationProfile(
        name="openai-3-large",
        models=("text-embedding-3-large",),
        values={"rrf_k": 10, "similarity_floor": 0.22, "episodic_similarity_floor": 0.22,
                "search_similarity_floor": 0.22},
        basis="Not measured here (no key). text-embedding-3-large's cosines run slightly "
        "lower than -small's for the same pairs (related ~0.25-0.55); floor 0.22, else as "
        "for text-embedding-3-small.",
    ),
    CalibrationProfile(
        name="defaults",
        models=(),
        values={},
        basis="The uncalibrated defaults (floors 0.70 / 0.72, RRF k = 60, the default "
        "composite weights) for a model without a profile: no calibration is assumed.",
    ),
)}


def _bare(model_id: str) -> str:
    return model_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1].strip().lower()


def profile_for(model_id: str | None) -> CalibrationProfile:
    """The profile of an embedding model; the ``defaults`` fallback for an unknown one.

    Args:
        model_id: The store's embedding model id (``store.model_id``), with or without a
            provider prefix (``openai:text-embedding-3-small``,
            ``sentence-transformers/all-MiniLM-L6-v2``); None: no embedder.
    """
    if model_id:
        bare = _bare(model_id)
        for profile in PROFILES.values():
            if bare in profile.models:
                return profile
    return PROFILES["defaults"]


def _fill(settings: MemorySettings, profile: CalibrationProfile) -> MemorySettings:
    explicit = settings.model_fields_set
    update: dict[str, Any] = {}
    for name, value in profile.values.items():
        if name in explicit:
            continue
        if name == "weights":
            value = RankingWeights(**{**RankingWeights().model_dump(), **value})
        update[name] = value
    if not update:
        return settings
    # Validated as a whole, and the profile's fields stay "unset": applying a profile
    # again (another layer over the same settings) still lets a later profile choose.
    data = {**settings.model_dump(), **update}
    filled = MemorySettings.model_validate(data)
    object.__setattr__(filled, "__pydantic_fields_set__", set(explicit))
    return filled


def apply_profile(settings: MemorySettings | None, model_id: str | None) -> MemorySettings:
    """``settings`` with the embedder's profile filling the fields not set explicitly.

    Args:
        settings: The caller's settings (None: none).
        model_id: The store's embedding model id.

    Raises:
        ConfigurationError: ``settings.calibration`` names no profile.
    """
    settings = settings or MemorySettings()
    choice = settings.calibration
    if choice == "auto":
        profile = profile_for(model_id)
    elif choice in PROFILES:
        profile = PROFILES[choice]
    else:
        raise ConfigurationError(
            f"calibration={choice!r} names no profile; use 'auto' (by the embedding model) "
            f"or one of {sorted(PROFILES)}")
    return _fill(settings, profile)
