"""The schema is ready to be distributed by user: every key of a per-user table has user_id.

A table distributed on ``user_id`` (Citus' ``create_distributed_table(t, 'user_id')``)
can only enforce a primary key, a unique constraint or index, or a foreign key that
includes the distribution column; these tests read the catalog after ``setup()``.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.audit import PER_USER_TABLES

# (table, kind, name, columns) of every key-like object on a langmem_* table. Expression
# index columns (attnum 0) appear as NULL, so such an index cannot pass by accident.
_KEYS = """
    SELECT c.relname, 'constraint ' || k.contype::text, k.conname,
           array_agg(a.attname ORDER BY x.n) AS cols
    FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid
    CROSS JOIN LATERAL unnest(k.conkey) WITH ORDINALITY AS x(attnum, n)
    JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = x.attnum
    WHERE k.contype IN ('p', 'u', 'f', 'x') AND c.relname LIKE 'langmem\\_%'
      AND c.relnamespace = current_schema()::regnamespace
    GROUP BY 1, 2, 3
    UNION ALL
    SELECT c.relname, 'unique index', i.relname,
           array_agg(a.attname ORDER BY x.n) AS cols
    FROM pg_index ix
    JOIN pg_class c ON c.oid = ix.indrelid
    JOIN pg_class i ON i.oid = ix.indexrelid
    CROSS JOIN LATERAL unnest(ix.indkey::int2[]) WITH ORDINALITY AS x(attnum, n)
    LEFT JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = x.attnum
    WHERE ix.indisunique AND c.relname LIKE 'langmem\\_%'
      AND c.relnamespace = current_schema()::regnamespace
    GROUP BY 1, 2, 3
"""

# Foreign keys: the referencing and the referenced table, and the column pairs.
_FOREIGN = """
    SELECT k.conname, c.relname AS src, r.relname AS dst,
           array_agg(a.attname || '=' || b.attname ORDER BY x.n) AS pairs
    FROM pg_constraint k
    JOIN pg_class c ON c.oid = k.conrelid
    JOIN pg_class r ON r.oid = k.confrelid
    CROSS JOIN LATERAL unnest(k.conkey, k.confkey) WITH ORDINALITY AS x(src, dst, n)
    JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = x.src
    JOIN pg_attribute b ON b.attrelid = k.confrelid AND b.attnum = x.dst
    WHERE k.contype = 'f' AND (c.relname LIKE 'langmem\\_%' OR r.relname LIKE 'langmem\\_%')
      AND c.relnamespace = current_schema()::regnamespace
    GROUP BY 1, 2, 3
"""


@pytest.fixture
def catalog(pg_uri: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_uri) as conn:
        yield conn


def _user_tables(conn: psycopg.Connection) -> set[str]:
    rows = conn.execute(
        """SELECT DISTINCT table_name FROM information_schema.columns
        WHERE column_name = 'user_id' AND table_schema = current_schema()
          AND table_name LIKE 'langmem\\_%'"""
    ).fetchall()
    return {r[0] for r in rows}


def test_per_user_tables_are_those_of_the_catalog(catalog: psycopg.Connection) -> None:
    """The audit's list of per-user tables is every langmem_* table with a user_id."""
    assert set(PER_USER_TABLES) == _user_tables(catalog)


def test_every_key_of_a_per_user_table_includes_user_id(catalog: psycopg.Connection) -> None:
    tables = _user_tables(catalog)
    keys = [r for r in catalog.execute(_KEYS).fetchall() if r[0] in tables]
    # Every per-user table has a primary key, and the query sees it.
    assert {r[0] for r in keys if r[1] == "constraint p"} == tables
    missing = [f"{table}: {kind} {name} {cols}" for table, kind, name, cols in keys
               if "user_id" not in cols]
    assert not missing, "keys a table distributed by user_id cannot enforce:\n" + "\n".join(
        missing)


def test_every_foreign_key_pairs_user_id_with_user_id(catalog: psycopg.Connection) -> None:
    """A foreign key between per-user tables stays within one user (one shard)."""
    tables = _user_tables(catalog)
    foreign = catalog.execute(_FOREIGN).fetchall()
    assert foreign, "the schema has foreign keys (embeddings → items); the query must see them"
    bad = [f"{name}: {src} → {dst} {pairs}" for name, src, dst, pairs in foreign
           if src not in tables or dst not in tables or "user_id=user_id" not in pairs]
    assert not bad, "foreign keys that cross users or leave the per-user tables:\n" + "\n".join(
        bad)


def test_shared_tables_hold_no_user_rows(catalog: psycopg.Connection) -> None:
    """The tables without user_id are the runner's own: reference tables on Citus."""
    rows = catalog.execute(
        """SELECT table_name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_name LIKE 'langmem\\_%'
          AND table_type = 'BASE TABLE'"""
    ).fetchall()
    shared = {r[0] for r in rows} - _user_tables(catalog)
    assert shared == {"langmem_migrations", "langmem_job_runs"}
