"""Synthesis for the reflection jobs: one interface, a model behind it or templates.

See ``langmem_layer.synth.synthesizer`` (the interface, ``ModelSynthesizer``),
``langmem_layer.synth.offline_synthesizer`` (``OfflineSynthesizer``, the default without
a model), ``langmem_layer.synth.topics`` (clusters of a user's statements) and
``langmem_layer.synth.tasks`` (the consolidation and reflection tasks).
"""

# Registers the built-in tasks' offline writers, whichever synth module is imported.
from langmem_layer.synth import tasks  # noqa: F401
from langmem_layer.synth.offline_synthesizer import OfflineSynthesizer, offline_writer
from langmem_layer.synth.synthesizer import (
    Evidence,
    ModelSynthesizer,
    SynthesisOutcome,
    SynthesisTask,
    Synthesizer,
    central,
)
from langmem_layer.synth.topics import cluster

__all__ = ["Evidence", "ModelSynthesizer", "OfflineSynthesizer", "SynthesisOutcome",
           "SynthesisTask", "Synthesizer", "central", "cluster", "offline_writer"]
