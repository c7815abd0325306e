"""The ``langmem-layer`` command: schema setup, export/import of a user, TTL sweep,
the extraction worker and the idle-session sweep.

The database is ``--database-url`` (or ``LANGMEM_DATABASE_URL``); without one, the
embedded PostgreSQL in ``--data-dir`` (default ``.langmem``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from langmem_layer.layer import MemoryLayer
from langmem_layer.store.sync import PostgresMemoryStore

__all__ = ["main"]


def _open(args: argparse.Namespace, *, embed: bool) -> AbstractContextManager[PostgresMemoryStore]:
    index = "default" if embed else None
    if args.database_url:
        return PostgresMemoryStore.from_conn_string(args.database_url, index=index)
    return PostgresMemoryStore.embedded(args.data_dir, index=index)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="langmem-layer", description=__doc__)
    parser.add_argument("--database-url", default=os.environ.get("LANGMEM_DATABASE_URL"))
    parser.add_argument("--data-dir", default=os.environ.get("LANGMEM_DATA_DIR", ".langmem"))
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="create or upgrade the schema (idempotent)")
    exp = sub.add_parser("export", help="write a user's memory as JSON")
    exp.add_argument("user_id")
    exp.add_argument("-o", "--output", help="file (default: standard output)")
    imp = sub.add_parser("import", help="load a JSON export into a user (re-embeds)")
    imp.add_argument("user_id")
    imp.add_argument("file")
    sub.add_parser("sweep-ttl", help="delete items whose TTL has passed")
    sub.add_parser("purge-embedding-cache", help="delete cached embeddings over 30 days old")
    sess = sub.add_parser(
        "sweep-sessions",
        help="close threads idle past the session TTL (their turns go to extraction) "
        "and purge the message log past its retention")
    sess.add_argument("--ttl-hours", type=float, default=None,
                      help="idle time before a thread closes (default: the setting, 24)")
    sess.add_argument("--prune", choices=["off", "keep_latest", "delete"], default=None,
                      help="what happens to a closed thread's checkpoints (default: the "
                      "setting, off)")
    sess.add_argument("--extract", action="store_true",
                      help="extract the queued turns now instead of leaving them to a worker")
    work = sub.add_parser("worker", help="extract queued turns (until interrupted)")
    work.add_argument("--once", action="store_true", help="one pass over ready entries")
    work.add_argument("--interval", type=float, default=5.0, help="seconds between polls")
    args = parser.parse_args(argv)

    embed = args.command in ("import", "worker") or (
        args.command == "sweep-sessions" and args.extract)
    with _open(args, embed=embed) as store:
        if args.command == "setup":
            applied = store.setup()
            print(f"schema up to date; applied migrations: {applied or 'none'}")
        elif args.command == "sweep-ttl":
            print(f"deleted {store.sweep_ttl()} expired items")
        elif args.command == "purge-embedding-cache":
            print(f"deleted {store.purge_embedding_cache()} stale cached embeddings")
        elif args.command == "sweep-sessions":
            return _sweep_sessions(args, MemoryLayer(store, extraction="inline"))
        elif args.command == "worker":
            return _work(MemoryLayer(store, extraction="inline"), args.once, args.interval)
        else:
            layer = MemoryLayer(store, extraction="inline")
            if args.command == "export":
                text = json.dumps(layer.export(args.user_id), indent=2, ensure_ascii=False)
                if args.output:
                    Path(args.output).write_text(text + "\n", encoding="utf-8")
                else:
                    sys.stdout.write(text + "\n")
            else:
                data = json.loads(Path(args.file).read_text(encoding="utf-8"))
                print(f"imported {layer.import_(args.user_id, data)} items")
    return 0


def _sweep_sessions(args: argparse.Namespace, layer: MemoryLayer) -> int:
    """Run the session sweeper once with LangGraph's PostgresSaver on the same database."""
    from langmem_layer.working.sessions import postgres_checkpointer

    with postgres_checkpointer(args.database_url, data_dir=args.data_dir) as saver:
        result = layer.sweep_sessions(
            saver, prune=args.prune, extract=args.extract,
            ttl_seconds=None if args.ttl_hours is None else args.ttl_hours * 3600)
    print(f"closed {len(result.closed)} idle threads, queued {result.enqueued} turns for "
          f"extraction, pruned {len(result.pruned)}, failed {len(result.failed)}; "
          f"purged {result.purged_messages} logged messages past retention")
    return 1 if result.failed else 0


def _work(layer: MemoryLayer, once: bool, interval: float) -> int:
    """Drain the extraction queue, then poll; Ctrl-C stops after the current pass."""
    try:
        while True:
            result = layer.process_pending()
            if result.done or result.failed:
                print(f"extracted {len(result.done)} turns, {len(result.failed)} failed "
                      "(kept for retry)", flush=True)
            if once:
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
