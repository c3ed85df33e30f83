"""Auditing dead-lettered traffic: plain functions over the lake for the notebooks.

Operators ask three kinds of question, and each has its functions here:

- **Lineage**: which path did a message take, hop by hop (:func:`path`,
  :func:`lineage`), and where did every copy of a producer's message end up
  (:func:`copies_of`)? Rebuilt from the breadcrumb history every copy carries
  (SPEC §5.5: ``_AMQ_ORIG_*_0`` the oldest hop, unsuffixed the latest) and the
  ``journal``.
- **Dead letters**: how many, where from, over time, why, after how many
  attempts and how long (:func:`dead_letters` and the aggregates after it);
  what was dropped and why (:func:`dropped`); what expired (:func:`expiries`).
- **What if** the broker had run another ``broker.xml``: copy the lake's inputs
  into a scratch lake (:func:`copy_inputs`), route them there with the job
  (:func:`jobs.what_if.what_if`) and compare outcomes side by side
  (:func:`compare_outcomes`, :func:`side_by_side`).

Everything between the edges is a pure ``DataFrame -> DataFrame`` function over the
lake's tables as :func:`load_lake` reads them; only :func:`load_lake`,
:func:`read_table`, :func:`lake_clock` and :func:`copy_inputs` touch storage, and the
only lake they ever write is the scratch lake of a what-if.

Example::

    spark = build_session("audit")
    lake = load_lake(spark, "lake")
    dead = dead_letters_in(lake)
    top_causes(dead).show()
    lineage(lake.messages, lake.journal, 8878317030559248113).show()

.. note:: Evolving
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from routing.broker.ids import DEAD_LETTER, DIVERT
from routing.broker.layout import DELIVERIES, MANAGEMENT
from routing.io.delta_tables import last_user_metadata
from routing.io.lake import Lake
from routing.io.storage import TABLE, append_tables, finished_versions, read_table
from routing.plan import journal as events
from routing.plan import schemas
from routing.plan._columns import local_frame, union_by_name
from routing.plan.breadcrumbs import ORIG_ADDRESS, ORIG_MESSAGE_ID, ORIG_QUEUE
from routing.plan.deliveries import ROLLBACK

__all__ = [
    "DIVERTED",
    "MAX_DELIVERY_ATTEMPTS",
    "NO_ROUTE",
    "SEND_TO_DLA",
    "LakeFrames",
    "attempts_and_durations",
    "bucket_width",
    "compare_outcomes",
    "compare_rejections",
    "copies_of",
    "copy_inputs",
    "dead_letters",
    "dead_letters_in",
    "dead_letters_over_time",
    "dropped",
    "drops_by_reason",
    "expiries",
    "expiries_per_address",
    "lake_clock",
    "lineage",
    "load_lake",
    "outcomes",
    "path",
    "paths",
    "properties_of",
    "read_table",
    "side_by_side",
    "top_causes",
]

MAX_DELIVERY_ATTEMPTS = events.MAX_DELIVERY_ATTEMPTS
"""Cause of a dead letter whose delivery attempts ran out (the journal's reason)."""
SEND_TO_DLA = events.SEND_TO_DLA
"""Cause of a dead letter an operator sent with a ``SEND_TO_DLA`` management row."""
NO_ROUTE = events.NO_ROUTE
"""Cause of a send-to-dla-on-no-route dead letter (and of a message dropped without route)."""
DIVERTED = "DIVERTED"
"""Lineage event of a hop that left through a divert (the journal has none: diverts
make copies without entering a queue)."""

DEAD_LETTER_DROPS = (events.NO_DLA, events.DLA_NO_BINDINGS)
EXPIRY_DROPS = (events.NO_EXPIRY_ADDRESS, events.EXPIRY_NO_BINDINGS)
_SUFFIX = "_(0|[1-9][0-9]*)$"  # a canonical history suffix (routing/breadcrumbs.py)
_EMPTY_MAP = "map<string,string>"
_INTERVAL = re.compile(
    r"^(\s*[0-9]+\s+(microsecond|millisecond|second|minute|hour|day|week)s?)+\s*$", re.IGNORECASE
)
"""A bucket width: only such text ever reaches an ``INTERVAL`` literal."""


# --------------------------------------------------------------------------------------
# The edges: reading the lake
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LakeFrames:
    """The tables of one lake (SPEC §3) as DataFrames, each with its SPEC schema."""

    lake: Lake
    messages: DataFrame
    """Every row of every ``addresses/*`` table: producers' rows and the job's copies."""
    queue_messages: DataFrame
    journal: DataFrame
    rejected: DataFrame
    deliveries: DataFrame
    management: DataFrame

    def cache(self) -> LakeFrames:
        """The same tables, kept in memory once read: an audit asks many questions of one
        lake, and each read of a table plans its files again."""
        return replace(self, **{name: getattr(self, name).cache() for name in _TABLES})

    def unpersist(self) -> None:
        """Drop what :meth:`cache` kept."""
        for name in _TABLES:
            getattr(self, name).unpersist()


_TABLES = ("messages", "queue_messages", "journal", "rejected", "deliveries", "management")


def load_lake(spark: SparkSession, root: str | os.PathLike[str] | Lake) -> LakeFrames:
    """Every table of the lake at ``root``, for the audit functions (reads only), as of
    the routing job's last finished batch: a batch it is writing, or that a run which
    stopped inside it left half written, is not seen until it is finished
    (:func:`routing.io.storage.finished_versions`).

    Example::

        lake = load_lake(spark, "lake")
        lake.journal.where("event = 'DEAD_LETTERED'").count()
    """
    if not isinstance(spark, SparkSession):
        raise TypeError(f"spark must be a SparkSession, got {type(spark).__name__}")
    lake = root if isinstance(root, Lake) else Lake.at(root)
    sources = [lake.table(source) for source in lake.address_sources()]
    job_tables = [lake.journal, lake.rejected, *sources]
    finished = finished_versions(lake, job_tables)

    def read(location: str, schema: pa.Schema) -> DataFrame:
        return read_table(spark, location, schema, finished.get(location))

    tables = [read(source, schemas.MESSAGE) for source in sources]
    messages = (
        union_by_name(tables)
        if tables
        else local_frame(spark, [], schemas.spark_schema(schemas.MESSAGE))
    )
    return LakeFrames(
        lake=lake,
        messages=messages,
        queue_messages=read_table(spark, lake.queue_messages, schemas.QUEUE_MESSAGE),
        journal=read(lake.journal, schemas.JOURNAL),
        rejected=read(lake.rejected, schemas.REJECTED),
        deliveries=read_table(spark, lake.deliveries, schemas.DELIVERY),
        management=read_table(spark, lake.management, schemas.MANAGEMENT),
    )


def lake_clock(root: str | os.PathLike[str] | Lake) -> datetime | None:
    """The lake clock (SPEC §5.4) the job committed last, or None before its first batch.

    A what-if replay runs ``--as-of`` this time, so messages expire in the scratch
    lake exactly as far as they did in the audited one.
    """
    lake = root if isinstance(root, Lake) else Lake.at(root)
    text = last_user_metadata(lake.queue_messages)
    clock = json.loads(text).get("clock") if text else None
    if clock is None:
        return None
    return datetime.fromtimestamp(clock // 1_000_000, UTC).replace(microsecond=clock % 1_000_000)


# --------------------------------------------------------------------------------------
# Breadcrumbs and lineage
# --------------------------------------------------------------------------------------


def _properties() -> Column:
    return F.coalesce(F.col("properties"), F.create_map().cast(_EMPTY_MAP))


def _sent_on() -> Column:
    """The row is a message that send-to-dla-on-no-route sent on to its dead-letter address:
    the message itself, same id (SPEC §5.2 step 4), so its id is also that of the row it
    was sent as. Joins of a message's events by id read the row it was sent as."""
    props = _properties()
    return F.coalesce(
        (F.col("copy_reason") == F.lit(DEAD_LETTER))
        & ~F.map_contains_key(props, ORIG_QUEUE)
        & (F.try_element_at(props, F.lit(ORIG_MESSAGE_ID)) == F.col("message_id").cast("string")),
        F.lit(False),
    )


def _as_sent(messages: DataFrame) -> DataFrame:
    """Each message as it was sent or made: one row per id (:func:`_sent_on` rows left out)."""
    return messages.where(~_sent_on())


def _history_size(props: Column, name: str) -> Column:
    """How many ``name_N`` entries (canonical suffixes only) a properties map holds."""
    return F.size(F.filter(F.map_keys(props), lambda k: k.rlike(f"^{name}{_SUFFIX}")))


def _crumb(props: Column, name: str, index: Column) -> Column:
    """Entry ``index`` of ``name``'s history: ``name_<index>``, then the unsuffixed latest."""
    older = _history_size(props, name)
    return F.when(
        index < older, F.try_element_at(props, F.concat(F.lit(f"{name}_"), index.cast("string")))
    ).when(index == older, F.try_element_at(props, F.lit(name)))


def _hop_array() -> Column:
    """The path of each message row as an array of hops, oldest first, the row itself last.

    Hop ``i`` is (``hop``, ``hop_message_id``, ``address``, ``via``): the message at that
    hop and the queue or divert the previous hop left to make it (SPEC §5.5). The
    address and id histories always grow together; ``_AMQ_ORIG_QUEUE`` skips the hop
    of a send-to-dla-on-no-route copy, so its entries are only placed hop by hop when
    they are as many as the hops; otherwise ``via`` is left to :func:`paths`, which
    reads it from the hop's own row.
    """
    props = _properties()
    older = _history_size(props, ORIG_ADDRESS) + F.map_contains_key(props, ORIG_ADDRESS).cast("int")
    queues = _history_size(props, ORIG_QUEUE) + F.map_contains_key(props, ORIG_QUEUE).cast("int")
    aligned = queues == older

    def hop(i: Column) -> Column:
        itself = i == older
        via = (
            F.when(i == 0, F.lit(None).cast("string"))
            .when(itself, F.try_element_at(props, F.lit(ORIG_QUEUE)))
            .when(aligned, _crumb(props, ORIG_QUEUE, i - 1))
        )
        return F.struct(
            i.alias("hop"),
            F.when(itself, F.col("message_id"))
            .otherwise(_crumb(props, ORIG_MESSAGE_ID, i).try_cast("long"))
            .alias("hop_message_id"),
            F.when(itself, F.col("address"))
            .otherwise(_crumb(props, ORIG_ADDRESS, i))
            .alias("address"),
            via.alias("via"),
        )

    return F.transform(F.sequence(F.lit(0), older), hop)


def paths(of: DataFrame, messages: DataFrame) -> DataFrame:
    """The path of every message row of ``of``, one row per hop, oldest first.

    :param of: message rows (``addresses/*`` columns) whose paths are wanted.
    :param messages: every message of the lake (:attr:`LakeFrames.messages`), where the
        intermediate copies are looked up for how and when they were made.
    :return: ``message_id`` (whose path), ``hop`` (0 = where the producer sent it),
        ``hop_message_id``, ``address``, ``via`` (the queue or divert the previous hop
        left; null at hop 0 and for a send-to-dla-on-no-route copy), ``copy_reason``
        (how that hop's message was made; null at a producer's message) and
        ``sent_at`` (when that hop's message was sent or made).
    """
    rows = messages.select(
        F.col("message_id").alias("hop_message_id"),
        "address",  # a message sent on to its dead-letter address has its id there too
        "copy_reason",
        "sent_at",
        F.when(
            F.col("copy_reason").isNotNull(), F.try_element_at(_properties(), F.lit(ORIG_QUEUE))
        ).alias("_own_via"),
        F.lit(True).alias("_found"),
    )
    hops = of.select("message_id", F.inline(_hop_array()))
    return hops.join(rows, ["hop_message_id", "address"], "left").select(
        "message_id",
        "hop",
        "hop_message_id",
        "address",
        F.when(F.col("_found"), F.col("_own_via")).otherwise(F.col("via")).alias("via"),
        "copy_reason",
        "sent_at",
    )


def path(messages: DataFrame, message_id: int) -> DataFrame:
    """The path one message took to where it is, hop by hop (see :func:`paths`).

    :return: ``hop``, ``message_id`` (the message at that hop), ``address``, ``via``,
        ``copy_reason``, ``sent_at``; ordered by hop. Empty if no message has that id.

    Example::

        path(lake.messages, 8878317030559248113).show()
        # hop 0: 2 on orders; hop 1: a DIVERT copy via orders-eu on orders.eu;
        # hop 2: a DEAD_LETTER copy via orders.eu on DLA
    """
    _check_id(message_id)
    rows = messages.where(F.col("message_id") == F.lit(message_id))
    # a message sent on to its dead-letter address is there too: where it went last
    last = rows.orderBy(F.size(_hop_array()).desc()).limit(1)
    return (
        paths(last, messages)
        .select(
            "hop",
            F.col("hop_message_id").alias("message_id"),
            "address",
            "via",
            "copy_reason",
            "sent_at",
        )
        .orderBy("hop")
    )


def _event_rank() -> Column:
    """Order of journal events at one instant: entering a queue, redelivery, the end."""
    return (
        F.when(F.col("event") == events.ROUTED, 0)
        .when(F.col("event") == events.REDELIVERY_SCHEDULED, 1)
        .otherwise(2)
    )


def lineage(messages: DataFrame, journal: DataFrame, message_id: int) -> DataFrame:
    """Everything that happened on the path of one message, hop by hop.

    The hops come from the breadcrumbs (:func:`path`); each hop's events from the
    journal, keeping on earlier hops only those in the queue the path left by (or the
    event that made the next hop, for a no-route dead letter), and every event of the
    last hop. A hop that left through a divert gets a ``DIVERTED`` row (the journal has
    none).

    :return: ``hop``, ``message_id``, ``address``, ``copy_reason`` (how that hop's
        message was made), ``queue`` (or divert), ``event``, ``reason`` (the journal's
        ``detail['reason']``), ``delivery_count``, ``at``; in the order it happened.

    Example::

        lineage(lake.messages, lake.journal, 2).show()   # a producer's message: one hop
    """
    _check_id(message_id)
    hops = path(messages, message_id)
    following = hops.select(
        (F.col("hop") - 1).alias("hop"),
        F.col("message_id").alias("_next_id"),
        F.col("via").alias("_next_via"),
        F.col("copy_reason").alias("_next_reason"),
        F.col("sent_at").alias("_next_at"),
    )
    preceding = hops.select((F.col("hop") + 1).alias("hop"), F.col("message_id").alias("_prev_id"))
    steps = F.broadcast(hops.join(following, "hop", "left").join(preceding, "hop", "left"))
    logged = journal.select(
        "message_id",
        "queue",
        "event",
        F.try_element_at("detail", F.lit("reason")).alias("reason"),
        "delivery_count",
        "at",
        F.try_element_at("detail", F.lit("copy_id")).try_cast("long").alias("_copy_id"),
    )
    # a message send-to-dla-on-no-route sent on keeps its id: the journal row that sent it
    # (no queue) is the previous hop's
    sent_on_before = F.coalesce(F.col("message_id") == F.col("_prev_id"), F.lit(False))
    on_path = (
        steps.join(logged, "message_id")
        .where(
            (
                F.col("_next_id").isNull()
                | (F.col("queue") == F.col("_next_via"))
                | (F.col("_copy_id") == F.col("_next_id"))
            )
            & ~(sent_on_before & F.col("queue").isNull())
        )
        .drop("_copy_id", "_prev_id")
    )
    diverted = steps.where(F.col("_next_reason") == F.lit(DIVERT)).select(
        "hop",
        "message_id",
        "address",
        "copy_reason",
        F.col("_next_via").alias("queue"),
        F.lit(DIVERTED).alias("event"),
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("int").alias("delivery_count"),
        F.col("_next_at").alias("at"),
    )
    columns = [
        "hop",
        "message_id",
        "address",
        "copy_reason",
        "queue",
        "event",
        "reason",
        "delivery_count",
        "at",
    ]
    return (
        union_by_name([on_path.select(*columns), diverted])
        .orderBy("hop", "at", _event_rank(), "queue")
        .select(*columns)
    )


def properties_of(messages: DataFrame, message_id: int) -> DataFrame:
    """A message's properties with their types, as filters see them (SPEC §3.1, §5.1).

    A typed property compares as Artemis compares its type (a ``long`` 7 is not the
    string ``'7'``); an untyped one by the lake's lenient rule (a numeric-looking string
    compares as a number): the type says which rule applied to a filter that did or did
    not match.

    :return: ``address`` (where the message was sent or made; a message send-to-dla-on-
        no-route sent on has one row per address), ``name``, ``value`` (the text),
        ``type`` (``long``, ``string``, ...; ``untyped`` for a property without one),
        sorted by address and name.

    Example::

        properties_of(lake.messages, 2).show()
        # orders  amount  950  long
        # orders  region  EU   untyped
    """
    _check_id(message_id)
    types = F.coalesce(F.col("property_types"), F.create_map().cast(_EMPTY_MAP))
    return (
        messages.where(F.col("message_id") == F.lit(message_id))
        .select("address", F.explode(_properties()).alias("name", "value"), types.alias("_types"))
        .select(
            "address",
            "name",
            "value",
            F.coalesce(F.try_element_at("_types", F.col("name")), F.lit("untyped")).alias("type"),
        )
        .orderBy("address", "name")
    )


def copies_of(messages: DataFrame, queue_messages: DataFrame, message_id: int) -> DataFrame:
    """Where a message and every copy made from it are: the reverse of :func:`path`.

    A copy names its ancestors in its breadcrumbs: a producer's message is the ``_0``
    entry of ``_AMQ_ORIG_MESSAGE_ID`` (the unsuffixed one after a single hop), a copy
    met on the way a later entry; so one scan of the address tables finds every
    descendant, however many hops away.

    :return: ``depth`` (hops from ``message_id``; 0 is the message itself),
        ``message_id``, ``address``, ``copy_reason``, ``sent_at``, and per queue it
        entered ``queue``, ``status``, ``delivery_count``, ``status_at`` (nulls for a
        message that entered no queue: diverted away, dropped, dead-lettered without
        route).

    Example::

        copies_of(lake.messages, lake.queue_messages, 1).show()
    """
    _check_id(message_id)
    wanted = F.lit(str(message_id))
    candidates = messages.where(
        (F.col("message_id") == F.lit(message_id))
        | F.exists(
            F.map_entries(_properties()),
            lambda e: e["key"].startswith(ORIG_MESSAGE_ID) & (e["value"] == wanted),
        )
    )
    row = ["message_id", "_address", "copy_reason", "sent_at"]
    found = (
        candidates.select(
            "message_id",
            F.col("address").alias("_address"),
            "copy_reason",
            "sent_at",
            _hop_array().alias("_hops"),
        )
        .select("*", (F.size("_hops") - 1).alias("_last"), F.inline("_hops"))
        .where(F.col("hop_message_id") == F.lit(message_id))
        # the first hop that is the message: a message sent on to its dead-letter address
        # (same id) is one hop from where it was sent
        .groupBy(*row, "_last")
        .agg(F.min("hop").alias("_first"))
        .select(
            (F.col("_last") - F.col("_first")).alias("depth"),
            "message_id",
            F.col("_address").alias("address"),
            "copy_reason",
            "sent_at",
        )
    )
    state = queue_messages.select(
        "message_id", "address", "queue", "status", "delivery_count", "status_at"
    )
    return (
        found.join(state, ["message_id", "address"], "left")
        .select(
            "depth",
            "message_id",
            "address",
            "copy_reason",
            "sent_at",
            "queue",
            "status",
            "delivery_count",
            "status_at",
        )
        .orderBy("depth", "sent_at", "message_id", "queue")
    )


# --------------------------------------------------------------------------------------
# Dead letters, drops and expiries
# --------------------------------------------------------------------------------------


def _seconds_between(start: Column, end: Column) -> Column:
    return (F.unix_micros(end) - F.unix_micros(start)) / F.lit(1_000_000.0)


def dead_letters(
    journal: DataFrame, messages: DataFrame, queue_messages: DataFrame, deliveries: DataFrame
) -> DataFrame:
    """One row per message the broker dead-lettered, whether it reached a DLA or was dropped.

    A dead letter is a ``DEAD_LETTERED`` journal row, or a ``DROPPED`` one whose reason
    is ``NO_DLA`` / ``DLA_NO_BINDINGS`` (a dead letter with nowhere to go). Its cause:

    - ``MAX_DELIVERY_ATTEMPTS``: its delivery attempts ran out (a ROLLBACK ended it);
    - ``SEND_TO_DLA``: an operator's management row sent it;
    - ``NO_ROUTE``: send-to-dla-on-no-route (no queue; the message itself goes on, same id,
      without ``_AMQ_ORIG_QUEUE``).

    A dropped dead letter's journal row records only why it was dropped, so its cause
    is read from ``deliveries``: a ROLLBACK of it in that queue at that instant means
    its attempts ran out, otherwise an operator sent it.

    :return: ``at``, ``address`` and ``queue`` it left (``queue`` null for no route),
        ``message_id``, ``cause``, ``outcome`` (``DEAD_LETTERED`` or ``DROPPED``),
        ``dropped_reason``, ``delivery_count`` (attempts), ``routed_at`` (when it
        entered the queue), ``seconds`` (from ``routed_at`` to the dead letter; null
        without a queue), ``dead_letter_address``, ``copy_id`` (the DLA copy; for a
        no route, the message's own id), ``origin_address`` / ``origin_message_id`` (where the producer sent it, hop 0),
        ``divert`` (the divert that made it, when it is a divert copy).
    """
    reason = F.try_element_at("detail", F.lit("reason"))
    rows = journal.where(
        (F.col("event") == events.DEAD_LETTERED)
        | ((F.col("event") == events.DROPPED) & reason.isin(*DEAD_LETTER_DROPS))
    ).select(
        "at",
        "queue",
        "message_id",
        "event",
        reason.alias("_reason"),
        "delivery_count",
        F.try_element_at("detail", F.lit("to_address")).alias("dead_letter_address"),
        F.try_element_at("detail", F.lit("copy_id")).try_cast("long").alias("copy_id"),
    )
    rollbacks = (
        deliveries.where(F.col("outcome") == ROLLBACK)
        .select("queue", "message_id", "at", F.lit(True).alias("_rollback"))
        .dropDuplicates(["queue", "message_id", "at"])
    )
    sent = _as_sent(messages).select(
        "message_id", "address", "copy_reason", F.col("properties").alias("_properties")
    )
    entered = queue_messages.select("queue", "message_id", "routed_at")
    props = F.coalesce(F.col("_properties"), F.create_map().cast(_EMPTY_MAP))
    cause = (
        F.when(
            F.col("_reason").isin(MAX_DELIVERY_ATTEMPTS, SEND_TO_DLA, NO_ROUTE), F.col("_reason")
        )
        .when(F.col("_rollback"), F.lit(MAX_DELIVERY_ATTEMPTS))
        .otherwise(F.lit(SEND_TO_DLA))
    )
    first = [f"{ORIG_ADDRESS}_0", ORIG_ADDRESS]
    first_id = [f"{ORIG_MESSAGE_ID}_0", ORIG_MESSAGE_ID]
    return (
        rows.join(rollbacks, ["queue", "message_id", "at"], "left")
        .join(sent, "message_id", "left")
        .join(entered, ["queue", "message_id"], "left")
        .select(
            "at",
            "address",
            "queue",
            "message_id",
            cause.alias("cause"),
            F.col("event").alias("outcome"),
            F.when(F.col("event") == events.DROPPED, F.col("_reason")).alias("dropped_reason"),
            "delivery_count",
            "routed_at",
            _seconds_between(F.col("routed_at"), F.col("at")).alias("seconds"),
            "dead_letter_address",
            "copy_id",
            F.coalesce(*[F.try_element_at(props, F.lit(k)) for k in first], F.col("address")).alias(
                "origin_address"
            ),
            F.coalesce(
                *[F.try_element_at(props, F.lit(k)).try_cast("long") for k in first_id],
                F.col("message_id"),
            ).alias("origin_message_id"),
            F.when(
                F.col("copy_reason") == F.lit(DIVERT), F.try_element_at(props, F.lit(ORIG_QUEUE))
            ).alias("divert"),
        )
    )


def dead_letters_in(lake: LakeFrames) -> DataFrame:
    """:func:`dead_letters` of a whole lake as :func:`load_lake` reads it."""
    return dead_letters(lake.journal, lake.messages, lake.queue_messages, lake.deliveries)


_WIDTHS = [
    (seconds, f"{amount} {unit if amount != 1 else unit[:-1]}")
    for unit, size, amounts in (
        ("milliseconds", 0.001, (1, 2, 5, 10, 20, 50, 100, 200, 500)),
        ("seconds", 1, (1, 2, 5, 10, 15, 30)),
        ("minutes", 60, (1, 2, 5, 10, 15, 30)),
        ("hours", 3600, (1, 2, 3, 6, 12)),
        ("days", 86400, (1, 7, 30)),
    )
    for amount in amounts
    for seconds in [amount * size]
]


def bucket_width(frame: DataFrame, column: str = "at", buckets: int = 30) -> str:
    """A round bucket width (``"200 milliseconds"``, ``"5 minutes"``) that cuts the time
    span of ``frame[column]`` into at most about ``buckets`` buckets.

    Demo traffic spans seconds, production traffic days: a fixed width fits neither.
    An empty frame gets ``"1 minute"``.
    """
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, got {buckets}")
    span = frame.agg(_seconds_between(F.min(column), F.max(column)).alias("span")).collect()[0][
        "span"
    ]
    if span is None:
        return "1 minute"
    for seconds, width in _WIDTHS:
        if span / seconds <= buckets:
            return width
    return _WIDTHS[-1][1]


def dead_letters_over_time(
    dead: DataFrame,
    every: str = "1 hour",
    by: Sequence[str] = ("address",),
    *,
    fill: bool = False,
) -> DataFrame:
    """Dead letters per time bucket and per ``by`` (address, queue, origin_address, divert…).

    :param dead: :func:`dead_letters`.
    :param every: the bucket width, a Spark interval (``"1 minute"``, ``"1 day"``;
        :func:`bucket_width` picks one).
    :param by: the columns of ``dead`` to count per.
    :param fill: also give the empty buckets between the first and the last one (0 dead
        letters, for every ``by`` value), so a plot shows quiet times as quiet.
    :return: ``bucket`` (the bucket's start), the ``by`` columns, ``dead_letters``.

    Example::

        dead_letters_over_time(dead, "10 minutes", ["origin_address", "divert"])
    """
    if not isinstance(every, str) or not _INTERVAL.match(every):
        raise ValueError(
            f"every must be an interval such as '10 minutes' or '1 hour 30 minutes', got {every!r}"
        )
    by = list(by)
    counts = dead.groupBy(F.window("at", every)["start"].alias("bucket"), *by).agg(
        F.count(F.lit(1)).alias("dead_letters")
    )
    if fill:
        span = counts.agg(F.min("bucket").alias("first"), F.max("bucket").alias("last"))
        buckets = span.select(
            F.explode(F.sequence("first", "last", F.expr(f"INTERVAL {every}"))).alias("bucket")
        )
        grid = buckets.crossJoin(dead.select(*by).distinct()) if by else buckets
        found = counts.select(
            F.col("bucket").alias("_bucket"),
            *[F.col(c).alias(f"_by{i}") for i, c in enumerate(by)],
            F.col("dead_letters").alias("_dead_letters"),
        )
        same = [F.col("bucket") == F.col("_bucket")] + [
            F.col(c).eqNullSafe(F.col(f"_by{i}")) for i, c in enumerate(by)
        ]
        counts = grid.join(found, same, "left").select(
            "bucket", *by, F.coalesce("_dead_letters", F.lit(0)).alias("dead_letters")
        )
    return counts.orderBy("bucket", *by)


def top_causes(dead: DataFrame) -> DataFrame:
    """Dead letters per cause, most frequent first, with how many of them were dropped.

    :return: ``cause``, ``dead_letters``, ``dropped``, ``share`` (of all dead letters).
    """
    everything = Window.partitionBy()
    return (
        dead.groupBy("cause")
        .agg(
            F.count(F.lit(1)).alias("dead_letters"),
            F.count_if(F.col("outcome") == events.DROPPED).alias("dropped"),
        )
        .withColumn("share", F.col("dead_letters") / F.sum("dead_letters").over(everything))
        .orderBy(F.desc("dead_letters"), "cause")
    )


def attempts_and_durations(
    dead: DataFrame, by: Sequence[str] = ("address", "queue", "cause")
) -> DataFrame:
    """How many delivery attempts dead letters had and how long they sat in their queue.

    :return: the ``by`` columns, ``dead_letters``, ``attempts_min`` / ``_avg`` /
        ``_max`` (delivery counts), ``seconds_avg`` / ``seconds_max`` (from entering the
        queue to the dead letter; null for no-route dead letters).
    """
    by = list(by)
    return (
        dead.groupBy(*by)
        .agg(
            F.count(F.lit(1)).alias("dead_letters"),
            F.min("delivery_count").alias("attempts_min"),
            F.avg("delivery_count").alias("attempts_avg"),
            F.max("delivery_count").alias("attempts_max"),
            F.avg("seconds").alias("seconds_avg"),
            F.max("seconds").alias("seconds_max"),
        )
        .orderBy(*by)
    )


def dropped(journal: DataFrame, messages: DataFrame) -> DataFrame:
    """Every message the job dropped, and why (SPEC §5.2, §5.4).

    Reasons: ``NO_ROUTE`` (no queue, no divert, no send-to-dla-on-no-route),
    ``NO_DLA`` / ``DLA_NO_BINDINGS`` (a dead letter with nowhere to go),
    ``NO_EXPIRY_ADDRESS`` / ``EXPIRY_NO_BINDINGS`` (an expiry with nowhere to go).

    :return: ``at``, ``address``, ``queue`` (null for no route), ``message_id``,
        ``reason``, ``delivery_count``.
    """
    rows = journal.where(F.col("event") == events.DROPPED).select(
        "at",
        "queue",
        "message_id",
        F.try_element_at("detail", F.lit("reason")).alias("reason"),
        "delivery_count",
        F.try_element_at("detail", F.lit("address")).alias("_address"),
    )
    sent = _as_sent(messages).select("message_id", F.col("address").alias("_sent_to"))
    return rows.join(sent, "message_id", "left").select(
        "at",
        F.coalesce("_address", "_sent_to").alias("address"),
        "queue",
        "message_id",
        "reason",
        "delivery_count",
    )


def drops_by_reason(drops: DataFrame, by: Sequence[str] = ("reason", "address")) -> DataFrame:
    """Dropped messages counted per reason and address (most first).

    :param drops: :func:`dropped`.
    :return: the ``by`` columns and ``dropped``.
    """
    by = list(by)
    return (
        drops.groupBy(*by).agg(F.count(F.lit(1)).alias("dropped")).orderBy(F.desc("dropped"), *by)
    )


def expiries(journal: DataFrame, queue_messages: DataFrame) -> DataFrame:
    """Every message that expired in a queue: moved to its expiry address, or dropped.

    :return: ``at``, ``address`` (of the queue), ``queue``, ``message_id``, ``outcome``
        (``EXPIRED`` or ``DROPPED``), ``reason`` (``NO_EXPIRY_ADDRESS`` /
        ``EXPIRY_NO_BINDINGS`` when dropped), ``expiry_address``, ``copy_id``.
    """
    reason = F.try_element_at("detail", F.lit("reason"))
    rows = journal.where(
        (F.col("event") == events.EXPIRED)
        | ((F.col("event") == events.DROPPED) & reason.isin(*EXPIRY_DROPS))
    ).select(
        "at",
        "queue",
        "message_id",
        F.col("event").alias("outcome"),
        reason.alias("reason"),
        F.try_element_at("detail", F.lit("to_address")).alias("expiry_address"),
        F.try_element_at("detail", F.lit("copy_id")).try_cast("long").alias("copy_id"),
    )
    where = queue_messages.select("queue", "message_id", "address")
    return rows.join(where, ["queue", "message_id"], "left").select(
        "at", "address", "queue", "message_id", "outcome", "reason", "expiry_address", "copy_id"
    )


def expiries_per_address(expired: DataFrame) -> DataFrame:
    """Expiries per address: moved to the expiry address, dropped, and in all.

    :param expired: :func:`expiries`.
    :return: ``address``, ``expired``, ``dropped``, ``total``; most first.
    """
    return (
        expired.groupBy("address")
        .agg(
            F.count_if(F.col("outcome") == events.EXPIRED).alias("expired"),
            F.count_if(F.col("outcome") == events.DROPPED).alias("dropped"),
            F.count(F.lit(1)).alias("total"),
        )
        .orderBy(F.desc("total"), "address")
    )


# --------------------------------------------------------------------------------------
# What if: the same inputs under another broker.xml
# --------------------------------------------------------------------------------------


def outcomes(queue_messages: DataFrame) -> DataFrame:
    """Messages per address, queue and status: what a run of the job came to.

    :return: ``address``, ``queue``, ``status``, ``messages``.
    """
    return queue_messages.groupBy("address", "queue", "status").agg(
        F.count(F.lit(1)).alias("messages")
    )


def side_by_side(before: DataFrame, after: DataFrame, keys: Sequence[str], value: str) -> DataFrame:
    """Two counts of the same keys next to each other, with the difference.

    :param before: rows of ``keys`` and ``value`` (the audited lake).
    :param after: the same for the other run (the scratch lake).
    :return: ``keys``, ``before``, ``after``, ``difference`` (after − before); a key
        missing on one side counts 0 there.

    Example::

        side_by_side(top_causes(dead), top_causes(dead_then), ["cause"], "dead_letters")
    """
    keys = list(keys)
    left = before.select(*keys, F.col(value).cast("long").alias("before"))
    right = after.select(*keys, F.col(value).cast("long").alias("after"))
    joined = left.join(right, keys, "full_outer").na.fill(0, ["before", "after"])
    return joined.select(
        *keys, "before", "after", (F.col("after") - F.col("before")).alias("difference")
    ).orderBy(*keys)


def compare_outcomes(before: DataFrame, after: DataFrame) -> DataFrame:
    """Per address, queue and status: messages in the audited lake, in the what-if, and
    the difference (``queue_messages`` of each).

    :return: ``address``, ``queue``, ``status``, ``before``, ``after``, ``difference``.
    """
    keys = ["address", "queue", "status"]
    return side_by_side(outcomes(before), outcomes(after), keys, "messages")


def compare_rejections(before: DataFrame, after: DataFrame) -> DataFrame:
    """Rejected input rows per table and reason, in the audited lake and the what-if.

    Under another configuration some deliveries name copies that are never made (copy
    ids depend on the path, SPEC §5.6) and are rejected: a real difference. Message
    ids in reasons are replaced by ``<id>`` so that rows count together. Lines a
    replay refused to load (source ``log:<file>``) never reach the job, nor a what-if
    run, and are left out.

    :return: ``source``, ``reason``, ``before``, ``after``, ``difference``.
    """

    def counted(rejected: DataFrame) -> DataFrame:
        reason = F.regexp_replace("reason", r"message -?[0-9]+", "message <id>")
        by_job = rejected.where(~F.col("source").startswith("log:"))
        return by_job.groupBy("source", reason.alias("reason")).agg(F.count(F.lit(1)).alias("rows"))

    return side_by_side(counted(before), counted(after), ["source", "reason"], "rows")


def _input_rows(spark: SparkSession, lake: Lake) -> DataFrame:
    """The inputs of ``lake`` as one frame tagged with their table (``_table``):
    producers' rows (``copy_reason`` null) of each address table, deliveries and
    management rows, each table's rows in the order they are read (file by file)."""
    frames = [
        read_table(spark, lake.table(source), schemas.MESSAGE)
        .where(F.col("copy_reason").isNull())
        .withColumn(TABLE, F.lit(source))
        for source in lake.address_sources()
    ]
    for table, schema in ((DELIVERIES, schemas.DELIVERY), (MANAGEMENT, schemas.MANAGEMENT)):
        frames.append(read_table(spark, lake.table(table), schema).withColumn(TABLE, F.lit(table)))
    return union_by_name(frames, allow_missing=True)


def copy_inputs(
    spark: SparkSession, lake: str | os.PathLike[str], scratch: str | os.PathLike[str]
) -> None:
    """Copy the inputs of ``lake`` (producers' rows, deliveries, management) to the
    empty lake ``scratch``, in one write: one commit per table.

    The job's own copies are left behind: the what-if run makes its own. Each table's
    rows keep the order they are read in (file by file, as committed), which is what
    breaks ties between two events of one message at the same instant (SPEC §5.4);
    the files' commit versions are not kept, so ties across two commits of one table
    may apply in another order than in the audited lake.

    :raise ValueError: when ``scratch`` is ``lake`` or is not empty (an audit never
        writes to the lake it audits, and never mixes two runs).
    """
    source, target = Path(lake).absolute(), Path(scratch).absolute()
    if source.resolve() == target.resolve():
        raise ValueError(f"scratch lake {target} is the audited lake; give another directory")
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"scratch lake {target} is not empty; give a new directory")
    append_tables(_input_rows(spark, Lake.at(source)), Lake.at(target))


def _check_id(message_id: int) -> None:
    if isinstance(message_id, bool) or not isinstance(message_id, int):
        raise TypeError(f"message_id must be an int, got {type(message_id).__name__}")
