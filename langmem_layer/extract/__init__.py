"""Proposals: what a turn says, as memory operations, and the gate that judges them.

Pure code (no I/O): the extractor interface (:mod:`.base`), the offline rule
extractor (:mod:`.rules`, :mod:`.statements`, :mod:`.phrases`, :mod:`.dates`,
:mod:`.loops`), the LLM extractor (:mod:`.llm`), the fallback record (:mod:`.fallback`)
and the write gate (:mod:`.gate`)."""
