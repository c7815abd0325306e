"""Proposals: what a turn says, as memory operations, and the gate that judges them.

Pure code (no I/O): the extractor interface (``extractor``), the offline rule
extractor (``rules``, ``statements``, ``phrases``, ``dates``,
``loops``), the LLM extractor (``llm``), the fallback record (``fallback``)
and the write gate (``gate``)."""
