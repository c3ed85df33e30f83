"""The delivery rules of SPEC §5.3-§5.4 pinned at the library level (issue 6).

The Artemis cases (``DeadLetterAddressTest``, ``MultipliedDelayedMessageTest``,
``ExpiryAddressTest``) and the chains built on them (expire then dead-letter, retry of
a diverted message from its DLQ) run as ONE micro-batch through
:func:`routing.plan.engine.run_batch` (the ``batch`` fixture): one broker.xml with an
address per case, every event of every case in one batch, a test per case reading its
own queues. The copies a batch makes are routed and receive their own events in later
rounds of the same batch, so each chain is complete after the one call.

The last test runs the job (``jobs.route``) twice over the same input, once in one
micro-batch and once with ``--max-events-per-trigger 1``, and compares every table.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from jobs import route
from routing.broker.ids import copy_id_py
from routing.broker.layout import DELTA_LOG, address_of_source
from routing.broker.state import JobState
from routing.io import session
from routing.io.lake import Lake
from routing.io.storage import DeltaStorage
from routing.plan import engine, schemas
from routing.plan.engine import run_batch
from routing.plan.expiry import Expirations, earliest_expiration
from routing.plan.router import Router
from routing.plan.scratch import Scratch
from tests.frames import assert_rows_equal
from tests.lakeio import append, at, read_table, rows
from tests.test_routing_rules import (
    DEAD_LETTER,
    EXPIRY,
    JOURNAL_ROWS,
    RETRY,
    assert_rows,
    batch_events,
    broker,
    delivery,
    divert_copy,
    message,
    no_pending,
    orig,
    topology_of,
    union,
)

RULES_XML = """
<address-settings>
  <address-setting match="basic"><dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>2</max-delivery-attempts></address-setting>
  <address-setting match="nobind"><dead-letter-address>EMPTY</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="nodla"><max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="blank"><dead-letter-address/>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="two"><dead-letter-address>DLA2</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="sixteen"><dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>16</max-delivery-attempts></address-setting>
  <address-setting match="delayed"><redelivery-delay>100</redelivery-delay>
    <redelivery-delay-multiplier>2</redelivery-delay-multiplier>
    <max-redelivery-delay>1000</max-redelivery-delay></address-setting>
  <address-setting match="exp"><expiry-address>EXPA</expiry-address></address-setting>
  <address-setting match="ed"><expiry-address>EDX</expiry-address></address-setting>
  <address-setting match="EDX"><dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="rB"><dead-letter-address>rDLA</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
</address-settings>
<diverts>
  <divert name="rdiv"><address>rA</address><forwarding-address>rB</forwarding-address>
    <exclusive>true</exclusive></divert>
  <divert name="rtap"><address>rB</address><forwarding-address>rTAP</forwarding-address></divert>
</diverts>
<addresses>
  <address name="basic"><anycast><queue name="basic.q"/></anycast></address>
  <address name="DLA"><anycast><queue name="DLA.q"/></anycast></address>
  <address name="nobind"><anycast><queue name="nobind.q"/></anycast></address>
  <address name="nodla"><anycast><queue name="nodla.q"/></anycast></address>
  <address name="blank"><anycast><queue name="blank.q"/></anycast></address>
  <address name="two"><anycast><queue name="two.q"/></anycast></address>
  <address name="DLA2"><multicast><queue name="DLQ2a"/><queue name="DLQ2b"/></multicast></address>
  <address name="sixteen"><anycast><queue name="sixteen.q"/></anycast></address>
  <address name="delayed"><anycast><queue name="delayed.q"/></anycast></address>
  <address name="exp"><anycast><queue name="exp.q"/></anycast></address>
  <address name="EXPA"><anycast><queue name="EXPA.q"/></anycast></address>
  <address name="noexp"><anycast><queue name="noexp.q"/></anycast></address>
  <address name="ed"><anycast><queue name="ed.q"/></anycast></address>
  <address name="EDX"><anycast><queue name="EDX.q"/></anycast></address>
  <address name="rA"><anycast/></address>
  <address name="rB"><anycast><queue name="rX"/></anycast></address>
  <address name="rTAP"><anycast><queue name="rTAP.q"/></anycast></address>
  <address name="rDLA"><anycast><queue name="rDLQ"/></anycast></address>
</addresses>
"""


def tagged(message_id: int, address: str, t: int = 0, **fields: Any) -> dict[str, Any]:
    return message(message_id, address, t, properties={"tag": f"m{message_id}"}, **fields)


def rollbacks(queue: str, message_id: int, times: Iterable[int]) -> list[dict[str, Any]]:
    return [delivery(queue, message_id, "ROLLBACK", t) for t in times]


def actual_expiry(t: int) -> str:
    """``_AMQ_ACTUAL_EXPIRY``: the expiry time in epoch ms."""
    return str(int(at(t).timestamp() * 1000))


# ids of the copies the cases make (SPEC §5.6 reference function)
D11 = copy_id_py(11, DEAD_LETTER, "basic.q", "DLA", None)
D41 = copy_id_py(41, DEAD_LETTER, "two.q", "DLA2", None)
D51 = copy_id_py(51, DEAD_LETTER, "sixteen.q", "DLA", None)
E71 = copy_id_py(71, EXPIRY, "exp.q", "EXPA", None)
X91 = copy_id_py(91, EXPIRY, "ed.q", "EDX", None)
DX91 = copy_id_py(X91, DEAD_LETTER, "EDX.q", "DLA", None)
V100 = divert_copy(100, "rdiv", "rB")
W100 = divert_copy(V100, "rtap", "rTAP")
DV100 = copy_id_py(V100, DEAD_LETTER, "rX", "rDLA", None)
RV100 = copy_id_py(DV100, RETRY, "rDLQ", "rB", "rX")

MESSAGES = [
    tagged(11, "basic", expiration=100_000),  # expires long after the batch's clock
    tagged(12, "basic"),
    tagged(21, "nobind"),
    tagged(31, "nodla"),
    tagged(32, "blank"),
    tagged(41, "two"),
    tagged(51, "sixteen"),
    tagged(52, "sixteen"),
    tagged(61, "delayed"),
    tagged(71, "exp", expiration=500, routing_type="ANYCAST"),
    tagged(81, "noexp", expiration=500),
    tagged(91, "ed", expiration=300),
    tagged(100, "rA"),
]
DELIVERIES = [
    *rollbacks("basic.q", 11, [100, 200]),
    delivery("basic.q", 12, "ROLLBACK", 100),
    delivery("basic.q", 12, "ACK", 300),
    *rollbacks("nobind.q", 21, [100]),
    *rollbacks("nodla.q", 31, [100]),
    *rollbacks("blank.q", 32, [100]),
    *rollbacks("two.q", 41, [100]),
    *rollbacks("sixteen.q", 51, range(100, 1700, 100)),  # 16
    *rollbacks("sixteen.q", 52, range(100, 1600, 100)),  # 15
    *rollbacks("delayed.q", 61, range(1000, 7000, 1000)),  # 6, the last at 6000 (the clock)
    *rollbacks("EDX.q", X91, [700]),  # the expiry copy of 91, made in this batch
    *rollbacks("rX", V100, [100]),  # the divert copy of 100
]
MANAGEMENT = [
    {"op": "RETRY", "queue": "rDLQ", "message_id": DV100, "at": at(200)},
]

STATE = "queue, message_id, status, delivery_count, redeliver_at, routed_at, status_at"
STATE_DDL = (
    "queue string, message_id long, status string, delivery_count int, "
    "redeliver_at timestamp, routed_at timestamp, status_at timestamp"
)
COPY = "message_id, address, routing_type, sent_at, expiration, copy_reason, to_queue, properties"
COPY_DDL = (
    "message_id long, address string, routing_type string, sent_at timestamp, "
    "expiration timestamp, copy_reason string, to_queue string, properties map<string,string>"
)


def state(
    queue: str,
    message_id: int,
    status: str,
    count: int,
    routed: int,
    status_t: int,
    redeliver: int | None = None,
) -> tuple:
    return (
        queue,
        message_id,
        status,
        count,
        None if redeliver is None else at(redeliver),
        at(routed),
        at(status_t),
    )


def entry(t: int, queue: str | None, message_id: int, event: str, count: int, **detail: str):
    return (at(t), queue, message_id, event, count, detail)


def routed(t: int, queue: str, message_id: int, address: str, copy_reason: str | None = None):
    extra = {"copy_reason": copy_reason} if copy_reason else {}
    return entry(t, queue, message_id, "ROUTED", 0, address=address, **extra)


@dataclass
class Batch:
    queue_rows: DataFrame
    journal: DataFrame
    copies: DataFrame
    rejected: DataFrame

    def state(self, queues: Iterable[str] = (), ids: Iterable[int] = ()) -> DataFrame:
        """Queue rows of those queues, or of those messages in any queue (SPEC §3.4 state)."""
        keep = F.col("queue").isin(list(queues)) | F.col("message_id").isin(list(ids))
        return self.queue_rows.where(keep).select(*STATE.split(", "))

    def journal_of(self, ids: Iterable[int]) -> DataFrame:
        return self.journal.where(F.col("message_id").isin(list(ids)))

    def copy(self, message_id: int) -> DataFrame:
        return self.copies.where(F.col("message_id") == message_id).select(*COPY.split(", "))


@pytest.fixture(scope="module")
def batch(spark) -> Iterator[Batch]:
    topology = topology_of(RULES_XML)
    events = batch_events(spark, MESSAGES, DELIVERIES, MANAGEMENT)
    scratch = Scratch()
    try:
        result = run_batch(
            events, no_pending(spark), JobState(), topology, Router(topology), scratch
        )
        # each output computed once: the tests read many small slices of them
        yield Batch(
            *[
                scratch.keep(frame)
                for frame in (
                    result.queue_rows.drop("_file"),
                    result.journal,
                    result.copies,
                    result.rejected,
                )
            ]
        )
    finally:
        scratch.release()


def assert_journal(actual: DataFrame, expected: list[tuple]) -> None:
    assert_rows_equal(
        actual,
        actual.sparkSession.createDataFrame(expected, JOURNAL_ROWS),
        order_by=["at", "queue", "message_id", "event", "delivery_count"],
        ignore_nullable=True,
    )


def assert_copy(batch: Batch, expected: tuple) -> None:
    assert_rows_equal(
        batch.copy(expected[0]),
        batch.copies.sparkSession.createDataFrame([expected], COPY_DDL),
        order_by=["message_id"],
        ignore_nullable=True,
    )


# --------------------------------------------------------------------------------------
# Dead letters (DeadLetterAddressTest)
# --------------------------------------------------------------------------------------


def test_nothing_is_rejected(batch):
    assert batch.rejected.isEmpty()


def test_dead_letter_after_max_delivery_attempts(batch):
    """max-delivery-attempts 2: the second ROLLBACK dead-letters the message to the DLA's
    queue; the copy has a new id, breadcrumbs, no expiration and a delivery count of 0.
    A message ACKed after one ROLLBACK counts two deliveries."""
    assert_rows(
        batch.state(["basic.q"], [D11]),
        STATE_DDL,
        [
            state("basic.q", 11, "DEAD_LETTERED", 2, 0, 200),
            state("basic.q", 12, "ACKED", 2, 0, 300),
            state("DLA.q", D11, "PENDING", 0, 200, 200),
        ],
    )
    assert_journal(
        batch.journal_of([11, 12, D11]),
        [
            routed(0, "basic.q", 11, "basic"),
            routed(0, "basic.q", 12, "basic"),
            entry(100, "basic.q", 11, "REDELIVERY_SCHEDULED", 1),
            entry(100, "basic.q", 12, "REDELIVERY_SCHEDULED", 1),
            entry(
                200,
                "basic.q",
                11,
                "DEAD_LETTERED",
                2,
                to_address="DLA",
                copy_id=str(D11),
                reason="MAX_DELIVERY_ATTEMPTS",
            ),
            entry(300, "basic.q", 12, "ACKED", 2),
            routed(200, "DLA.q", D11, "DLA", DEAD_LETTER),
        ],
    )
    assert_copy(
        batch,
        (
            D11,
            "DLA",
            None,
            at(200),
            None,
            DEAD_LETTER,
            None,
            {"tag": "m11", **orig("basic", "basic.q", 11)},
        ),
    )


@pytest.mark.parametrize(
    ("queue", "message_id", "reason"),
    [
        ("nobind.q", 21, "DLA_NO_BINDINGS"),
        ("nodla.q", 31, "NO_DLA"),
        ("blank.q", 32, "DLA_NO_BINDINGS"),
    ],
    ids=["dla-without-bindings", "no-dla", "empty-dla"],
)
def test_dead_letter_with_nowhere_to_go_is_dropped(batch, queue, message_id, reason):
    """An explicitly empty ``<dead-letter-address/>`` is an address without bindings, as
    Artemis's ``QueueImpl.sendToDeadLetterAddress`` takes it (it tests for null only)."""
    assert_rows(batch.state([queue]), STATE_DDL, [state(queue, message_id, "DROPPED", 1, 0, 100)])
    assert_journal(
        batch.journal_of([message_id]),
        [
            routed(0, queue, message_id, queue.removesuffix(".q")),
            entry(100, queue, message_id, "DROPPED", 1, reason=reason),
        ],
    )
    assert batch.copies.where(F.col("address") == "EMPTY").isEmpty()


def test_two_queues_bound_to_the_dla_both_get_the_copy(batch):
    assert_rows(
        batch.state(["two.q", "DLQ2a", "DLQ2b"]),
        STATE_DDL,
        [
            state("two.q", 41, "DEAD_LETTERED", 1, 0, 100),
            state("DLQ2a", D41, "PENDING", 0, 100, 100),
            state("DLQ2b", D41, "PENDING", 0, 100, 100),
        ],
    )
    assert batch.copies.where(F.col("address") == "DLA2").count() == 1  # one copy, two queues


def test_sixteen_attempts(batch):
    """max-delivery-attempts 16: fifteen ROLLBACKs schedule redeliveries (counts 1..15),
    the sixteenth dead-letters; a message rolled back fifteen times stays PENDING."""
    assert_rows(
        batch.state(["sixteen.q"], [D51]),
        STATE_DDL,
        [
            state("sixteen.q", 51, "DEAD_LETTERED", 16, 0, 1600),
            state("sixteen.q", 52, "PENDING", 15, 0, 1500),
            state("DLA.q", D51, "PENDING", 0, 1600, 1600),
        ],
    )
    assert_rows(
        batch.journal_of([51])
        .where(F.col("event") != "ROUTED")
        .select("at", "event", "delivery_count"),
        "at timestamp, event string, delivery_count int",
        [(at(100 * n), "REDELIVERY_SCHEDULED", n) for n in range(1, 16)]
        + [(at(1600), "DEAD_LETTERED", 16)],
    )


# --------------------------------------------------------------------------------------
# Redelivery delays (MultipliedDelayedMessageTest)
# --------------------------------------------------------------------------------------


def test_multiplied_redelivery_delays(batch):
    """redelivery-delay 100, multiplier 2, max-redelivery-delay 1000: the n-th ROLLBACK
    schedules the redelivery 100 x 2^(n-1) ms later, capped at 1000."""
    scheduled = batch.journal_of([61]).where(F.col("event") == "REDELIVERY_SCHEDULED")
    redeliver_at = F.to_timestamp(F.col("detail")["redeliver_at"])
    assert_rows(
        scheduled.select(
            "delivery_count", (F.unix_millis(redeliver_at) - F.unix_millis("at")).alias("delay_ms")
        ),
        "delivery_count int, delay_ms long",
        [(1, 100), (2, 200), (3, 400), (4, 800), (5, 1000), (6, 1000)],
    )
    assert_rows(
        batch.state(["delayed.q"]),
        STATE_DDL,
        [state("delayed.q", 61, "PENDING", 6, 0, 6000, redeliver=7000)],
    )


# --------------------------------------------------------------------------------------
# Expiry (ExpiryAddressTest)
# --------------------------------------------------------------------------------------


def test_expiry_to_the_expiry_address(batch):
    """Expired by the lake clock at its expiration: moved to the expiry address with
    _AMQ_ACTUAL_EXPIRY; the copy takes the original routing type only as breadcrumb.
    Without an expiry address the message is dropped."""
    assert_rows(
        batch.state(["exp.q", "EXPA.q", "noexp.q"]),
        STATE_DDL,
        [
            state("exp.q", 71, "EXPIRED", 0, 0, 500),
            state("EXPA.q", E71, "PENDING", 0, 500, 500),
            state("noexp.q", 81, "DROPPED", 0, 0, 500),
        ],
    )
    assert_journal(
        batch.journal_of([71, 81, E71]).where(F.col("event") != "ROUTED"),
        [
            entry(500, "exp.q", 71, "EXPIRED", 0, to_address="EXPA", copy_id=str(E71)),
            entry(500, "noexp.q", 81, "DROPPED", 0, reason="NO_EXPIRY_ADDRESS"),
        ],
    )
    properties = {
        "tag": "m71",
        **orig("exp", "exp.q", 71),
        "_AMQ_ORIG_ROUTING_TYPE": "ANYCAST",
        "_AMQ_ACTUAL_EXPIRY": actual_expiry(500),
    }
    assert_copy(batch, (E71, "EXPA", None, at(500), None, EXPIRY, None, properties))


def test_expire_then_dead_letter(batch):
    """91 expires from ed.q into EDX.q; that copy is rolled back past EDX's
    max-delivery-attempts and dead-lettered to DLA, keeping both hops as breadcrumbs."""
    assert_rows(
        batch.state(["ed.q", "EDX.q"], [DX91]),
        STATE_DDL,
        [
            state("ed.q", 91, "EXPIRED", 0, 0, 300),
            state("EDX.q", X91, "DEAD_LETTERED", 1, 300, 700),
            state("DLA.q", DX91, "PENDING", 0, 700, 700),
        ],
    )
    properties = {
        "tag": "m91",
        "_AMQ_ACTUAL_EXPIRY": actual_expiry(300),
        **orig("EDX", "EDX.q", X91),
        **orig("ed", "ed.q", 91, 0),
    }
    assert_copy(batch, (DX91, "DLA", None, at(700), None, DEAD_LETTER, None, properties))


# --------------------------------------------------------------------------------------
# Retry from the dead-letter queue
# --------------------------------------------------------------------------------------


def test_retry_of_a_diverted_message_from_the_dlq(batch):
    """100 is diverted rA -> rB into rX (rtap copies it to rTAP), dead-lettered from rX to
    rDLQ, and RETRY sends it back to rX, the queue it was dead-lettered from, bypassing
    rB's divert (rTAP.q gets no second copy)."""
    assert_rows(
        batch.state(["rX", "rTAP.q", "rDLQ"]),
        STATE_DDL,
        [
            state("rX", V100, "DEAD_LETTERED", 1, 0, 100),
            state("rTAP.q", W100, "PENDING", 0, 0, 0),
            state("rDLQ", DV100, "MOVED", 0, 100, 200),
            state("rX", RV100, "PENDING", 0, 200, 200),
        ],
    )
    assert_journal(
        batch.journal_of([DV100, RV100]),
        [
            routed(100, "rDLQ", DV100, "rDLA", DEAD_LETTER),
            entry(
                200, "rDLQ", DV100, "RETRIED", 0, to_address="rB", to_queue="rX", copy_id=str(RV100)
            ),
            routed(200, "rX", RV100, "rB", RETRY),
        ],
    )
    properties = {
        "tag": "m100",
        **orig("rDLA", "rDLQ", DV100),
        **orig("rA", "rdiv", 100, 0),
        **orig("rB", "rX", V100, 1),
    }
    assert_copy(batch, (RV100, "rB", None, at(200), None, RETRY, "rX", properties))


# --------------------------------------------------------------------------------------
# One batch or one event per batch: the same tables
# --------------------------------------------------------------------------------------

SAME_XML = """
<address-settings>
  <address-setting match="orders"><dead-letter-address>DLA</dead-letter-address>
    <expiry-address>EXP</expiry-address><max-delivery-attempts>2</max-delivery-attempts>
    <redelivery-delay>100</redelivery-delay><redelivery-delay-multiplier>2</redelivery-delay-multiplier>
  </address-setting>
</address-settings>
<diverts>
  <divert name="tap"><address>orders</address><forwarding-address>taps</forwarding-address>
    <filter string="region = 'eu'"/></divert>
</diverts>
<addresses>
  <address name="orders"><anycast><queue name="o1"/><queue name="o2"/></anycast>
    <multicast><queue name="audit"/></multicast></address>
  <address name="taps"><anycast><queue name="taps.q"/></anycast></address>
  <address name="DLA"><anycast><queue name="DLQ"/></anycast></address>
  <address name="EXP"><anycast><queue name="EXPQ"/></anycast></address>
</addresses>
"""
D1 = copy_id_py(1, DEAD_LETTER, "o1", "DLA", None)
R1 = copy_id_py(D1, RETRY, "DLQ", "orders", "o1")
EU = {"region": "eu"}
# one event at each instant: each is its own micro-batch under --max-events-per-trigger 1
SAME_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("orders", message(1, "orders", 0, properties=EU)),  # o1 (turn), audit, taps
    ("orders", message(2, "orders", 10, expiration=35)),  # o2, audit; expires at 35
    ("orders", message(3, "orders", 20, routing_type="ANYCAST")),  # o1 only
    ("deliveries", delivery("o1", 1, "ROLLBACK", 30)),  # redelivery at 130
    ("deliveries", delivery("o1", 1, "ROLLBACK", 140)),  # second attempt: to DLQ
    ("management", {"op": "RETRY", "queue": "DLQ", "message_id": D1, "at": at(150)}),
    ("orders", message(4, "orders", 160, properties=EU)),  # o2 (turn), audit, taps
]
TABLE_KEYS = {
    "queue_messages": ["queue", "message_id"],
    "journal": ["at", "queue", "message_id", "event", "delivery_count"],
    "rejected": ["source", "at", "reason", "row"],
}


def run_job(workdir: Path, spark, *options: str) -> tuple[Lake, int]:
    """The job over a fresh lake holding SAME_EVENTS, one commit per event; returns the lake
    and the number of micro-batches."""
    return route_events(workdir, spark, SAME_XML, SAME_EVENTS, *options)


def route_events(
    workdir: Path, spark, xml: str, events: Iterable[tuple[str, dict[str, Any]]], *options: str
) -> tuple[Lake, int]:
    """The job, configured with ``xml``, over a fresh lake holding ``events`` (``deliveries``,
    ``management`` or a message for its address table), one commit per event; returns the
    lake and the number of micro-batches. ``workdir`` may exist already, holding what a
    test leaves for the job to find."""
    workdir.mkdir(exist_ok=True)
    lake = Lake.at(workdir / "lake")
    conf = workdir / "broker.xml"
    conf.write_text(broker(xml))
    for table, row in events:
        if table == "deliveries":
            append(lake.deliveries, [row], schemas.DELIVERY)
        elif table == "management":
            append(lake.management, [row], schemas.MANAGEMENT)
        else:
            append(lake.address_table(row["address"]), [row], schemas.MESSAGE)
    return lake, len(batch_lines(spark, lake, conf, *options))


def batch_lines(spark, lake: Lake, conf: Path, *options: str) -> list[str]:
    """The job run available-now over ``lake``: its line of figures for each micro-batch."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--conf", str(conf), "--lake", lake.root, "--available-now", *options]
    status = route.main(argv, spark=spark, out=out, err=err)
    assert status == 0, err.getvalue()
    return [line for line in out.getvalue().splitlines() if line.startswith("batch ")]


def table_frame(spark, path: str) -> DataFrame | None:
    """A Delta table read with delta-rs alone (not the job's reader), as a Spark frame;
    None when the job never created it."""
    table = read_table(path)
    if not table.num_columns:
        return None
    if not table.num_rows:  # Spark takes no Arrow table without a batch
        return spark.createDataFrame([], from_arrow_schema(table.schema))
    return spark.createDataFrame(table)


def test_one_batch_or_one_event_per_batch_gives_the_same_tables(spark, tmp_path):
    whole, whole_batches = run_job(tmp_path / "whole", spark)
    single, single_batches = run_job(tmp_path / "single", spark, "--max-events-per-trigger", "1")
    assert (whole_batches, single_batches) == (1, len(SAME_EVENTS))

    # the workload does what it is meant to: turns, a divert, expiry, dead letter, retry
    summary = sorted((r["queue"], r["message_id"], r["status"]) for r in rows(whole.queue_messages))
    x2 = {q: copy_id_py(2, EXPIRY, q, "EXP", None) for q in ("o2", "audit")}
    taps = {m: divert_copy(m, "tap", "taps") for m in (1, 4)}
    assert summary == sorted(
        [
            ("o1", 1, "DEAD_LETTERED"),
            ("o1", 3, "PENDING"),
            ("o1", R1, "PENDING"),
            ("o2", 2, "EXPIRED"),
            ("o2", 4, "PENDING"),
            ("audit", 1, "PENDING"),
            ("audit", 2, "EXPIRED"),
            ("audit", 4, "PENDING"),
            ("taps.q", taps[1], "PENDING"),
            ("taps.q", taps[4], "PENDING"),
            ("DLQ", D1, "MOVED"),
            ("EXPQ", x2["o2"], "PENDING"),
            ("EXPQ", x2["audit"], "PENDING"),
        ]
    )
    assert not rows(whole.rejected)

    assert_same_tables(spark, single, whole, {"orders", "taps", "DLA", "EXP"})


TURNS_XML = """
<address-settings>
  <address-setting match="src"><dead-letter-address>dst</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
</address-settings>
<diverts>
  <divert name="tap"><address>src</address><forwarding-address>dst</forwarding-address></divert>
</diverts>
<addresses>
  <address name="src"><anycast><queue name="src.q"/></anycast></address>
  <address name="dst"><anycast><queue name="dst.a"/><queue name="dst.b"/></anycast></address>
</addresses>
"""
TURN_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("src", message(1, "src", 0)),  # src.q, and diverted to dst
    ("dst", message(2, "dst", 10)),
    ("src", message(3, "src", 20)),  # src.q, and diverted to dst
    ("deliveries", delivery("src.q", 1, "ROLLBACK", 30)),  # dead-lettered to dst
    ("dst", message(4, "dst", 40)),
]


def test_an_address_takes_turns_in_time_order_whatever_pass_or_round_brings_its_rows(
    spark, tmp_path
):
    """dst's anycast queues take turns in ``(sent_at, message_id)`` order (SPEC §5.2) among
    its producers' rows, the divert copies of src's (routed in a later pass) and a dead
    letter of src's (a later round): one batch takes them as one event a batch does."""
    taps = {m: divert_copy(m, "tap", "dst") for m in (1, 3)}
    dead = copy_id_py(1, DEAD_LETTER, "src.q", "dst", None)
    in_turn = [
        ("dst.a", taps[1]),
        ("dst.b", 2),
        ("dst.a", taps[3]),
        ("dst.b", dead),
        ("dst.a", 4),
    ]
    for name, options in (("whole", ()), ("single", ("--max-events-per-trigger", "1"))):
        lake, _ = route_events(tmp_path / name, spark, TURNS_XML, TURN_EVENTS, *options)
        dst = sorted(
            (r["routed_at"], r["queue"], r["message_id"])
            for r in rows(lake.queue_messages)
            if r["queue"].startswith("dst.")
        )
        assert [(queue, message_id) for _, queue, message_id in dst] == in_turn, name
        assert DeltaStorage(lake).state().positions == {"anycast:dst": 1}, name


AS_OF_XML = """
<address-settings>
  <address-setting match="#"><expiry-address>EXP</expiry-address></address-setting>
</address-settings>
<addresses>
  <address name="orders"><anycast><queue name="o1"/></anycast></address>
  <address name="EXP"><anycast><queue name="EXPQ"/></anycast></address>
</addresses>
"""
AS_OF_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("orders", message(1, "orders", 0, expiration=130)),
    ("orders", message(2, "orders", 50)),
    ("deliveries", delivery("o1", 1, "ROLLBACK", 120)),  # before 1 expires
    ("orders", message(3, "orders", 200, expiration=500)),  # expires by the as-of alone
]


def test_an_as_of_expires_nothing_before_the_events_of_later_batches(spark, tmp_path):
    """``--as-of`` 1 s moves the lake clock past both expirations (SPEC §5.4). Cut one event
    a batch, the first batch must not expire message 1 at 130 ms: the ROLLBACK at 120 ms
    comes in a later batch. Each batch applies the as-of up to its cut only, and one more
    batch the rest (message 3, at 500 ms)."""
    as_of = ("--as-of", at(1000).isoformat())
    whole, _ = route_events(tmp_path / "whole", spark, AS_OF_XML, AS_OF_EVENTS, *as_of)
    single, batches = route_events(
        tmp_path / "single", spark, AS_OF_XML, AS_OF_EVENTS, *as_of, "--max-events-per-trigger", "1"
    )
    for lake in (whole, single):
        history = sorted(
            (r["message_id"], r["at"], r["event"], r["delivery_count"])
            for r in rows(lake.journal)
            if r["queue"] == "o1" and r["message_id"] != 2
        )
        assert history == [
            (1, at(0), "ROUTED", 0),
            (1, at(120), "REDELIVERY_SCHEDULED", 1),
            (1, at(130), "EXPIRED", 1),
            (3, at(200), "ROUTED", 0),
            (3, at(500), "EXPIRED", 0),
        ]
        assert not rows(lake.rejected)
    assert batches == len(AS_OF_EVENTS) + 1
    assert_same_tables(spark, single, whole, {"orders", "EXP"})


SELF_EXPIRY_XML = """
<address-settings>
  <address-setting match="#"><expiry-address>EXP</expiry-address>
    <expiry-delay>100</expiry-delay></address-setting>
</address-settings>
<addresses>
  <address name="orders"><anycast><queue name="o1"/></anycast></address>
  <address name="EXP"><multicast><queue name="EXPQ"/><queue name="EXPQ2"/></multicast></address>
</addresses>
"""


def test_a_queue_on_its_own_expiry_address_expires_nothing(spark, tmp_path):
    """EXP is its own expiry address ('#'), and its expiry-delay gives every copy entering it
    an expiration. As Artemis's expiry scanner (``QueueImpl.isExpiryDisabled``), its queues
    expire nothing: each expiry would copy the message into both again, twice as many every
    100 ms. Message 1 expires from o1 once; message 2, sent to EXP, stays."""
    assert topology_of(SELF_EXPIRY_XML).expiry_disabled == ("EXPQ", "EXPQ2")
    events = [("orders", message(1, "orders", 0)), ("EXP", message(2, "EXP", 0, expiration=50))]
    as_of = ("--as-of", at(350).isoformat())
    lake, _ = route_events(tmp_path / "run", spark, SELF_EXPIRY_XML, events, *as_of)
    copy = copy_id_py(1, EXPIRY, "o1", "EXP", None)
    assert sorted(
        (r["queue"], r["message_id"], r["status"], r["expiration"])
        for r in rows(lake.queue_messages)
    ) == [
        ("EXPQ", 2, "PENDING", at(50)),
        ("EXPQ", copy, "PENDING", at(200)),
        ("EXPQ2", 2, "PENDING", at(50)),
        ("EXPQ2", copy, "PENDING", at(200)),
        ("o1", 1, "EXPIRED", at(100)),
    ]


def test_an_address_table_left_without_a_version_is_created_by_the_next_run(spark, tmp_path):
    """A writer killed while creating an address table (the job's first expiry copies, say)
    leaves its ``_delta_log`` without a version, beside data files no commit names: to Delta
    there is no table yet. The next run routes as if the folder were not there and commits
    the table's version 0 (it used to stop with a lake error: delta-rs found no version)."""
    whole, _ = run_job(tmp_path / "whole", spark)
    left = Lake.at(tmp_path / "left" / "lake")
    log = Path(left.address_table("EXP"), DELTA_LOG)
    log.mkdir(parents=True)
    (log / ".00000000000000000000.json.3f9c.tmp").write_text("{}")  # a commit never renamed
    (log.parent / "part-00000-3f9c.c000.snappy.parquet").write_bytes(b"")  # and its data
    assert left.address_sources() == []

    routed, _ = route_events(tmp_path / "left", spark, SAME_XML, SAME_EVENTS)
    assert_same_tables(spark, routed, whole, {"orders", "taps", "DLA", "EXP"})


def assert_same_tables(spark, single: Lake, whole: Lake, addresses: set[str]) -> None:
    """The two lakes hold the same rows in every job table and every address table, and
    their address tables are those of ``addresses``."""
    for name, keys in TABLE_KEYS.items():
        one, other = table_frame(spark, single.table(name)), table_frame(spark, whole.table(name))
        assert (one is None) == (other is None), name
        if one is not None:
            assert_rows_equal(one, other, order_by=keys)
    sources = whole.address_sources()
    assert single.address_sources() == sources
    assert {address_of_source(s) for s in sources} == addresses
    for source in sources:
        assert_rows_equal(
            table_frame(spark, single.table(source)),
            table_frame(spark, whole.table(source)),
            order_by=["message_id"],
        )


def test_a_small_batch_in_one_partition_gives_the_tables_of_a_partitioned_one(
    spark, tmp_path, monkeypatch
):
    """A small batch runs in one shuffle partition (``session.SMALL_BATCH_CONF``): the same
    rows as the batch planned in the session's partitions, and one file a table (and a
    ``queue_messages`` status) where the partitioned batch writes several."""
    small, _ = run_job(tmp_path / "small", spark)
    monkeypatch.setattr(session, "SMALL_BATCH_ROWS", -1)  # every batch is a large one
    partitioned, _ = run_job(tmp_path / "partitioned", spark)
    assert_same_tables(spark, small, partitioned, {"orders", "taps", "DLA", "EXP"})

    def most_files(lake: Lake) -> int:
        """The most data files in one directory of a table only the job writes."""
        written = [lake.journal, lake.queue_messages, *map(lake.address_table, ("taps", "EXP"))]
        return max(
            max(Counter(uri.rsplit("/", 1)[0] for uri in DeltaTable(t).file_uris()).values())
            for t in written
        )

    assert (most_files(small), most_files(partitioned) > 1) == (1, True)


def test_changes_to_earlier_rows_apply_the_same_shuffled_as_broadcast(spark, tmp_path, monkeypatch):
    """A batch of more than ``engine.BROADCAST_CHANGES`` input rows joins the fold's changes
    to the queue rows by a shuffle of both; a smaller one broadcasts the changes. One event
    a batch, each changing a row of an earlier batch, every change joined by a shuffle: the
    tables of the whole input in one batch, as one event a batch with the changes broadcast
    gives (``test_one_batch_or_one_event_per_batch_gives_the_same_tables``)."""
    whole, _ = run_job(tmp_path / "whole", spark)
    joins: list[bool] = []
    apply_changes = engine.apply_changes

    def spy(rows: DataFrame, changed: DataFrame, *, broadcast: bool) -> DataFrame:
        joins.append(broadcast)
        return apply_changes(rows, changed, broadcast=broadcast)

    monkeypatch.setattr(engine, "apply_changes", spy)
    monkeypatch.setattr(engine, "BROADCAST_CHANGES", -1)  # every batch is a large one
    shuffled, _ = run_job(tmp_path / "shuffled", spark, "--max-events-per-trigger", "1")
    assert joins and not any(joins)
    assert_same_tables(spark, shuffled, whole, {"orders", "taps", "DLA", "EXP"})


TAP_XML = """
<diverts>
  <divert name="tap"><address>orders</address><forwarding-address>taps</forwarding-address></divert>
</diverts>
<addresses>
  <address name="orders"><anycast><queue name="o1"/></anycast></address>
  <address name="taps"><anycast><queue name="taps.q"/></anycast></address>
</addresses>
"""


def test_the_copies_a_batch_writes_make_no_batch_of_their_own(spark, tmp_path):
    """The job's own commit to an address table is the lake's next version, but not new
    input: the run after the one that wrote copies has nothing to do (docs/DESIGN.md)."""
    workdir = tmp_path / "run"
    lake, batches = route_events(workdir, spark, TAP_XML, [("orders", message(1, "orders", 0))])
    conf = workdir / "broker.xml"
    assert batches == 1
    taps = [r["message_id"] for r in rows(lake.address_table("taps"))]
    assert taps == [divert_copy(1, "tap", "taps")]  # the job's own commit

    assert batch_lines(spark, lake, conf) == []
    append(lake.address_table("orders"), [message(2, "orders", 10)], schemas.MESSAGE)
    (line,) = batch_lines(spark, lake, conf)
    assert "rows in 1, routed 1, applied 0, copies 1," in line, line
    assert len(rows(lake.address_table("taps"))) == 2


def test_a_batch_without_a_row_writes_nothing_and_the_job_goes_on(spark, tmp_path):
    """A batch can hold no row: a producer's table created empty, or ``--as-of`` raised with
    nothing new and nothing due by it. Its plan knows every output empty, so it writes no
    row (the job used to stop there: no output to count)."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    lake = Lake.at(workdir / "lake")
    conf = workdir / "broker.xml"
    conf.write_text(broker(TAP_XML))
    append(lake.address_table("orders"), [], schemas.MESSAGE)  # the table created empty
    (line,) = batch_lines(spark, lake, conf)
    assert "rows in 0, routed 0, applied 0, copies 0, dead letters 0, expiries 0," in line, line
    assert not rows(lake.queue_messages)

    append(lake.address_table("orders"), [message(1, "orders", 0)], schemas.MESSAGE)
    assert len(batch_lines(spark, lake, conf)) == 1
    written = rows(lake.queue_messages)
    (line,) = batch_lines(spark, lake, conf, "--as-of", at(60_000).isoformat())
    assert "rows in 0, routed 0, applied 0, copies 0, dead letters 0, expiries 0," in line, line
    assert rows(lake.queue_messages) == written
    assert sorted((r["queue"], r["status"]) for r in written) == [
        ("o1", "PENDING"),
        ("taps.q", "PENDING"),
    ]
    assert not rows(lake.rejected)


@pytest.mark.parametrize("expirations", ["unknown", "known"])
def test_a_batch_without_events_applies_nothing_until_a_message_expires(
    spark, monkeypatch, expirations
):
    """A batch of producer rows alone runs no round of events unless a message in play
    expires by its lake clock: its queue rows are then its entries as routed, joined to no
    changes (``engine.run_batch``). The batch whose clock reaches an expiration expires
    the message (and moves it to the expiry address) as a batch with events would.

    Whether one expires is an action over the messages in play, unless the batch knows the
    PENDING rows' expirations (as the storage carries them) and none of those, or of the
    rows it routes, is due: then only the batch that reaches message 1's expiration asks."""
    asked: list[bool] = []  # each time the batch checked, what it found
    check = engine._expiring

    def expiring(*args: Any) -> bool:
        asked.append(check(*args))
        return asked[-1]

    monkeypatch.setattr(engine, "_expiring", expiring)
    topology = topology_of(RULES_XML)
    router = Router(topology)
    batches = [[message(1, "exp", 0, expiration=100)], [message(2, "exp", 50)]]
    batches.append([message(3, "exp", 200)])  # the clock passes message 1's expiration
    scratch = Scratch()
    pending: list[DataFrame] = []
    state = JobState()
    written = []
    try:
        for sent in batches:
            started_from = union([no_pending(spark).drop("_file"), *pending])
            earliest = started_from.agg(earliest_expiration()).collect()[0][0]
            result = run_batch(
                batch_events(spark, sent),
                started_from,
                state,
                topology,
                router,
                scratch,
                pending_expirations=Expirations(earliest) if expirations == "known" else None,
            )
            queue_rows = scratch.keep(result.queue_rows)
            plan = result.queue_rows._jdf.queryExecution().optimizedPlan().toString()
            statuses = sorted((r.queue, r.message_id, r.status) for r in queue_rows.collect())
            written.append((statuses, "Join" in plan))
            pending.append(queue_rows.where(F.col("status") == "PENDING"))
            state = JobState(result.clock)
    finally:
        scratch.release()

    expired = copy_id_py(1, EXPIRY, "exp.q", "EXPA", None)
    assert written == [
        ([("exp.q", 1, "PENDING")], False),
        ([("exp.q", 2, "PENDING")], False),
        ([("EXPA.q", expired, "PENDING"), ("exp.q", 1, "EXPIRED"), ("exp.q", 3, "PENDING")], True),
    ]
    assert asked == ([True] if expirations == "known" else [False, False, True])


def test_a_batch_routing_to_an_address_that_sets_expirations_asks_whether_one_expires(spark):
    """Entering an address with expiry settings (or an address a divert forwards to that
    has them) can give a row an expiration due by the clock: the batch cannot know that
    nothing expires from the rows' own expirations alone."""
    router = Router(topology_of(EXPIRY_SETTINGS_XML))

    assert not router.may_set_expiration_from(["plain"])
    assert router.may_set_expiration_from(["delayed"])
    assert router.may_set_expiration_from(["tapped"])  # its divert forwards to "delayed"
    assert not router.may_set_expiration_from(["cleared"])  # no-expiry only clears them


EXPIRY_SETTINGS_XML = """
<address-settings>
  <address-setting match="delayed"><expiry-delay>1000</expiry-delay></address-setting>
  <address-setting match="cleared"><no-expiry>true</no-expiry></address-setting>
</address-settings>
<diverts>
  <divert name="tap"><address>tapped</address><forwarding-address>delayed</forwarding-address></divert>
</diverts>
<addresses>
  <address name="plain"><anycast><queue name="plain.q"/></anycast></address>
  <address name="delayed"><anycast><queue name="delayed.q"/></anycast></address>
  <address name="cleared"><anycast><queue name="cleared.q"/></anycast></address>
  <address name="tapped"><anycast><queue name="tapped.q"/></anycast></address>
</addresses>
"""


ROUNDS_XML = """
<address-settings>
  <address-setting match="basic"><dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts>{auto}</address-setting>
</address-settings>
<diverts>
  <divert name="tap"><address>tapped</address><forwarding-address>basic</forwarding-address></divert>
</diverts>
<addresses>
  <address name="basic"><anycast><queue name="basic.q"/></anycast></address>
  <address name="tapped"><anycast><queue name="tapped.q"/></anycast></address>
  <address name="DLA"><multicast><queue name="DLA.all"/></multicast></address>
</addresses>
"""
AUTO_DLQ = "<auto-create-dead-letter-resources>true</auto-create-dead-letter-resources>"


@pytest.mark.parametrize("auto", ["", AUTO_DLQ], ids=["configured-queues", "auto-created-dlq"])
def test_each_round_routes_where_its_rows_are(spark, monkeypatch, auto):
    """Round 1 routes the messages at the addresses they were sent to, round 2 the dead-letter
    copy at the dead-letter address: the action that finds a round's copies (and the queues
    their moves create) says where they are, so round 2 plans no turn, divert copy or later
    pass for ``tapped``, where no copy can be."""
    given: list[frozenset[str] | None] = []
    route = Router.route

    def spy(self: Router, *args: Any, at: Any = None, **kwargs: Any):
        given.append(None if at is None else frozenset(at))
        return route(self, *args, at=at, **kwargs)

    monkeypatch.setattr(Router, "route", spy)
    topology = topology_of(ROUNDS_XML.format(auto=auto))
    scratch = Scratch()
    try:
        result = run_batch(
            batch_events(spark, [tagged(1, "basic")], rollbacks("basic.q", 1, [100])),
            no_pending(spark),
            JobState(),
            topology,
            Router(topology),
            scratch,
        )
        statuses = sorted((r.queue, r.status) for r in result.queue_rows.collect())
    finally:
        scratch.release()

    assert given == [frozenset({"basic"}), frozenset({"DLA"})]
    created = [("DLQ.basic", "PENDING")] if auto else []
    assert statuses == sorted([("DLA.all", "PENDING"), ("basic.q", "DEAD_LETTERED"), *created])
    assert list(result.created) == (["DLQ.basic"] if auto else [])
