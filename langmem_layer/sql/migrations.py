"""Schema migrations: an append-only list whose index is the version.

Each entry is idempotent DDL (``IF NOT EXISTS`` throughout), so running ``setup()``
again after the version table was dropped succeeds and changes nothing. Never edit
or reorder an entry that has shipped; append a new one.

Every table carries ``user_id`` and leads its keys with it: each statement on them
filters by the user, which keeps memory isolated and keeps each query routable to
one shard of a distributed PostgreSQL (e.g. Citus, distributing on ``user_id``).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "VERSION_TABLE"]

VERSION_TABLE = "langmem_migrations"

MIGRATIONS: list[str] = [
    # 0: the version table itself, and pgvector.
    f"""
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (
        v integer PRIMARY KEY,
        applied_at timestamptz NOT NULL DEFAULT now()
    );
    """,
    # 1: items. Generic BaseStore items and typed memories share this table; a typed
    # memory is a row with is_memory = true whose value matches MemoryRecord.
    # user_id is '' for namespaces outside a tenant root (shared items).
    """
    CREATE TABLE IF NOT EXISTS langmem_items (
        user_id     text NOT NULL,
        prefix      text NOT NULL,
        key         text NOT NULL,
        value       jsonb NOT NULL,
        is_memory   boolean NOT NULL DEFAULT false,
        search_text text,
        tsv         tsvector GENERATED ALWAYS AS
                        (to_tsvector('english'::regconfig, coalesce(search_text, ''))) STORED,
        created_at  timestamptz NOT NULL,
        updated_at  timestamptz NOT NULL,
        expires_at  timestamptz,
        ttl_minutes double precision,
        PRIMARY KEY (user_id, prefix, key)
    );
    CREATE INDEX IF NOT EXISTS langmem_items_prefix_idx
        ON langmem_items (user_id, prefix text_pattern_ops);
    CREATE INDEX IF NOT EXISTS langmem_items_key_idx ON langmem_items (user_id, key);
    CREATE INDEX IF NOT EXISTS langmem_items_expires_idx
        ON langmem_items (expires_at) WHERE expires_at IS NOT NULL;
    CREATE INDEX IF NOT EXISTS langmem_items_tsv_idx ON langmem_items USING gin (tsv);
    CREATE INDEX IF NOT EXISTS langmem_items_refs_idx
        ON langmem_items USING gin ((value -> 'refs')) WHERE is_memory;
    """,
    # 2: embeddings, keyed by (item, model): models of different dimensions coexist,
    # a new model can be backfilled while the old one serves (R2.4).
    """
    CREATE TABLE IF NOT EXISTS langmem_embeddings (
        user_id    text NOT NULL,
        prefix     text NOT NULL,
        key        text NOT NULL,
        model_id   text NOT NULL,
        field      text NOT NULL,
        dims       integer NOT NULL CHECK (dims > 0),
        embedding  vector NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, prefix, key, model_id, field),
        FOREIGN KEY (user_id, prefix, key)
            REFERENCES langmem_items (user_id, prefix, key) ON DELETE CASCADE
    );
    CREATE INDEX IF NOT EXISTS langmem_embeddings_model_idx
        ON langmem_embeddings (user_id, model_id);
    """,
    # 3: typed links between memories (R2.5). Memory keys are unique per user.
    """
    CREATE TABLE IF NOT EXISTS langmem_links (
        user_id    text NOT NULL,
        src_key    text NOT NULL,
        link_type  text NOT NULL CHECK (link_type IN
                       ('contradicts', 'supersedes', 'elaborates', 'caused_by', 'derived_from')),
        dst_key    text NOT NULL,
        created_at timestamptz NOT NULL,
        metadata   jsonb NOT NULL DEFAULT '{}'::jsonb,
        PRIMARY KEY (user_id, src_key, link_type, dst_key)
    );
    CREATE INDEX IF NOT EXISTS langmem_links_dst_idx ON langmem_links (user_id, dst_key);
    """,
    # 4: the namespace text contains the user id, so user_id and prefix are correlated;
    # without extended statistics the planner takes one user's thousand vectors for a
    # handful and picks nested loops that grow with the square of the user's size.
    """
    CREATE STATISTICS IF NOT EXISTS langmem_items_user_prefix_stats (dependencies, ndistinct)
        ON user_id, prefix FROM langmem_items;
    CREATE STATISTICS IF NOT EXISTS langmem_embeddings_user_prefix_stats
        (dependencies, ndistinct) ON user_id, prefix FROM langmem_embeddings;
    """,
    # 5: the durable extraction queue (R3.1). A turn waits here until extracted; a
    # failed attempt stays with its error and is retried after a backoff.
    """
    CREATE TABLE IF NOT EXISTS langmem_extraction_queue (
        user_id         text NOT NULL,
        id              bigint GENERATED ALWAYS AS IDENTITY,
        dedupe_key      text NOT NULL,
        profile         text NOT NULL,
        thread_id       text,
        agent_id        text,
        messages        jsonb NOT NULL,
        turn_at         timestamptz NOT NULL,
        enqueued_at     timestamptz NOT NULL,
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        locked_until    timestamptz,
        last_error      text,
        done_at         timestamptz,
        PRIMARY KEY (user_id, id),
        UNIQUE (user_id, dedupe_key)
    );
    CREATE INDEX IF NOT EXISTS langmem_queue_pending_idx
        ON langmem_extraction_queue (next_attempt_at) WHERE done_at IS NULL;
    """,
    # 6: operations already applied, so re-applying a batch changes nothing (R3.2), and
    # the gate's decisions per ingest, so users can see why something was (not) kept.
    """
    CREATE TABLE IF NOT EXISTS langmem_applied_ops (
        user_id    text NOT NULL,
        op_id      text NOT NULL,
        applied_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, op_id)
    );
    CREATE TABLE IF NOT EXISTS langmem_ingest_log (
        user_id    text NOT NULL,
        id         bigint GENERATED ALWAYS AS IDENTITY,
        at         timestamptz NOT NULL,
        thread_id  text,
        agent_id   text,
        decisions  jsonb NOT NULL,
        PRIMARY KEY (user_id, id)
    );
    """,
    # 7: embedding cache by (content hash, model), per user, kept 30 days (R3.5).
    """
    CREATE TABLE IF NOT EXISTS langmem_embedding_cache (
        user_id      text NOT NULL,
        model_id     text NOT NULL,
        content_hash text NOT NULL,
        embedding    vector NOT NULL,
        created_at   timestamptz NOT NULL,
        PRIMARY KEY (user_id, model_id, content_hash)
    );
    CREATE INDEX IF NOT EXISTS langmem_embedding_cache_age_idx
        ON langmem_embedding_cache (created_at);
    """,
]
