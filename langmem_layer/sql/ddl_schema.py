"""Migrations 0–13: the base schema (items, embeddings, links, the extraction queue, the
embedding cache, per-user indexes, working memory, the large-user read path).

Part of the append-only list ``langmem_layer.sql.migrations.MIGRATIONS``: never edit
or reorder an entry that has shipped. New migrations go at the end of
``langmem_layer.sql.ddl_features``.
"""

from __future__ import annotations

__all__ = ["SCHEMA", "VERSION_TABLE"]

VERSION_TABLE = "langmem_migrations"

SCHEMA: list[str] = [
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
    # a new model can be backfilled while the old one serves.
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
    # 3: typed links between memories. Memory keys are unique per user.
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
    # 5: the durable extraction queue. A turn waits here until extracted; a
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
    # 6: operations already applied, so re-applying a batch changes nothing, and
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
    # 7: embedding cache by (content hash, model), per user, kept 30 days.
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
    # 8: per-user ANN indexes. A user with many vectors gets an HNSW index of their own
    # (a partial index on user_id and model_id): searches inside it need no filtering
    # after the scan, and small users' writes never pay for HNSW upkeep.
    """
    CREATE TABLE IF NOT EXISTS langmem_vector_indexes (
        user_id    text NOT NULL,
        model_id   text NOT NULL,
        dims       integer NOT NULL,
        index_name text NOT NULL,
        created_at timestamptz NOT NULL,
        PRIMARY KEY (user_id, model_id)
    );
    -- Nearest neighbours through a user's own index. EXECUTE plans with the literal
    -- user and model, so the partial index's predicate always matches; the SET clauses
    -- hold only while the function runs: no sort plan (a filter inside the user can
    -- make the planner think a sort is cheaper), and an iterative scan that keeps
    -- walking the graph until enough rows pass the namespace filter.
    CREATE OR REPLACE FUNCTION langmem_user_nearest(
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
            'SELECT e.prefix, e.key, 1 - (e.embedding::vector(%1$s) <=> $1::vector(%1$s))
             FROM langmem_embeddings e
             WHERE e.user_id = %2$L AND e.model_id = %3$L
               AND ($2 IS NULL OR e.prefix = $2 OR e.prefix LIKE $3)
             ORDER BY e.embedding::vector(%1$s) <=> $1::vector(%1$s)
             LIMIT $4',
            p_dims, p_user, p_model)
        USING p_query, p_prefix, p_prefix_like, p_limit;
    END
    $fn$;
    """,
    # 9: working memory. Thread activity, so the session sweeper finds threads idle
    # past the TTL and whose they are (the checkpointer's tables know no user); and the
    # per-user message log across threads (the long-term tier, kept 90 days).
    """
    CREATE TABLE IF NOT EXISTS langmem_threads (
        user_id        text NOT NULL,
        thread_id      text NOT NULL,
        profile        text NOT NULL,
        agent_id       text,
        created_at     timestamptz NOT NULL,
        last_active_at timestamptz NOT NULL,
        closed_at      timestamptz,
        PRIMARY KEY (user_id, thread_id)
    );
    CREATE INDEX IF NOT EXISTS langmem_threads_idle_idx
        ON langmem_threads (last_active_at) WHERE closed_at IS NULL;
    CREATE TABLE IF NOT EXISTS langmem_messages (
        user_id    text NOT NULL,
        id         bigint GENERATED ALWAYS AS IDENTITY,
        thread_id  text NOT NULL,
        message_id text NOT NULL,
        profile    text NOT NULL,
        role       text NOT NULL,
        text       text NOT NULL,
        at         timestamptz NOT NULL,
        PRIMARY KEY (user_id, id),
        UNIQUE (user_id, thread_id, message_id)
    );
    CREATE INDEX IF NOT EXISTS langmem_messages_recent_idx
        ON langmem_messages (user_id, profile, at DESC);
    CREATE INDEX IF NOT EXISTS langmem_messages_age_idx ON langmem_messages (at);
    -- the user's avoid memories, whose source turns never come back as recent history
    CREATE INDEX IF NOT EXISTS langmem_items_avoid_idx ON langmem_items (user_id)
        WHERE is_memory AND (value ->> 'policy') = 'avoid';
    """,
    # 10: the large-user read path (issue: read p95 at 100k memories for one user).
    # Per-(user, scope) document frequencies of lexemes, kept by triggers in the writing
    # transaction, so BM25 reads df and N (the '' row counts the scope's memories)
    # instead of counting a large user's matches at query time. Pinned memories and open
    # loops get partial indexes: recall looks them up on every turn. The time window
    # gets an index on occurred_at, and a thread's newest memory (the write path links
    # the thread's next one to it) an index on the source thread.
    """
    CREATE TABLE IF NOT EXISTS langmem_terms (
        user_id text NOT NULL,
        prefix  text NOT NULL,
        lexeme  text NOT NULL,
        df      bigint NOT NULL,
        PRIMARY KEY (user_id, prefix, lexeme)
    );
    CREATE OR REPLACE FUNCTION langmem_terms_of(p_tsv tsvector) RETURNS SETOF text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
    $fn$ SELECT unnest(tsvector_to_array(p_tsv)) UNION ALL SELECT '' $fn$;
    CREATE OR REPLACE FUNCTION langmem_terms_add() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        -- sorted, so concurrent writers of one user take the row locks in one order
        INSERT INTO langmem_terms AS t (user_id, prefix, lexeme, df)
        SELECT n.user_id, n.prefix, l.lexeme, count(*)
        FROM new_rows n CROSS JOIN LATERAL langmem_terms_of(n.tsv) AS l(lexeme)
        WHERE n.is_memory
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (user_id, prefix, lexeme) DO UPDATE SET df = t.df + EXCLUDED.df;
        RETURN NULL;
    END $fn$;
    CREATE OR REPLACE FUNCTION langmem_terms_remove() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        UPDATE langmem_terms t SET df = t.df - d.n
        FROM (SELECT o.user_id, o.prefix, l.lexeme, count(*) AS n
              FROM old_rows o CROSS JOIN LATERAL langmem_terms_of(o.tsv) AS l(lexeme)
              WHERE o.is_memory
              GROUP BY 1, 2, 3 ORDER BY 1, 2, 3) d
        WHERE t.user_id = d.user_id AND t.prefix = d.prefix AND t.lexeme = d.lexeme;
        RETURN NULL;
    END $fn$;
    CREATE OR REPLACE FUNCTION langmem_terms_change() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF OLD.is_memory THEN
            UPDATE langmem_terms t SET df = t.df - 1
            WHERE t.user_id = OLD.user_id AND t.prefix = OLD.prefix
              AND t.lexeme IN (SELECT langmem_terms_of(OLD.tsv));
        END IF;
        IF NEW.is_memory THEN
            INSERT INTO langmem_terms AS t (user_id, prefix, lexeme, df)
            SELECT NEW.user_id, NEW.prefix, l.lexeme, 1
            FROM langmem_terms_of(NEW.tsv) AS l(lexeme) ORDER BY 3
            ON CONFLICT (user_id, prefix, lexeme) DO UPDATE SET df = t.df + 1;
        END IF;
        RETURN NULL;
    END $fn$;
    CREATE OR REPLACE FUNCTION langmem_terms_reset() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM langmem_terms;
        RETURN NULL;
    END $fn$;
    DROP TRIGGER IF EXISTS langmem_terms_truncate ON langmem_items;
    CREATE TRIGGER langmem_terms_truncate AFTER TRUNCATE ON langmem_items
        FOR EACH STATEMENT EXECUTE FUNCTION langmem_terms_reset();
    DROP TRIGGER IF EXISTS langmem_terms_insert ON langmem_items;
    CREATE TRIGGER langmem_terms_insert AFTER INSERT ON langmem_items
        REFERENCING NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION langmem_terms_add();
    DROP TRIGGER IF EXISTS langmem_terms_delete ON langmem_items;
    CREATE TRIGGER langmem_terms_delete AFTER DELETE ON langmem_items
        REFERENCING OLD TABLE AS old_rows
        FOR EACH STATEMENT EXECUTE FUNCTION langmem_terms_remove();
    DROP TRIGGER IF EXISTS langmem_terms_update ON langmem_items;
    CREATE TRIGGER langmem_terms_update AFTER UPDATE OF search_text, is_memory ON langmem_items
        FOR EACH ROW WHEN (OLD.tsv IS DISTINCT FROM NEW.tsv
                           OR OLD.is_memory IS DISTINCT FROM NEW.is_memory)
        EXECUTE FUNCTION langmem_terms_change();
    -- A large user's memories matching a full-text query. EXECUTE plans with the user
    -- as a literal, so the user's own partial GIN index (made with their HNSW index) is
    -- used instead of the shared one.
    CREATE OR REPLACE FUNCTION langmem_user_matches(
        p_user text, p_query tsquery, p_prefixes text[], p_statuses text[],
        p_now timestamptz, p_limit integer)
    RETURNS TABLE (prefix text, key text, tsv tsvector)
    LANGUAGE plpgsql STABLE AS $fn$
    BEGIN
        RETURN QUERY EXECUTE format(
            'SELECT i.prefix, i.key, i.tsv FROM langmem_items i
             WHERE i.user_id = %L AND i.is_memory AND i.tsv @@ $1
               AND i.prefix = ANY($2) AND i.value->>''status'' = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)
             LIMIT $5', p_user)
        USING p_query, p_prefixes, p_statuses, p_now, p_limit;
    END
    $fn$;
    -- absolute counts, so running this entry again changes nothing
    INSERT INTO langmem_terms AS t (user_id, prefix, lexeme, df)
    SELECT i.user_id, i.prefix, l.lexeme, count(*)
    FROM langmem_items i CROSS JOIN LATERAL langmem_terms_of(i.tsv) AS l(lexeme)
    WHERE i.is_memory
    GROUP BY 1, 2, 3
    ON CONFLICT (user_id, prefix, lexeme) DO UPDATE SET df = EXCLUDED.df;
    CREATE INDEX IF NOT EXISTS langmem_items_pinned_idx ON langmem_items (user_id, updated_at)
        WHERE is_memory AND (value -> 'pinned') = 'true'::jsonb;
    CREATE INDEX IF NOT EXISTS langmem_items_open_loops_idx ON langmem_items (user_id)
        WHERE is_memory AND (value ->> 'kind') = 'open_loop'
          AND coalesce(value ->> 'loop_status', 'open') <> 'closed';
    CREATE INDEX IF NOT EXISTS langmem_items_thread_idx
        ON langmem_items (user_id, (value -> 'source' ->> 'thread_id'), created_at)
        WHERE is_memory;
    CREATE INDEX IF NOT EXISTS langmem_items_occurred_idx
        ON langmem_items (user_id, (value ->> 'occurred_at')) WHERE is_memory;
    """,
    # 11: references indexed per user. The shared index on value -> 'refs' finds every
    # user's memories naming "bob" and leaves the user to a second index; this one
    # holds 'user.ref' elements (user ids have no '.'), so a lookup reads only the
    # user's own matches.
    """
    CREATE OR REPLACE FUNCTION langmem_user_refs(p_user text, p_refs jsonb)
    RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
        SELECT coalesce(array_agg(p_user || '.' || r), '{}')
        FROM jsonb_array_elements_text(
            CASE WHEN jsonb_typeof(p_refs) = 'array' THEN p_refs ELSE '[]' END) r
    $fn$;
    -- A short pending list: every lookup scans it, and reinforcement rewrites rows.
    CREATE INDEX IF NOT EXISTS langmem_items_user_refs_idx
        ON langmem_items USING gin (langmem_user_refs(user_id, value -> 'refs'))
        WITH (gin_pending_list_limit = 256) WHERE is_memory;
    DROP INDEX IF EXISTS langmem_items_refs_idx;
    -- A large user's memories naming any of p_user_refs (each 'user.ref'). Like
    -- langmem_user_matches, EXECUTE plans for these values: a generic plan would AND
    -- the lookup with a scan of the user's whole prefix index.
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
               AND i.prefix = ANY($2) AND i.value->>''status'' = ANY($3)
               AND (i.expires_at IS NULL OR i.expires_at > $4)', p_user)
        USING p_user_refs, p_prefixes, p_statuses, p_now;
    END
    $fn$;
    """,
    # 12: large users' keyword indexes without a pending list (see
    # sql/vector.create_user_keyword_index); the entries already pending are merged.
    """
    DO $do$
    DECLARE r record;
    BEGIN
        FOR r IN SELECT x.index_name || '_kw' AS kw FROM langmem_vector_indexes x
                 WHERE to_regclass(quote_ident(x.index_name || '_kw')) IS NOT NULL LOOP
            EXECUTE format('ALTER INDEX %I SET (fastupdate = off)', r.kw);
            PERFORM gin_clean_pending_list(quote_ident(r.kw)::regclass);
        END LOOP;
    END
    $do$;
    """,
    # 13: reinforcement writes a memory's access_count and last_accessed_at to
    # their own unindexed column, which readers lay over the value (sql/generic_items.VALUE).
    # Rewriting the indexed value made every recall's UPDATE insert new entries into
    # every index of the row (its full-text ones included); changing only this column
    # lets PostgreSQL update in place (HOT), given free room on the page: fillfactor.
    """
    ALTER TABLE langmem_items ADD COLUMN IF NOT EXISTS access jsonb;
    ALTER TABLE langmem_items SET (fillfactor = 90);
    """,
]
