"""The reflection jobs at scale: consolidation and reflections with the offline synthesizer.

``--users`` users (default 1,000) × 300 episodic memories over 120 simulated days, in
threads (sessions). Each user gets 19 planted topics (a topic is a dozen statements
about, say, "sourdough baking" in four sessions; 4 of them lie wholly before the 90-day
window and must not be consolidated), 6 planted paraphrase pairs ("Lives in Berlin." /
"Is based in Berlin these days.", in two sessions) and 60 one-off noise events.
Memories and vectors are bulk-loaded with COPY, the vectors computed with the local
all-MiniLM-L6-v2 once per distinct text; the jobs embed what they write with the same
model. Prints the jobs' throughput (users/s, memories/s), semantic records per user
against topics planted (precision and recall of consolidation), the paraphrase pairs
merged, the reflections written, and the memory-block tokens of a turn ("What did we
talk about last week?") without and with the temporal summaries (``summarize``), plus
the procedural profile's tokens. ``--jobs`` picks the jobs run (e.g. ``--jobs summarize``
for the summaries alone). Each job's line says how many texts the model embedded, how
many of them were distinct, in how many model calls, how many users were skipped
(nothing new since the job last ran for them), and the seconds spent in the model, the
bulk of a first run; ``--threads`` sets the local model's intra-op threads (on a shared
machine one thread beats two by far). Each job then runs again over the unchanged data
(``--no-rerun`` to leave that out): every user should be skipped, nothing embedded.
``--workers 2`` runs each job from two OS processes against the same database (the
scheduler's pass, ``run_due``, over more shards than workers) and checks from the
users' decision logs that every user was processed exactly once.

    .venv/bin/python benchmarks/reflection_bench.py [--users 1000] [--data-dir DIR]
        [--workers 2] [--no-rerun]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from common import add_noise_option, fresh_database, header, load_average, scratch_dir
from langchain_core.embeddings import Embeddings

from langmem_layer import MemoryLayer, MemorySettings, PostgresMemoryStore
from langmem_layer.jobs import JobContext, run, run_due
from langmem_layer.store.embedding.default_embedder import LOCAL_DIMS, LocalEmbeddings
from langmem_layer.synth import OfflineSynthesizer
from langmem_layer.types import Kind, Layer, MemoryRecord, Source

NOW = datetime(2026, 11, 18, 3, 0, tzinfo=UTC)
MODEL_ID = "all-MiniLM-L6-v2"

TOPICS = [
    ("sourdough baking", "sourdough"), ("marathon training", "marathon"),
    ("learning Japanese", "japanese"), ("home solar panels", "solar panels"),
    ("the kitchen renovation", "kitchen renovation"), ("birdwatching", "birdwatching"),
    ("the book club novel", "book club"), ("chess openings", "chess"),
    ("the garden vegetable beds", "vegetable garden"), ("a move to Lisbon", "lisbon"),
    ("the startup pitch deck", "pitch deck"), ("rock climbing", "climbing"),
    ("the wedding planning", "wedding"), ("saving for retirement", "retirement"),
    ("learning the piano", "piano"), ("the dog's training", "dog training"),
    ("photography composition", "photography"), ("the thesis on urban heat", "thesis"),
    ("Stoic philosophy", "stoicism"), ("woodworking a bookshelf", "woodworking"),
]
TEMPLATES = [
    "Asked how to get better at {t}.", "Spent the evening on {t} again.",
    "Compared two approaches to {t}.", "Wonders whether {t} is worth the time?",
    "Shared progress on {t} this week.", "Struggled with a detail of {t}.",
    "Read an article about {t}.", "Decided to keep going with {t} every weekend.",
    "Planned the next step for {t}.", "Got advice from a friend about {t}.",
    "Explained what they enjoy about {t}.", "Noticed a mistake they keep making in {t}.",
]
PAIRS = [
    ("Lives in Berlin.", "Is based in Berlin these days.", "berlin"),
    ("Works as a nurse.", "Is employed as a nurse at the hospital.", "nurse"),
    ("Has two cats.", "Owns a pair of cats.", "cats"),
    ("Is vegetarian.", "Doesn't eat meat at all.", "vegetarian"),
    ("Drives an old Volvo.", "Gets around in an aging Volvo.", "volvo"),
    ("Plays the cello.", "Is a cellist in an amateur orchestra.", "cello"),
    ("Grew up in Porto.", "Spent their childhood in Porto.", "porto"),
    ("Is allergic to peanuts.", "Has a peanut allergy.", "peanuts"),
    ("Studies law at night.", "Takes evening law classes.", "law school"),
    ("Supports Arsenal.", "Is an Arsenal fan.", "arsenal"),
    ("Speaks fluent Greek.", "Is fluent in Greek.", "greek"),
    ("Has a daughter named Mia.", "Is the father of a girl called Mia.", "mia"),
]
EVENTS = """fixed a leaking tap|bought new running shoes|missed the train to work|
watched a documentary about octopuses|had a dentist appointment|lost their umbrella|
cooked a curry for friends|got a parking ticket|upgraded the laptop's memory|
visited an aunt in hospital|found a wallet on the bus|painted the hallway blue|
signed up for a pottery class|returned a faulty kettle|went to a jazz concert|
cleaned out the garage|had a flat tyre on the motorway|tried a new ramen place|
renewed the passport|helped a neighbour move a sofa|set up a home printer|
got stung by a wasp|adopted a houseplant from a colleague|booked a dentist cleaning|
baked a birthday cake for a nephew|watched the football final|sold an old guitar|
had the boiler serviced|donated clothes to charity|got locked out of the flat|
attended a cousin's graduation|ordered a standing desk|took the ferry to an island|
replaced the bike chain|went to a wine tasting|had a job interview call|
caught a cold after the rain|organised the bookshelf by colour|visited a science museum|
fell asleep during a film|picked strawberries at a farm|bought a secondhand camera|
had a power cut in the evening|went ice skating|forgot a friend's birthday|
installed a smart thermostat|waited two hours at the airport|made homemade pasta|
went to a stand-up comedy show|repaired a broken chair|got a haircut|
walked the coastal path|spilled coffee on the keyboard|received a parcel from abroad|
played board games with neighbours|went to a farmers market|changed mobile provider|
watched the meteor shower|had lunch with a former boss|assembled flat-pack furniture""".replace(
    "\n", "").split("|")
CONTEXTS = ["on Monday", "at the weekend", "after work", "with a colleague", "in the rain",
            "early in the morning"]


#: Per user: topics planted (the first N_OLD before the window), paraphrase pairs.
N_TOPICS, N_OLD, N_PAIRS = 19, 4, 6


def plant(u: int, n: int, rng: random.Random) -> list[dict[str, Any]]:
    """One user's episodic memories: planted topics, paraphrase pairs, noise events."""
    rows: list[dict[str, Any]] = []
    thread = 0

    def add(content: str, day: float, th: int, label: str, ref: str | None) -> None:
        rows.append({"content": content, "at": NOW - timedelta(days=day),
                     "thread": f"u{u}-t{th}", "label": label, "refs": [ref] if ref else []})

    topics = rng.sample(range(len(TOPICS)), N_TOPICS)
    for n_topic, ti in enumerate(topics):
        name, ref = TOPICS[ti]
        # The first few topics lie before the 90-day window: planted, not to be consolidated.
        old = n_topic < N_OLD
        lo, hi = (95, 120) if old else (0, 88)
        texts = rng.sample(TEMPLATES, 12)
        for s in range(4):
            day = rng.uniform(lo, hi)
            thread += 1
            for text in texts[s * 3:s * 3 + 3]:
                add(text.format(t=name), day, thread, f"topic:{ti}:{'old' if old else 'new'}",
                    ref if rng.random() < 0.5 else None)
    for pi in rng.sample(range(len(PAIRS)), N_PAIRS):
        a, b, ref = PAIRS[pi]
        for text in (a, b):
            thread += 1
            add(text, rng.uniform(0, 85), thread, f"pair:{pi}",
                ref if rng.random() < 0.5 else None)
    # Noise: each event once per user, in a session of its own, so it never recurs.
    for event in rng.sample(EVENTS, len(EVENTS)):
        thread += 1
        add(f"{event.strip().capitalize()} {rng.choice(CONTEXTS)}.", rng.uniform(0, 120),
            thread, "noise", None)
    return rows[:n]


def distinct_texts() -> list[str]:
    texts = {t.format(t=name) for name, _ in TOPICS for t in TEMPLATES}
    texts |= {p for a, b, _ in PAIRS for p in (a, b)}
    texts |= {f"{e.strip().capitalize()} {c}." for e in EVENTS for c in CONTEXTS}
    return sorted(texts)


def load(uri: str, users: int, n: int, vectors: dict[str, str]) -> dict[str, str]:
    """COPY every user's memories and vectors in; returns each key's planted label."""
    rng = random.Random(11)
    labels: dict[str, str] = {}
    with psycopg.connect(uri) as conn:
        for u in range(users):
            uid = f"user-{u:05d}"
            prefix = f"memories.{uid}.work"
            planted = plant(u, n, rng)
            with conn.cursor().copy(
                    "COPY langmem_items (user_id, prefix, key, value, is_memory, search_text, "
                    "created_at, updated_at) FROM STDIN") as items:
                keys = []
                for row in planted:
                    key = str(uuid.UUID(int=rng.getrandbits(128)))
                    keys.append(key)
                    labels[key] = row["label"]
                    rec = MemoryRecord(content=row["content"], kind=Kind.EPISODIC_EVENT,
                                       layer=Layer.EPISODIC, occurred_at=row["at"],
                                       last_accessed_at=row["at"], refs=row["refs"],
                                       source=Source(thread_id=row["thread"]))
                    items.write_row((uid, prefix, key, json.dumps(rec.to_value()), True,
                                     row["content"], row["at"], row["at"]))
            with conn.cursor().copy(
                    "COPY langmem_embeddings (user_id, prefix, key, model_id, field, dims, "
                    "embedding, created_at) FROM STDIN") as embs:
                for key, row in zip(keys, planted, strict=True):
                    embs.write_row((uid, prefix, key, MODEL_ID, "content", LOCAL_DIMS,
                                    vectors[row["content"]], NOW))
            if u % 100 == 99:
                conn.commit()
                print(f"  loaded {u + 1} users", file=sys.stderr)
        conn.commit()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE langmem_items")
        conn.execute("VACUUM ANALYZE langmem_embeddings")
    return labels


def evaluate(uri: str, labels: dict[str, str]) -> dict[str, Any]:
    """Precision and recall of consolidation against the planted labels."""
    with psycopg.connect(uri) as conn:
        recs = conn.execute(
            "SELECT user_id, key, value FROM langmem_items WHERE is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = 'consolidation' "
            "AND value ->> 'status' = 'active'").fetchall()
        reflections = conn.execute(
            "SELECT count(*), avg(jsonb_array_length(value -> 'metadata' -> 'evidence')) "
            "FROM langmem_items WHERE is_memory "
            "AND value -> 'metadata' ->> 'synthesis' = 'reflection'").fetchone()
    found: set[tuple[str, str]] = set()
    tp = fp = 0
    merged_pairs = 0
    sample_text = ""
    for user, _key, value in recs:
        ev = value["metadata"]["evidence"]
        counts = Counter(labels.get(k, "noise") for k in ev)
        label, n = counts.most_common(1)[0]
        if label != "noise" and n * 2 > len(ev) and (user, label) not in found:
            tp += 1
            found.add((user, label))
            if label.startswith("pair:") and n == 2:
                merged_pairs += 1
            if label.endswith(":new") and not sample_text:
                sample_text = value["content"]
        else:
            fp += 1
    return {"records": len(recs), "tp": tp, "fp": fp, "found": found,
            "merged_pairs": merged_pairs, "reflections": reflections, "sample": sample_text}


class TimedEmbeddings(Embeddings):
    """The model the store embeds with, counting the texts, the distinct texts, the
    calls and the seconds spent in it."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.texts = 0
        self.calls = 0
        self.distinct: set[str] = set()
        self.seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        t = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.texts += len(texts)
            self.calls += 1
            self.distinct.update(texts)
            self.seconds += time.perf_counter() - t

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def take(self) -> dict[str, Any]:
        """Texts, distinct texts, model calls and seconds since the last call."""
        out = {"texts": self.texts, "distinct": len(self.distinct), "calls": self.calls,
               "seconds": self.seconds}
        self.texts, self.calls, self.distinct, self.seconds = 0, 0, set(), 0.0
        return out


def job_line(job: str, users: int, took: float, memories: int, counts: dict[str, int],
             tokens: int, emb: dict[str, Any], label: str = "") -> str:
    """One job's line: throughput, outcomes, and what the model embedded (in counts)."""
    return (f"{job}{label}: {users} users in {took:.1f} s = {users / max(took, 1e-9):.1f} users/s, "
            f"{memories / max(took, 1e-9):,.0f} memories/s; outcomes {counts}, {tokens} tokens; "
            f"embedded {emb['texts']} texts ({emb['distinct']} distinct) in {emb['calls']} "
            f"model calls, {counts.get('skipped', 0)} users skipped; "
            f"{emb['seconds']:.1f} s in the model "
            f"({emb['seconds'] / max(took, 1e-9):.0%} of the job)")


def worker(uri: str, job: str, shards: int, threads: int | None) -> int:
    """One worker process of ``--workers``: the scheduler's pass over ``job``'s shards
    (``run_due``), taking each shard no other worker holds; prints what it did as
    one JSON line."""
    timed = TimedEmbeddings(LocalEmbeddings(threads=threads))
    index = {"embed": timed, "dims": LOCAL_DIMS, "model_id": MODEL_ID}
    with PostgresMemoryStore.from_conn_string(uri, index=index) as store:  # type: ignore[arg-type]
        ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
        ran = run_due(ctx, now=NOW, jobs=[job], shards=shards)
    print(json.dumps({"runs": [{"shard": r.shard, "users": r.users, "counts": r.counts}
                               for r in ran], "embedding": timed.take()}), flush=True)
    return 0


def run_workers(uri: str, job: str, workers: int, threads: int | None
                ) -> list[dict[str, Any]]:
    """``workers`` OS processes running ``job`` against the same database at once."""
    import subprocess

    shards = 4 * workers  # more shards than workers, so that they share them
    cmd = [sys.executable, __file__, "--worker-uri", uri, "--worker-job", job,
           "--shards", str(shards)]
    if threads:
        cmd += ["--threads", str(threads)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
             for _ in range(workers)]
    out = []
    for p in procs:
        stdout, _ = p.communicate()
        if p.returncode:
            raise SystemExit(f"a worker of {job} failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def processed_once(uri: str, job: str, users: int) -> tuple[int, int, int]:
    """Users whose decision log has exactly one entry of ``job``, more than one, none."""
    with psycopg.connect(uri) as conn:
        rows = conn.execute("SELECT user_id, count(*) FROM langmem_ingest_log "
                            "WHERE agent_id = %s GROUP BY user_id", (f"job:{job}",)).fetchall()
    once = sum(1 for _, n in rows if n == 1)
    twice = sum(1 for _, n in rows if n > 1)
    return once, twice, users - len(rows)


QUESTION = "What did we talk about last week?"


def block_tokens(layer: MemoryLayer, users: Sequence[str]) -> float:
    """Mean tokens of the memory block of a turn asking about last week."""
    sizes = [layer.context_block(u, QUESTION, profile="work", now=NOW).tokens for u in users]
    return sum(sizes) / max(1, len(sizes))


def profile_tokens(layer: MemoryLayer, users: Sequence[str]) -> float:
    """Mean tokens of the users' procedural profiles."""
    from langmem_layer.store.ops import FindMemoryOp
    from langmem_layer.write.profile_record import profile_key

    lookups: list[Any] = [FindMemoryOp(u, profile_key(u, "work")) for u in users]
    found: list[Any] = list(layer.store.batch(lookups))
    sizes = [layer.env.counter.count(item.value["content"]) for item in found if item]
    return sum(sizes) / max(1, len(sizes))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--memories", type=int, default=300, help="episodic memories per user")
    ap.add_argument("--data-dir", help="embedded server directory (default: a temporary one)")
    ap.add_argument("--jobs", default="consolidate,reflect,summarize,procedural-profile",
                    help="comma-separated jobs to run (default all four)")
    ap.add_argument("--threads", type=int,
                    help="intra-op threads of the local model (default: one per core)")
    ap.add_argument("--workers", type=int, default=1,
                    help="run each job from this many OS processes sharing the users "
                    "(shards), and check every user was processed exactly once")
    ap.add_argument("--rerun", action=argparse.BooleanOptionalAction, default=True,
                    help="run each job a second time over the unchanged data (default on)")
    ap.add_argument("--worker-uri", help=argparse.SUPPRESS)
    ap.add_argument("--worker-job", help=argparse.SUPPRESS)
    ap.add_argument("--shards", type=int, default=1, help=argparse.SUPPRESS)
    add_noise_option(ap)
    args = ap.parse_args(argv)
    if args.worker_uri:
        return worker(args.worker_uri, args.worker_job, args.shards, args.threads)
    header("reflection_bench", allow_noisy=args.allow_noisy)
    jobs = [j.strip() for j in args.jobs.split(",") if j.strip()]
    with scratch_dir(args.data_dir, "langmem-reflection-bench-") as data_dir:
        uri = fresh_database(data_dir, "langmem_reflection_bench")
        embedder = LocalEmbeddings(threads=args.threads)
        texts = distinct_texts()
        t = time.perf_counter()
        cache = data_dir / "reflection_bench_vectors.json"
        vectors = json.loads(cache.read_text()) if cache.exists() else {}
        if set(vectors) != set(texts):
            vecs = embedder.embed_documents(texts)
            vectors = {s: "[" + ",".join(f"{x:.6g}" for x in v) + "]"
                       for s, v in zip(texts, vecs, strict=True)}
            cache.write_text(json.dumps(vectors))
        print(f"embedded {len(texts)} distinct texts in {time.perf_counter() - t:.1f} s",
              flush=True)
        timed = TimedEmbeddings(embedder)
        index = {"embed": timed, "dims": LOCAL_DIMS, "model_id": MODEL_ID}
        with PostgresMemoryStore.from_conn_string(
                uri, index=index) as store:  # type: ignore[arg-type]
            store.setup()
            t = time.perf_counter()
            labels = load(uri, args.users, args.memories, vectors)
            print(f"loaded {args.users} users x {args.memories} episodic memories "
                  f"({len(labels)}) in {time.perf_counter() - t:.1f} s (COPY)")
            ctx = JobContext(store, settings=MemorySettings(), synthesizer=OfflineSynthesizer())
            layer = MemoryLayer(store, settings=MemorySettings(), extraction="inline")
            probe = [f"user-{u:05d}" for u in range(min(args.users, 20))]
            for job in jobs:
                if job == "summarize":
                    without = block_tokens(layer, probe)
                timed.take()
                t = time.perf_counter()
                if args.workers > 1:
                    done = run_workers(uri, job, args.workers, args.threads)
                    took = time.perf_counter() - t
                    counts: Counter[str] = Counter()
                    emb: dict[str, Any] = Counter()
                    for n, w in enumerate(done):
                        for r in w["runs"]:
                            counts.update(r["counts"])
                        emb.update(w["embedding"])
                        print(f"  worker {n + 1}: shards "
                              f"{', '.join(r['shard'] for r in w['runs']) or 'none'}, "
                              f"{sum(r['users'] for r in w['runs'])} users")
                    n_users = sum(r["users"] for w in done for r in w["runs"])
                    # Distinct texts are counted per worker; their sum is an upper bound.
                    print(job_line(job, n_users, took, len(labels), dict(counts), 0, emb,
                                   f" ({args.workers} workers)"), flush=True)
                    once, twice, missed = processed_once(uri, job, args.users)
                    print(f"{job}: users processed exactly once {once} of {args.users}, "
                          f"twice or more {twice}, missed {missed}: "
                          f"{'OK' if once == args.users else 'FAILED'}", flush=True)
                else:
                    result = run(ctx, job, now=NOW)
                    took = time.perf_counter() - t
                    print(job_line(job, result.users, took, len(labels), dict(result.counts),
                                   result.tokens, timed.take()), flush=True)
                if args.rerun:
                    t = time.perf_counter()
                    again = run(ctx, job, now=NOW, force=True)
                    took = time.perf_counter() - t
                    print(job_line(job, again.users, took, len(labels), dict(again.counts),
                                   again.tokens, timed.take(), " (again, data unchanged)"),
                          flush=True)
                if job == "summarize":
                    with_ = block_tokens(layer, probe)
                    print(f"memory block of a turn asking about last week, mean over "
                          f"{len(probe)} users: {without:.0f} tokens without the summaries, "
                          f"{with_:.0f} with (budget {layer.settings.context_budget_tokens})")
                if job == "procedural-profile":
                    print(f"procedural profile: {profile_tokens(layer, probe):.0f} tokens "
                          f"per user (always loaded)")
            layer.close()
        if "consolidate" not in jobs:
            return 0
        ev = evaluate(uri, labels)
        planted_new = (N_TOPICS - N_OLD) * args.users  # topics inside the window
        planted_pairs = N_PAIRS * args.users
        expected = planted_new + planted_pairs
        print(f"semantic records: {ev['records']} = {ev['records'] / args.users:.2f} per user; "
              f"planted and eligible: {expected / args.users:.0f} per user "
              f"({N_TOPICS - N_OLD} topics in the 90-day window + {N_PAIRS} paraphrase pairs; "
              f"{N_OLD} older topics not eligible)")
        print(f"consolidation precision {ev['tp'] / max(1, ev['records']):.3f} "
              f"({ev['tp']} records match one planted topic or pair, {ev['fp']} do not), "
              f"recall {ev['tp'] / expected:.3f}")
        old = sum(1 for _, label in ev["found"] if label.endswith(":old"))
        print(f"old topics (outside the window) consolidated: {old}")
        print(f"paraphrase pairs merged into one record: {ev['merged_pairs']} of "
              f"{planted_pairs} ({ev['merged_pairs'] / planted_pairs:.1%})")
        n_ref, avg_ev = ev["reflections"]
        print(f"reflections: {n_ref} = {n_ref / args.users:.2f} per user, "
              f"{float(avg_ev or 0):.1f} pieces of evidence each")
        print(f"a consolidated record: {ev['sample']!r}")
        print(f"model: {embedder.describe()}")
        print(f"load average now: {' '.join(f'{x:.2f}' for x in load_average())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
