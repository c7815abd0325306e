"""Migrations from 14 on: the features built on the base schema (the lifecycle, the job
runner, write-path integrity, halfvec indexes, API keys, decay scores, row-level
security, …).

Part of the append-only list ``langmem_layer.sql.migrations.MIGRATIONS``: never edit
or reorder an entry that has shipped; append new migrations at the end of this list.
"""

from __future__ import annotations

from langmem_layer.sql.job_users import TABLE as JOB_USERS_TABLE
from langmem_layer.sql.rls import enable_rls
from langmem_layer.sql.trust_counts import TRUST_TABLE

__all__ = ["FEATURES"]


def _bound_nearest(name: str, vector_type: str) -> str:
    """Migration 29's reader of a user's own HNSW index of ``vector_type`` (``vector`` or
    ``halfvec``): run as its owner, answering only for the bound user."""
    return f"""
    CREATE OR REPLACE FUNCTION {name}(
        p_user text, p_model text, p_dims integer, p_query text,
        p_prefix text, p_prefix_like text, p_limit integer, p_ef integer)
    RETURNS TABLE (prefix text, key text, sim double precision)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path FROM CURRENT
    SET enable_sort = off
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 100
    AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        PERFORM set_config('hnsw.ef_search', greatest(p_ef, 1)::text, true);
        RETURN QUERY EXECUTE format(
            'SELECT e.prefix, e.key, 1 - (e.embedding::{vector_type}(%1$s)
                                          <=> $1::{vector_type}(%1$s))
             FROM langmem_embeddings e
             WHERE e.user_id = %2$L AND e.model_id = %3$L
               AND ($2 IS NULL OR e.prefix = $2 OR e.prefix LIKE $3)
             ORDER BY e.embedding::{vector_type}(%1$s) <=> $1::{vector_type}(%1$s)
             LIMIT $4',
            p_dims, p_user, p_model)
        USING p_query, p_prefix, p_prefix_like, p_limit;
    END
    $fn$;
    """

FEATURES: list[str] = [
    # the lifecycle: each memory's decay score, recomputed nightly into an
    # unindexed column (an in-place HOT update, like `access`), and the open loops with
    # a due date by due date, for the "due" strategy of recall (sql/candidates.py).
    """
    ALTER TABLE langmem_items ADD COLUMN IF NOT EXISTS decay double precision;
    CREATE INDEX IF NOT EXISTS langmem_items_due_idx
        ON langmem_items (user_id, (value ->> 'due_at'))
        WHERE is_memory AND (value ->> 'kind') = 'open_loop'
          AND coalesce(value ->> 'loop_status', 'open') <> 'closed'
          AND (value ->> 'due_at') IS NOT NULL;
    """,
    # turns the LLM extractor could not handle (the model was down) and that the
    # rule extractor took instead: kept, with the error, until the ``reextract`` job has
    # run them through the model again. One row per turn; a failed re-run counts up.
    """
    CREATE TABLE IF NOT EXISTS langmem_reextract (
        user_id     text NOT NULL,
        turn_key    text NOT NULL,
        profile     text NOT NULL,
        thread_id   text,
        agent_id    text,
        messages    jsonb NOT NULL,
        turn_at     timestamptz NOT NULL,
        extractor   text NOT NULL,
        attempts    integer NOT NULL DEFAULT 1,
        recorded_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, turn_key)
    );
    """,
    # The job runner's record: one row per job, period and shard, claimed before
    # the run and finished after it, so a finished period is not run again; the cursor
    # is the last user whose work committed, so a crashed run resumes after it. The
    # runner's own table, not a per-user one (on a distributed PostgreSQL: a local
    # table of the coordinator).
    """
    CREATE TABLE IF NOT EXISTS langmem_job_runs (
        job         text NOT NULL,
        period      text NOT NULL,
        shard       text NOT NULL,
        cursor      text,
        users       integer NOT NULL DEFAULT 0,
        counts      jsonb NOT NULL DEFAULT '{}'::jsonb,
        started_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
        finished_at timestamptz,
        error       text,
        PRIMARY KEY (job, period, shard)
    );
    CREATE INDEX IF NOT EXISTS langmem_job_runs_latest_idx
        ON langmem_job_runs (job, started_at DESC);
    """,
    # write-path integrity: a new memory is written only if its scope holds no active
    # memory with the same content hash (re-checked under a per-user lock): the index
    # keeps that check one probe however many memories the user has. A queue entry that
    # keeps failing, or whose input the database refuses, is parked (kept, not retried).
    """
    CREATE INDEX IF NOT EXISTS langmem_items_content_hash_idx
        ON langmem_items (user_id, (value ->> 'content_hash')) WHERE is_memory;
    ALTER TABLE langmem_extraction_queue ADD COLUMN IF NOT EXISTS parked_at timestamptz;
    """,
    # halfvec: a store with ann_index_config vector_type "halfvec" indexes its large
    # users with half-precision copies of their vectors (the index expression casts the
    # single-precision column), so the record says which type an index is of; and the
    # walk of migration 8 over such an index.
    """
    ALTER TABLE langmem_vector_indexes
        ADD COLUMN IF NOT EXISTS vector_type text NOT NULL DEFAULT 'vector';
    CREATE OR REPLACE FUNCTION langmem_user_nearest_halfvec(
        p_user text, p_model text, p_dims integer, p_query text,
        p_prefix text, p_prefix_like text, p_limit integer, p_ef integer)
    RETURNS TABLE (prefix text, key text, sim double precision)
    LANGUAGE plpgsql
    SET enable_sort = off
    SET hnsw.iterative_scan = 'relaxed_order'
    SET hnsw.ef_search = 100
    AS $fn$
    BEGIN
        PERFORM set_config('hnsw.ef_search', greatest(p_ef, 1)::text, true);
        RETURN QUERY EXECUTE format(
            'SELECT e.prefix, e.key, 1 - (e.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s))
             FROM langmem_embeddings e
             WHERE e.user_id = %2$L AND e.model_id = %3$L
               AND ($2 IS NULL OR e.prefix = $2 OR e.prefix LIKE $3)
             ORDER BY e.embedding::halfvec(%1$s) <=> $1::halfvec(%1$s)
             LIMIT $4',
            p_dims, p_user, p_model)
        USING p_query, p_prefix, p_prefix_like, p_limit;
    END
    $fn$;
    """,
    # API keys of the HTTP app: one row per key, bound to its user, holding only
    # the SHA-256 of the token (the token itself is shown once, at creation). The token
    # names its user, so verifying a key binds user_id like every other statement.
    """
    CREATE TABLE IF NOT EXISTS langmem_api_keys (
        user_id     text NOT NULL,
        key_hash    text NOT NULL,
        key_id      text NOT NULL,
        admin       boolean NOT NULL DEFAULT false,
        created_at  timestamptz NOT NULL,
        PRIMARY KEY (user_id, key_hash)
    );
    """,
    # tokens sent to a chat model by a job run (the reflection jobs' syntheses), summed
    # over its users like the counts, shown by `jobs status`.
    """
    ALTER TABLE langmem_job_runs ADD COLUMN IF NOT EXISTS tokens bigint NOT NULL DEFAULT 0;
    """,
    # the stored decay score moves to a narrow table of its own. The nightly
    # rescore rewrote nearly every memory row for one float: a row of ~800 bytes rarely
    # has room for its new version on its page, so ~90 % of those updates were not HOT
    # and added entries to every index of the table while the read path used them. Here
    # a score is a ~90-byte row with only its primary key, unchanged by a rescore, and
    # pages half empty (fillfactor), so the next night's update stays on its page (HOT).
    # Scores already computed are kept. A memory's score goes with it through triggers,
    # not a foreign key: a key check locks the memory row it references (FOR KEY
    # SHARE), which writes to the wide row the table exists to leave alone.
    """
    CREATE TABLE IF NOT EXISTS langmem_decay (
        user_id text NOT NULL,
        prefix  text NOT NULL,
        key     text NOT NULL,
        decay   double precision,
        PRIMARY KEY (user_id, prefix, key)
    ) WITH (fillfactor = 50);
    CREATE OR REPLACE FUNCTION langmem_decay_remove() RETURNS trigger LANGUAGE plpgsql
    AS $fn$
    BEGIN
        DELETE FROM langmem_decay d USING old_rows o
        WHERE d.user_id = o.user_id AND d.prefix = o.prefix AND d.key = o.key;
        RETURN NULL;
    END $fn$;
    CREATE OR REPLACE FUNCTION langmem_decay_reset() RETURNS trigger LANGUAGE plpgsql
    AS $fn$
    BEGIN
        DELETE FROM langmem_decay;
        RETURN NULL;
    END $fn$;
    DROP TRIGGER IF EXISTS langmem_decay_delete ON langmem_items;
    CREATE TRIGGER langmem_decay_delete AFTER DELETE ON langmem_items
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION langmem_decay_remove();
    DROP TRIGGER IF EXISTS langmem_decay_truncate ON langmem_items;
    CREATE TRIGGER langmem_decay_truncate AFTER TRUNCATE ON langmem_items
        FOR EACH STATEMENT EXECUTE FUNCTION langmem_decay_reset();
    DO $do$
    BEGIN
        IF EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_name = 'langmem_items' AND column_name = 'decay'
                     AND table_schema = current_schema()) THEN
            INSERT INTO langmem_decay (user_id, prefix, key, decay)
            SELECT user_id, prefix, key, decay FROM langmem_items WHERE decay IS NOT NULL
            ON CONFLICT DO NOTHING;
            ALTER TABLE langmem_items DROP COLUMN decay;
        END IF;
    END
    $do$;
    """,
    # Row-level security on every per-user table, and the app role (sql/rls.py): the
    # tables of the day, written out, so the migration keeps the text it shipped with
    # (a later per-user table gets RLS from its own migration).
    enable_rls(("langmem_links", "langmem_embeddings", "langmem_decay", "langmem_items",
                "langmem_terms", "langmem_extraction_queue", "langmem_applied_ops",
                "langmem_ingest_log", "langmem_embedding_cache", "langmem_messages",
                "langmem_threads", "langmem_reextract", "langmem_vector_indexes",
                "langmem_api_keys", "langmem_agent_trust")),
    # Learned agent trust, with RLS like every per-user table.
    TRUST_TABLE + enable_rls(("langmem_agent_trust",)),
    # The narrative arc's candidates (sql/summaries.py candidates): every turn reads a
    # user's few temporal summaries; without this a large user's turn scanned all of
    # their memories for them.
    """
    CREATE INDEX IF NOT EXISTS langmem_items_summaries
        ON langmem_items (user_id, updated_at DESC)
        WHERE is_memory AND (value ->> 'kind') = 'temporal_summary';
    """,
    # A per-user job records a user's failure and goes on to the next user.
    """
    ALTER TABLE langmem_job_runs ADD COLUMN IF NOT EXISTS failures jsonb NOT NULL
        DEFAULT '{}'::jsonb;
    """,
    # Recall's "standing" strategy (sql/candidates.py): a user's preferences on how to
    # answer join every turn; this keeps a large user's turn from scanning all of their
    # memories for them.
    """
    CREATE INDEX IF NOT EXISTS langmem_items_standing
        ON langmem_items (user_id, updated_at DESC)
        WHERE is_memory AND (value ->> 'kind') = 'preference'
          AND (value ->> 'policy') = 'adapt';
    """,
    # A lifecycle move writes only unindexed columns (sql/moved.py), so its row update
    # can be HOT: `value` and `updated_at` are read by the table's indexes (expressions,
    # partial-index predicates, keys), and changing either gave each moved memory a new
    # entry in every index. `moved` holds the keys a move changes, whole (a first night
    # moves ~40 % of a user's memories); `moved_at` the time of a status move, a typed
    # column so readers compare it with `updated_at` without parsing. NULL in both is
    # "nothing moved since the value was last written", so existing rows need no copy.
    # A HOT update also needs room on the row's page for the new version, which
    # carries the moved history: fillfactor 85 (it was 90 for reinforcement's small
    # `access` writes) applies to pages written from now on. The recall functions
    # filtering by status read the moved status.
    """
    ALTER TABLE langmem_items ADD COLUMN IF NOT EXISTS moved jsonb;
    ALTER TABLE langmem_items ADD COLUMN IF NOT EXISTS moved_at timestamptz;
    ALTER TABLE langmem_items SET (fillfactor = 85);
    CREATE OR REPLACE FUNCTION langmem_user_matches(
        p_user text, p_query tsquery, p_prefixes text[], p_statuses text[],
        p_now timestamptz, p_limit integer)
    RETURNS TABLE (prefix text, key text, tsv tsvector)
    LANGUAGE plpgsql STABLE AS $fn$
    BEGIN
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.tsv FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory AND i.tsv @@ $1
               AND i.prefix = ANY($2)
               AND coalesce(i.moved->>''status'', i.value->>''status'') = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)
             LIMIT $5', p_user)
        USING p_query, p_prefixes, p_statuses, p_now, p_limit;
    END
    $fn$;
    CREATE OR REPLACE FUNCTION langmem_user_ref_matches(
        p_user text, p_user_refs text[], p_prefixes text[], p_statuses text[],
        p_now timestamptz)
    RETURNS TABLE (prefix text, key text, refs jsonb)
    LANGUAGE plpgsql STABLE AS $fn$
    BEGIN
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.value -> ''refs'' FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory
               AND langmem_user_refs(i.user_id, i.value -> ''refs'') && $1
               AND i.prefix = ANY($2)
               AND coalesce(i.moved->>''status'', i.value->>''status'') = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)', p_user)
        USING p_user_refs, p_prefixes, p_statuses, p_now;
    END
    $fn$;
    """,
    # A per-user job's memory of each user (sql/job_users.py): a run passes over a
    # user whose data has not changed since the job last ran for them.
    JOB_USERS_TABLE + enable_rls(("langmem_job_users",)),
    # A large user's reads through their own indexes run as the functions' owner
    # (SECURITY DEFINER): under row-level security a non-leakproof operator (a full-text
    # @@, a vector <=>) may not be an index condition, so the user's own GIN index was
    # read row by row (a 10k-memory user's keyword match: 5.6 ms instead of 0.4 ms). The
    # owner of the tables (a superuser, or a role with BYPASSRLS) reads through the
    # index; each function answers only for the user bound to the transaction (or for
    # the maintenance binding), exactly what the policies allow, so a caller under the
    # policies reads nothing more through them.
    """
    CREATE OR REPLACE FUNCTION langmem_bound(p_user text) RETURNS boolean
    LANGUAGE sql STABLE AS $fn$
        SELECT coalesce(current_setting('langmem.maintenance', true), '') = 'on'
            OR coalesce(p_user = substr(nullif(current_setting('langmem.user_id', true), ''),
                                        2), false)
    $fn$;
    CREATE OR REPLACE FUNCTION langmem_user_matches(
        p_user text, p_query tsquery, p_prefixes text[], p_statuses text[],
        p_now timestamptz, p_limit integer)
    RETURNS TABLE (prefix text, key text, tsv tsvector)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.tsv FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory AND i.tsv @@ $1
               AND i.prefix = ANY($2)
               AND coalesce(i.moved->>''status'', i.value->>''status'') = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)
             LIMIT $5', p_user)
        USING p_query, p_prefixes, p_statuses, p_now, p_limit;
    END
    $fn$;
    CREATE OR REPLACE FUNCTION langmem_user_ref_matches(
        p_user text, p_user_refs text[], p_prefixes text[], p_statuses text[],
        p_now timestamptz)
    RETURNS TABLE (prefix text, key text, refs jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.value -> ''refs'' FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory
               AND langmem_user_refs(i.user_id, i.value -> ''refs'') && $1
               AND i.prefix = ANY($2)
               AND coalesce(i.moved->>''status'', i.value->>''status'') = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)', p_user)
        USING p_user_refs, p_prefixes, p_statuses, p_now;
    END
    $fn$;
""" + _bound_nearest("langmem_user_nearest", "vector")
    + _bound_nearest("langmem_user_nearest_halfvec", "halfvec"),
    # 30: a large user's memories in a time window, newest first, as migration 29's
    # readers are: the window's bounds compare ``value ->> 'occurred_at'``, which is not
    # leakproof, so under row-level security the occurred_at index served only the
    # user, and a window far from the newest read most of their memories.
    """
    CREATE OR REPLACE FUNCTION langmem_user_window(
        p_user text, p_start text, p_end text, p_prefixes text[], p_statuses text[],
        p_now timestamptz, p_limit integer)
    RETURNS TABLE (prefix text, key text, value jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.value FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory
               AND i.value->>''occurred_at'' >= $1 AND i.value->>''occurred_at'' < $2
               AND i.prefix = ANY($3)
               AND coalesce(i.moved->>''status'', i.value->>''status'') = ANY($4)
               AND (i.expires_at IS NULL OR i.expires_at > $5)
             ORDER BY i.value->>''occurred_at'' DESC
             LIMIT $6', p_user)
        USING p_start, p_end, p_prefixes, p_statuses, p_now, p_limit;
    END
    $fn$;
    """,
    # 31: a small user's memories naming any of p_user_refs, read as the owner like
    # langmem_user_ref_matches (so under row-level security the shared refs index
    # serves), with a static query: its plan is cached for the session, where the
    # large user's EXECUTE plans each call for the user's own index.
    """
    CREATE OR REPLACE FUNCTION langmem_ref_matches(
        p_user text, p_user_refs text[], p_prefixes text[], p_statuses text[],
        p_now timestamptz)
    RETURNS TABLE (prefix text, key text, refs jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY
            SELECT i.prefix, i.key, i.value -> 'refs' FROM langmem_items i
            WHERE i.user_id = p_user AND i.is_memory
              AND langmem_user_refs(i.user_id, i.value -> 'refs') && p_user_refs
              AND i.prefix = ANY(p_prefixes)
              AND coalesce(i.moved->>'status', i.value->>'status') = ANY(p_statuses)
              AND (i.expires_at IS NULL OR i.expires_at > p_now);
    END
    $fn$;
    """,
    # 32: the write path's two lookups by an expression index, read as the owner for
    # the same reason as 29-31 (``->>`` is not leakproof): a memory identical to a new
    # one (content_hash index) and a thread's memories (thread index). Under the role
    # each read every one of the user's memories, on every write.
    """
    CREATE OR REPLACE FUNCTION langmem_identical(
        p_user text, p_prefix text, p_hash text, p_now timestamptz)
    RETURNS TABLE (key text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY
            SELECT i.key FROM langmem_items i
            WHERE i.user_id = p_user AND i.is_memory
              AND i.value ->> 'content_hash' = p_hash AND i.prefix = p_prefix
              AND coalesce(i.moved->>'status', i.value->>'status') = 'active'
              AND (i.expires_at IS NULL OR i.expires_at > p_now)
            ORDER BY i.created_at, i.key
            LIMIT 1;
    END
    $fn$;
    CREATE OR REPLACE FUNCTION langmem_thread_memories(p_user text, p_thread text)
    RETURNS TABLE (key text, created_at timestamptz, active boolean)
    LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $fn$
    BEGIN
        IF NOT langmem_bound(p_user) THEN RETURN; END IF;
        RETURN QUERY
            SELECT i.key, i.created_at,
                   coalesce(i.moved->>'status', i.value->>'status') = 'active'
            FROM langmem_items i
            WHERE i.user_id = p_user AND i.is_memory
              AND i.value -> 'source' ->> 'thread_id' = p_thread;
    END
    $fn$;
    """,
    # 33: the binding of a transaction's user (sql/rls.py ``bind``) as a function, so a
    # server can bind its own way: here the two settings, as the statement did before;
    # on Citus (sql/citus.py) as SET LOCAL commands, which Citus sends on to the workers
    # where the policies are checked (a set_config() stays on the coordinator).
    """
    CREATE OR REPLACE FUNCTION langmem_bind(p_user text, p_maintenance text)
    RETURNS text LANGUAGE sql VOLATILE AS $fn$
        SELECT set_config('langmem.user_id', p_user, true)
               || set_config('langmem.maintenance', p_maintenance, true)
    $fn$;
    """,
    # 34: a read of one user run by a function whose first argument is the user
    # (sql/citus.py ``on_shard``). The statement's text names its tables as format()
    # arguments and reads its values from one text[] parameter, so its text is the
    # same on every call: it is prepared once per session and kept, its plan cached as
    # any prepared statement's (``p_settings`` may say how: plan_cache_mode). Here the
    # tables are the tables; on Citus the function is distributed by the user and names
    # the user's shards, so the cluster sends the call to the worker holding them,
    # where the coordinator would plan the statement in full on every call.
    # ``p_settings``: name/value pairs set for the rest of the transaction first (an
    # HNSW walk's depth, which a set_config() on the coordinator would not carry to the
    # worker). As its caller: the caller's policies apply, and it runs only what the
    # caller could run itself. A session keeps at most 256 such statements.
    """
    CREATE OR REPLACE FUNCTION langmem_on_shard(
        p_user text, p_sql text, p_tables text[], p_args text[],
        p_settings text[] DEFAULT '{}')
    RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
        q text := format(p_sql, VARIADIC p_tables);
        n text := 'langmem_' || md5(q);
        s text;
    BEGIN
        FOR i IN 1 .. coalesce(array_length(p_settings, 1), 0) / 2 LOOP
            PERFORM set_config(p_settings[2 * i - 1], p_settings[2 * i], true);
        END LOOP;
        IF NOT EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = n) THEN
            IF (SELECT count(*) FROM pg_prepared_statements
                WHERE name LIKE 'langmem\\_%') >= 256 THEN
                FOR s IN SELECT name FROM pg_prepared_statements
                         WHERE name LIKE 'langmem\\_%' LOOP
                    EXECUTE format('DEALLOCATE %I', s);
                END LOOP;
            END IF;
            EXECUTE format('PREPARE %1$I(text[]) AS %2$s', n, q);
        END IF;
        RETURN QUERY EXECUTE format('EXECUTE %I(%L)', n, p_args);
    END
    $fn$;
    """,
    # 35: context vectors (store/ops/context.py): a memory remembered into a thread, embedded
    # with the memories before it in the thread, searched by recall's "context" strategy.
    # The memories whose words it holds are foreign keys, so deleting any of them deletes
    # the vector (the words leave with the memory; nothing else has to remember that).
    """
    CREATE TABLE IF NOT EXISTS langmem_context_vectors (
        user_id     text NOT NULL,
        prefix      text NOT NULL,
        key         text NOT NULL,
        model_id    text NOT NULL,
        dims        integer NOT NULL CHECK (dims > 0),
        embedding   vector NOT NULL,
        after_key   text NOT NULL,
        before_that text,
        created_at  timestamptz NOT NULL,
        PRIMARY KEY (user_id, prefix, key, model_id),
        FOREIGN KEY (user_id, prefix, key)
            REFERENCES langmem_items (user_id, prefix, key) ON DELETE CASCADE,
        FOREIGN KEY (user_id, prefix, after_key)
            REFERENCES langmem_items (user_id, prefix, key) ON DELETE CASCADE,
        FOREIGN KEY (user_id, prefix, before_that)
            REFERENCES langmem_items (user_id, prefix, key) ON DELETE CASCADE
    );
    CREATE INDEX IF NOT EXISTS langmem_context_vectors_after_idx
        ON langmem_context_vectors (user_id, prefix, after_key);
    CREATE INDEX IF NOT EXISTS langmem_context_vectors_before_idx
        ON langmem_context_vectors (user_id, prefix, before_that);
    """ + enable_rls(("langmem_context_vectors",)),
]
