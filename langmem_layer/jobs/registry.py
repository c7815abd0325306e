"""The job registry: every periodic maintenance task, by name.

A whole-store job is a named call to a public method of the store or of
``MemoryLayer`` (``store.sweep_ttl()``, ``layer.threads.sweep_sessions(...)`` ...). A
per-user job (``per_user=True``) is a function of one user::

    @register("count-memories", "count each user's memories", schedule="daily",
              per_user=True)
    def count_memories(ctx: JobContext, user_id: str, *, now: datetime,
                       dry_run: bool = False) -> dict[str, int]:
        rows = ctx.execute(("SELECT count(*) AS n FROM langmem_items "
                            "WHERE user_id = %(user_id)s", {"user_id": user_id}))
        return {"counted": rows[0]["n"]}

which ``langmem_layer.jobs.runs`` calls once per user, each call in a
transaction of its own that also records the user as done. Either kind runs from
``langmem-layer jobs run NAME``, the ``langmem-layer worker`` schedule, the ``jobs``
LangGraph graph, or code; registering it here is what makes it appear in
``langmem-layer jobs list`` and runnable by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from langmem_layer.errors import ConfigurationError

if TYPE_CHECKING:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from langmem_layer.facade import MemoryLayer
    from langmem_layer.settings import MemorySettings
    from langmem_layer.store.sync import PostgresMemoryStore
    from langmem_layer.synth.synthesizer import Synthesizer

__all__ = ["JOBS", "Job", "JobContext", "JobOption", "JobResult", "register"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class JobContext:
    """What a job runs against: a store, and a ``MemoryLayer`` built on first use.

    Store-level jobs only touch ``store``; flow-level jobs ask for ``layer``,
    which is built lazily so that store jobs never construct an extractor. The runner
    hands a per-user job a context bound to the connection of the user's transaction:
    its ``execute``, ``store`` and ``layer`` all write in that transaction.

    Args:
        store: The open store.
        database_url: The URL the store was opened on (None: resolved by
            ``langmem_layer.environment``); flow jobs open their checkpointer on it.
        data_dir: The embedded server's directory when no URL is set.
        settings: Settings for the layer (default: ``config.settings_from_env``).
        layer: A ready layer to use instead of building one.
        synthesizer: What the reflection jobs synthesize with (default:
            ``langmem_layer.environment.default_synthesizer``, resolved on first use).
    """

    def __init__(self, store: PostgresMemoryStore, *, database_url: str | None = None,
                 data_dir: str | Path | None = None, settings: MemorySettings | None = None,
                 layer: MemoryLayer | None = None, synthesizer: Synthesizer | None = None
                 ) -> None:
        self.store = store
        self.database_url = database_url
        self.data_dir = data_dir
        self.settings = settings
        self._layer = layer
        self.synthesizer = synthesizer
        #: The connection the runner bound this context to (None: the store's own).
        self.conn: psycopg.Connection[Any] | None = None
        #: Where a job that defers its writes (``Job.defers_writes``) leaves the ops
        #: of its final store batch instead of applying them, when the runner asks for
        #: it (None: apply them). See ``langmem_layer.jobs.batching``.
        self.deferred: list[Any] | None = None

    def execute(self, query: tuple[str, Any]) -> list[dict[str, Any]]:
        """Run one ``(sql, params)`` statement (a builder of ``langmem_layer.sql``).

        In a per-user job it runs in the user's transaction, so it commits with the
        user's cursor advance or not at all. Returns the rows (empty for a statement
        that returns none).
        """
        sql, params = query
        if self.conn is not None:
            return _execute(self.conn, sql, params)
        with self.store.connection() as conn:
            return _execute(conn, sql, params)

    @property
    def layer(self) -> MemoryLayer:
        """The ``MemoryLayer`` on ``store`` (inline extraction), built once."""
        if self._layer is None:
            from langmem_layer.environment import settings_from_env
            from langmem_layer.facade import MemoryLayer

            # Inline: a job runs to completion in this process; no worker thread.
            self._layer = MemoryLayer(self.store, settings=self.settings or settings_from_env(),
                                      extraction="inline")
        return self._layer

    def checkpointer(self) -> AbstractContextManager[PostgresSaver]:
        """LangGraph's ``PostgresSaver`` on the same database (tables set up)."""
        from langmem_layer.working.sessions import postgres_checkpointer

        return postgres_checkpointer(self.database_url, data_dir=self.data_dir)


def _execute(conn: psycopg.Connection[Any], sql: str, params: Any) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description else []


@dataclass(frozen=True, slots=True)
class JobOption:
    """One keyword option a job takes.

    Attributes:
        name: The keyword (``ttl_hours``); the command line spells it ``--ttl-hours``.
        type: ``int``, ``float``, ``str`` or ``bool`` (a flag on the command line).
        help: One line for ``--help``.
        choices: The allowed values, if limited.
        needs_embeddings: When the option is truthy the job embeds (e.g. it extracts),
            so the store must be opened with an embedding index.
    """

    name: str
    type: type = str
    help: str = ""
    choices: tuple[str, ...] | None = None
    needs_embeddings: bool = False

    @property
    def flag(self) -> str:
        """The command-line spelling, ``--ttl-hours`` for ``ttl_hours``."""
        return "--" + self.name.replace("_", "-")

    def parse(self, text: str) -> Any:
        """Convert a command-line string to the option's type.

        Raises:
            ConfigurationError: The text is not a value of the option's type or choices.
        """
        value: Any
        try:
            if self.type is bool:
                if text.lower() not in _TRUE | _FALSE:
                    raise ValueError(text)
                value = text.lower() in _TRUE
            else:
                value = self.type(text)
        except ValueError:
            raise ConfigurationError(
                f"Option {self.name} takes a value of type {self.type.__name__}, got {text!r}."
            ) from None
        if self.choices is not None and value not in self.choices:
            raise ConfigurationError(
                f"Option {self.name} is one of {', '.join(self.choices)}; got {text!r}.")
        return value


@dataclass(slots=True)
class JobResult:
    """What one run of a job did.

    Attributes:
        job: The job's name.
        counts: How many things ended in each outcome (``{"deleted": 3}``); the
            ``"failed"`` count, when present, makes the run a failure.
        template: The line ``summary`` prints, formatted with ``counts``;
            empty for the generic ``name: 3 deleted`` form.
        detail: The underlying method's own result (users indexed, a
            ``SessionSweep``, a ``ProcessResult`` ...), for callers in code.
    """

    job: str
    counts: dict[str, int] = field(default_factory=dict)
    template: str = ""
    detail: Any = None

    @property
    def failed(self) -> int:
        """How many things failed (0 when the job succeeded)."""
        return self.counts.get("failed", 0)

    def summary(self) -> str:
        """One line for a log or a terminal."""
        if self.template:
            return self.template.format(**self.counts)
        outcomes = ", ".join(f"{n} {outcome}" for outcome, n in self.counts.items())
        return f"{self.job}: {outcomes or 'nothing to do'}"


#: ``fn(ctx, *, now, **options) -> JobResult`` for a whole-store job;
#: ``fn(ctx, user_id, *, now, dry_run=False, **options) -> dict[str, int]`` per user.
JobFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Job:
    """A named maintenance task.

    Attributes:
        name: The registry key and command name (``sweep-ttl``).
        summary: One line saying what it does.
        schedule: How often to run it (``"daily"``, ``"weekly"``, ``"monthly"``), or None
            for on demand; ``langmem-layer worker`` runs scheduled jobs once per period.
        needs_embeddings: Whether the store must have an embedding index, whatever the
            options.
        function: ``function(ctx, *, now, **options) -> JobResult``; for a per-user job
            ``function(ctx, user_id, *, now, dry_run=False, **options) -> dict[str, int]``
            (how many things ended in each outcome for that user).
        options: The keyword options it takes.
        per_user: Whether the runner calls ``function`` once per user.
        defers_writes: A per-user job all of whose writes are one store batch at its
            end (``Writes``), which it leaves in
            ``JobContext.deferred`` when the runner asks: the runner then embeds
            the texts of many users' batches together
            (``langmem_layer.jobs.batching``).
        unchanged: For a per-user job that may pass over a user whose data did not
            change since it last ran for them: ``unchanged(last_now, now, options)``
            says whether a run at ``now`` has nothing new to do for such a user (e.g.
            no new period became complete). None: the job always runs.
    """

    name: str
    summary: str
    schedule: str | None
    needs_embeddings: bool
    function: JobFunction = field(repr=False)
    options: tuple[JobOption, ...] = ()
    per_user: bool = False
    defers_writes: bool = False
    unchanged: Callable[[datetime, datetime, Mapping[str, Any]], bool] | None = None

    def embeds(self, options: Mapping[str, Any]) -> bool:
        """Whether a run with ``options`` needs an embedding index."""
        return self.needs_embeddings or any(
            o.needs_embeddings and options.get(o.name) for o in self.options)

    def option(self, name: str) -> JobOption:
        """The option called ``name``.

        Raises:
            ConfigurationError: The job has no such option.
        """
        for o in self.options:
            if o.name == name:
                return o
        known = ", ".join(o.name for o in self.options) or "none"
        raise ConfigurationError(f"Job {self.name} has no option {name!r} (options: {known}).")

    def run(self, ctx: JobContext, *, now: datetime | None = None,
            **options: Any) -> JobResult:
        """Run a whole-store job once, unrecorded (``langmem_layer.jobs.runs.run``
        records; ``run_users`` runs a per-user job).

        Args:
            ctx: The store (and layer) to run against.
            now: The time to run at (default: the store's or layer's clock); jobs that
                do not depend on time ignore it.
            **options: The job's options; None means the default.

        Raises:
            ConfigurationError: An option the job does not take, or a per-user job
                (call its function with a user id).
        """
        given = self.given(options)
        if self.per_user:
            # The runner walks users and records runs; it imports this module, not the
            # other way round.
            raise ConfigurationError(
                f"Job {self.name} runs per user: run it with "
                f"`langmem-layer jobs run {self.name}` or "
                f"langmem_layer.jobs.runs.run_users(ctx, JOBS[{self.name!r}], now=...).")
        return self.function(ctx, now=now, **given)  # type: ignore[no-any-return]

    def given(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` checked against the job's, without the Nones (job defaults).

        Raises:
            ConfigurationError: An option the job does not take.
        """
        for name in options:
            self.option(name)
        return {k: v for k, v in options.items() if v is not None}


#: Every registered job by name, in registration order.
JOBS: dict[str, Job] = {}


def register(name: str, summary: str, *, schedule: str | None = None,
             needs_embeddings: bool = False, options: tuple[JobOption, ...] = (),
             per_user: bool = False, defers_writes: bool = False,
             unchanged: Callable[[datetime, datetime, Mapping[str, Any]], bool] | None = None,
             ) -> Callable[[JobFunction], JobFunction]:
    """Register the decorated function as the job ``name`` (see ``Job``).

    Raises:
        ConfigurationError: A job of that name is already registered, or the schedule
            is not one of ``daily``, ``weekly``, ``monthly`` (or None).
    """
    from langmem_layer.jobs.schedule import SCHEDULES

    if schedule is not None and schedule not in SCHEDULES:
        raise ConfigurationError(
            f"Job {name!r}: schedule is one of {', '.join(SCHEDULES)} or None, "
            f"got {schedule!r}.")

    def decorate(function: JobFunction) -> JobFunction:
        if name in JOBS:
            raise ConfigurationError(f"Job {name!r} is already registered.")
        JOBS[name] = Job(name, summary, schedule, needs_embeddings, function, options,
                         per_user, defers_writes, unchanged)
        return function

    return decorate

