"""Retrieval defaults that fit the embedder (calibration profiles), deriving a profile
from labelled queries (``langmem-layer calibrate``) and the LoCoMo retrieval benchmark
(``langmem-layer eval locomo``)."""

from langmem_layer.settings.calibration import (
    PROFILES,
    CalibrationProfile,
    apply_profile,
    profile_for,
)

__all__ = ["PROFILES", "CalibrationProfile", "apply_profile", "profile_for"]
