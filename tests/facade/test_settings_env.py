"""MemorySettings.from_env reads every top-level field, lists and mappings included."""

from __future__ import annotations

import pytest

from langmem_layer import MemorySettings
from langmem_layer.errors import ConfigurationError


def test_from_env_reads_scalars_lists_and_mappings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGMEM_RRF_K", "5")
    monkeypatch.setenv("LANGMEM_LINK_TYPES", "elaborates, caused_by")
    monkeypatch.setenv("LANGMEM_SOURCE_WEIGHTS", '{"link": 0.3}')
    monkeypatch.setenv("LANGMEM_LINK_THREAD_MEMORIES", "false")
    settings = MemorySettings.from_env(similarity_floor=0.3)
    assert settings.rrf_k == 5
    assert settings.link_types == ("elaborates", "caused_by")
    assert settings.source_weights == {"link": 0.3}
    assert settings.link_thread_memories is False
    assert settings.similarity_floor == 0.3


def test_from_env_says_how_to_write_a_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGMEM_SOURCE_WEIGHTS", "link=0.3")
    with pytest.raises(ConfigurationError, match="LANGMEM_SOURCE_WEIGHTS must be a JSON object"):
        MemorySettings.from_env()
