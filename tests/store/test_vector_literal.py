"""Vectors go to pgvector as text with nine significant digits: float32 exactly."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from langmem_layer.sql.vector import vector_literal


def test_vector_literal_round_trips_float32_through_pgvector(pg_uri: str) -> None:
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.standard_normal(380), [1e-30, -3.4e38, 0.1, 1 / 3]])
    vector = values.astype(np.float32)
    with psycopg.connect(pg_uri) as conn:
        text = conn.execute("SELECT %s::vector::text", [vector_literal(vector.tolist())])
        stored = np.array([float(x) for x in text.fetchone()[0].strip("[]").split(",")],
                          dtype=np.float32)
        assert np.array_equal(stored, vector)
        # float64 input (an API's JSON) lands on the nearest float32 too
        text = conn.execute("SELECT %s::vector::text", [vector_literal(values.tolist())])
        stored64 = np.array([float(x) for x in text.fetchone()[0].strip("[]").split(",")],
                            dtype=np.float32)
        assert np.max(np.abs(stored64 - values.astype(np.float32))
                      / np.maximum(np.abs(values.astype(np.float32)), 1e-30)) < 1e-6


def test_vector_literal_nan_is_still_refused_by_pgvector(pg_uri: str) -> None:
    with psycopg.connect(pg_uri) as conn, pytest.raises(psycopg.errors.DataException):
        conn.execute("SELECT %s::vector", [vector_literal([1.0, float("nan")])])
