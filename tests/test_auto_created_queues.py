"""Auto-created ``DLQ.``/``EXP.`` queues exist from the moment Artemis creates them (issue 24).

Artemis creates ``<prefix><address><suffix>`` on the dead-letter (expiry) address when
a message of that address is first dead-lettered (expired): ``QueueImpl.sendToDeadLetterAddress``
and ``QueueImpl.expire`` create the resources, then look up the bindings of the
address. Until then the queue is not a binding: another address's dead letters and
expiries find no bindings there (``DLA_NO_BINDINGS`` / ``EXPIRY_NO_BINDINGS``),
routing does not deliver to it, and deliveries and management rows naming it are
rejected. At one instant, things apply in the SPEC §5.4 order (message rows,
expiries, deliveries, management rows): a queue created by a delivery at t exists
for the deliveries and management rows at t, not for the message rows and expiries.

The library test plans ONE batch (``run_batch``) where three families of addresses
each share a dead-letter and an expiry address on which only ``audit.*`` addresses
auto-create resources: in ``*.us`` the first ``audit.all`` expiry and dead letter come
after a ``returns.us`` one, in ``*.eu`` before, in ``*.x`` at the same instant. The
job test runs a workload once in one micro-batch and once with one event per
micro-batch (the creation moments carried in the job state) and compares every table.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from routing.broker.ids import copy_id_py
from routing.broker.state import JobState
from routing.io.lake import Lake
from routing.io.storage import DeltaStorage
from routing.plan.assumptions import Existence, holds
from routing.plan.batch import BatchResult
from routing.plan.engine import run_batch
from routing.plan.router import Router
from routing.plan.scratch import Scratch
from tests.lakeio import at, rows
from tests.test_delivery_rules import STATE, STATE_DDL, assert_same_tables, route_events, state
from tests.test_routing_rules import (
    DEAD_LETTER,
    EXPIRY,
    assert_rows,
    batch_events,
    delivery,
    message,
    no_pending,
    topology_of,
)

XML = """
<address-settings>
  <address-setting match="#"><expiry-address>EXP</expiry-address>
    <dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
  <address-setting match="*.eu"><expiry-address>EXP2</expiry-address>
    <dead-letter-address>DLA2</dead-letter-address></address-setting>
  <address-setting match="*.x"><expiry-address>X3</expiry-address>
    <dead-letter-address>X3</dead-letter-address></address-setting>
  <address-setting match="audit.*">
    <auto-create-expiry-resources>true</auto-create-expiry-resources>
    <auto-create-dead-letter-resources>true</auto-create-dead-letter-resources></address-setting>
</address-settings>
<addresses>
  <address name="EXP"><multicast/></address>
  <address name="DLA"><multicast/></address>
  <address name="EXP2"><multicast/></address>
  <address name="DLA2"><multicast/></address>
  <address name="X3"><multicast/></address>
  <address name="audit.all"><multicast><queue name="audit.all"/></multicast></address>
  <address name="returns.us"><anycast><queue name="returns.us"/></anycast></address>
  <address name="audit.eu"><multicast><queue name="audit.eu"/></multicast></address>
  <address name="returns.eu"><anycast><queue name="returns.eu"/></anycast></address>
  <address name="audit.x"><multicast><queue name="audit.x"/></multicast></address>
  <address name="returns.x"><anycast><queue name="returns.x"/></anycast></address>
</addresses>
"""
FOR_AUDIT_ALL = {"_AMQ_ORIG_ADDRESS": "audit.all"}  # what DLQ.audit.all's filter takes


def expired(message_id: int, queue: str, target: str) -> int:
    return copy_id_py(message_id, EXPIRY, queue, target, None)


def dead(message_id: int, queue: str, target: str) -> int:
    return copy_id_py(message_id, DEAD_LETTER, queue, target, None)


def micros(t: int) -> int:
    return int(at(t).timestamp()) * 1_000_000 + at(t).microsecond


MESSAGES = [
    # *.us: EXP.audit.all and DLQ.audit.all are created at 9
    message(1, "returns.us", expiration=5),  # expires at 5: EXP has no binding yet
    message(2, "audit.all", expiration=9),  # creates EXP.audit.all and goes to it
    message(3, "returns.us", expiration=9),  # the same instant and kind: EXP has it
    message(4, "returns.us", expiration=12),
    message(5, "returns.us"),  # rolled back at 5: DLA has no binding yet
    message(6, "audit.all"),  # rolled back at 9: creates DLQ.audit.all
    message(7, "returns.us"),  # rolled back at 9
    message(8, "returns.us"),  # rolled back at 12
    message(9, "returns.us"),  # MOVEd to DLQ.audit.all at 8 (refused), then at 9
    message(10, "DLA", 9, properties=FOR_AUDIT_ALL),  # a message row at 9 comes first
    message(11, "DLA", 10, properties=FOR_AUDIT_ALL),
    # *.eu: EXP.audit.eu and DLQ.audit.eu are created at 3
    message(21, "audit.eu", expiration=3),
    message(22, "returns.eu", expiration=5),
    message(23, "audit.eu"),  # rolled back at 3
    message(24, "returns.eu"),  # rolled back at 5
    # *.x: X3 is both the expiry and the dead-letter address; DLQ.audit.x is made at 7
    message(31, "audit.x"),  # rolled back at 7
    message(32, "returns.x", expiration=7),  # expiries at 7 come before deliveries at 7
    message(33, "returns.x"),  # rolled back at 7
]
DELIVERIES = [
    delivery("returns.us", 5, "ROLLBACK", 5),
    delivery("audit.all", 6, "ROLLBACK", 9),
    delivery("returns.us", 7, "ROLLBACK", 9),
    delivery("returns.us", 8, "ROLLBACK", 12),
    delivery("DLQ.audit.all", 999, "ACK", 8),  # before the queue exists
    delivery("audit.eu", 23, "ROLLBACK", 3),
    delivery("returns.eu", 24, "ROLLBACK", 5),
    delivery("audit.x", 31, "ROLLBACK", 7),
    delivery("returns.x", 33, "ROLLBACK", 7),
]


def move(message_id: int, t: int) -> dict[str, Any]:
    return {
        "op": "MOVE",
        "queue": "returns.us",
        "message_id": message_id,
        "to_queue": "DLQ.audit.all",
        "at": at(t),
    }


MANAGEMENT = [move(9, 8), move(9, 9)]
M9 = copy_id_py(9, "MOVE", "returns.us", "DLA", "DLQ.audit.all")


@pytest.fixture(scope="module")
def batch(spark):
    topology = topology_of(XML)
    events = batch_events(spark, MESSAGES, DELIVERIES, MANAGEMENT)
    scratch = Scratch()
    try:
        result = run_batch(
            events,
            no_pending(spark),
            JobState(),
            topology,
            Router(topology),
            scratch,
            as_of=micros(100),
        )
        yield (
            result,
            *[
                scratch.keep(frame)
                for frame in (result.queue_rows.drop("_file"), result.journal, result.rejected)
            ],
        )
    finally:
        scratch.release()


def test_the_queues_exist_from_the_dead_letter_or_expiry_that_creates_them(batch):
    result, *_ = batch
    assert result.created == {
        "EXP.audit.all": (micros(9), 1),
        "DLQ.audit.all": (micros(9), 2),
        "EXP.audit.eu": (micros(3), 1),
        "DLQ.audit.eu": (micros(3), 2),
        "DLQ.audit.x": (micros(7), 2),
    }
    assert result.attempts == 2  # planned again, assuming what the first plan created


@contextmanager
def planned(events: DataFrame) -> Iterator[BatchResult]:
    """The batch of ``events`` planned from no state; its checkpoints released after."""
    topology = topology_of(XML)
    scratch = Scratch()
    try:
        yield run_batch(
            events, no_pending(events.sparkSession), JobState(), topology, Router(topology), scratch
        )
    finally:
        scratch.release()


def assert_states(result: BatchResult, expected: list[tuple]) -> None:
    assert_rows(result.queue_rows.select(*STATE.split(", ")), STATE_DDL, expected)


def assert_rejected(result: BatchResult, expected: list[tuple]) -> None:
    assert_rows(
        result.rejected.select("source", "at", "reason"),
        "source string, at timestamp, reason string",
        expected,
    )


def test_a_plan_that_saw_each_queue_when_it_existed_holds_at_once(spark):
    """A dead letter creates DLQ.audit.all at 9 and its consumer ACKs the copy at 10, in
    the same batch. The ACK takes the queue for one that exists (consumers name queues
    that exist), so the first plan's every decision matches what it found: one plan.
    An event naming it before 9 (the batch above) makes the batch planned again."""
    copy = dead(6, "audit.all", "DLA")
    events = batch_events(
        spark,
        [message(6, "audit.all")],
        [delivery("audit.all", 6, "ROLLBACK", 9), delivery("DLQ.audit.all", copy, "ACK", 10)],
    )
    with planned(events) as result:
        assert result.attempts == 1
        assert result.created == {"DLQ.audit.all": (micros(9), 2)}
        assert_states(
            result,
            [
                state("audit.all", 6, "DEAD_LETTERED", 1, 0, 9),
                state("DLQ.audit.all", copy, "ACKED", 1, 9, 10),
            ],
        )


def test_the_holds_check_reads_only_decisions_made_under_other_moments(spark):
    """A routing pass or a fold of a later round saw the moments the batch ends with: its
    decisions cannot change under them, and the check does not read its frame (here a
    frame with a row, which the check would take for a changed decision)."""
    final = {"DLQ.audit.all": (micros(9), 2)}

    @dataclass(frozen=True)
    class Decisions:
        seen: dict | None

        def changed(self, moments: dict) -> DataFrame:
            return spark.range(1)

    assert holds([Decisions(dict(final))], final)
    assert not holds([Decisions({})], final)
    assert not holds([Decisions({"DLQ.audit.all": (micros(9), 3)})], final)
    assert not holds([Decisions(None)], final)  # read whatever the moments


def test_a_queue_exists_from_its_creation_or_always_when_the_plan_assumes_it(spark):
    """DLQ.audit.all created at 9 by a ROLLBACK (rank 2, a delivery's): it exists for a
    delivery at 9 and later, not at 8, nor for a message row at 9 (rank 0). Assumed (the
    first plan takes a queue the events name for one that exists), it exists at any time;
    under the moments found, it exists as they say."""
    topology = topology_of(XML)
    moments = {"DLQ.audit.all": (micros(9), 2)}
    rows = spark.createDataFrame(
        [
            ("DLQ.audit.all", at(8), 2),
            ("DLQ.audit.all", at(9), 0),
            ("DLQ.audit.all", at(9), 2),
            ("DLQ.audit.all", at(10), 0),
            ("EXP.audit.all", at(10), 2),  # never created
            ("audit.all", at(1), 0),  # declared
        ],
        "queue string, at timestamp, rank int",
    )

    def existing(exists: Existence) -> list[bool]:
        found = rows.select(exists(F.col("queue"), F.col("at"), F.col("rank")).alias("e"))
        return [r.e for r in found.collect()]

    assert existing(Existence(topology, moments)) == [False, False, True, True, False, True]
    assumed = Existence(topology, {}, ("DLQ.audit.all",))
    assert existing(assumed) == [True, True, True, True, False, True]
    assert existing(assumed.under(moments)) == existing(Existence(topology, moments))


def test_a_routing_pass_asks_only_where_its_rows_can_be(spark):
    """A pass whose rows cannot be at an address with an auto-created multicast queue (here
    ``audit.all``, when ``DLQ.audit.all`` is on ``DLA``) would route no row differently
    under any moments: the check has no frame of it to read."""
    router = Router(topology_of(XML))
    assert not router.may_see_differently({"audit.all"})
    assert router.may_see_differently({"DLA"})
    assert router.may_see_differently()


def test_events_naming_a_queue_the_batch_never_creates_are_rejected_in_one_plan(spark):
    """The first plan takes DLQ.audit.all, named by deliveries and management rows, for a
    queue that exists; the batch creates nothing. No message can have entered it, so those
    events found none and changed nothing: the plan rejects them as unknown (whatever it
    rejected them for first) and holds, without being planned again."""
    copy = dead(6, "audit.all", "DLA")  # a copy's id: it waits for copies of later rounds
    events = batch_events(
        spark,
        [message(6, "audit.all")],
        [delivery("DLQ.audit.all", 999, "ACK", 5), delivery("DLQ.audit.all", copy, "ACK", 6)],
        [
            {"op": "SEND_TO_DLA", "queue": "DLQ.audit.all", "message_id": 999, "at": at(7)},
            {"op": "RETRY", "queue": "DLQ.audit.all", "filter": "priority > 4", "at": at(8)},
            # rejected by the first plan for another reason, then as unknown
            {"op": "RETRY", "queue": "DLQ.audit.all", "to_queue": "audit.all", "at": at(9)},
        ],
    )
    with planned(events) as result:
        assert result.created == {}
        assert result.attempts == 1
        unknown = "unknown queue 'DLQ.audit.all'"
        assert_rejected(
            result,
            [
                ("deliveries", at(5), unknown),
                ("deliveries", at(6), unknown),
                ("management", at(7), unknown),
                ("management", at(8), unknown),
                ("management", at(9), unknown),
            ],
        )
        assert_states(result, [state("audit.all", 6, "PENDING", 0, 0, 0)])


def test_a_move_to_a_queue_the_batch_never_creates_plans_the_batch_again(spark):
    """A MOVE to DLQ.audit.all, taken for a queue that exists, would put the message
    there: the first plan changed a message, so the batch is planned again, assuming what
    the first found, and the MOVE is rejected."""
    move = {
        "op": "MOVE",
        "queue": "audit.all",
        "message_id": 6,
        "to_queue": "DLQ.audit.all",
        "at": at(5),
    }
    events = batch_events(spark, [message(6, "audit.all")], [], [move])
    with planned(events) as result:
        assert result.created == {}
        assert result.attempts == 2
        assert_rejected(result, [("management", at(5), "to_queue 'DLQ.audit.all' does not exist")])
        assert_states(result, [state("audit.all", 6, "PENDING", 0, 0, 0)])


def test_queue_rows(batch):
    _, queue_rows, _, _ = batch
    assert_rows(
        queue_rows.select(*STATE.split(", ")),
        STATE_DDL,
        [
            state("returns.us", 1, "DROPPED", 0, 0, 5),
            state("audit.all", 2, "EXPIRED", 0, 0, 9),
            state("EXP.audit.all", expired(2, "audit.all", "EXP"), "PENDING", 0, 9, 9),
            state("returns.us", 3, "EXPIRED", 0, 0, 9),
            state("returns.us", 4, "EXPIRED", 0, 0, 12),
            state("returns.us", 5, "DROPPED", 1, 0, 5),
            state("audit.all", 6, "DEAD_LETTERED", 1, 0, 9),
            state("DLQ.audit.all", dead(6, "audit.all", "DLA"), "PENDING", 0, 9, 9),
            state("returns.us", 7, "DEAD_LETTERED", 1, 0, 9),
            state("returns.us", 8, "DEAD_LETTERED", 1, 0, 12),
            state("returns.us", 9, "MOVED", 0, 0, 9),
            state("DLQ.audit.all", M9, "PENDING", 0, 9, 9),
            state("DLQ.audit.all", 11, "PENDING", 0, 10, 10),
            state("audit.eu", 21, "EXPIRED", 0, 0, 3),
            state("EXP.audit.eu", expired(21, "audit.eu", "EXP2"), "PENDING", 0, 3, 3),
            state("returns.eu", 22, "EXPIRED", 0, 0, 5),
            state("audit.eu", 23, "DEAD_LETTERED", 1, 0, 3),
            state("DLQ.audit.eu", dead(23, "audit.eu", "DLA2"), "PENDING", 0, 3, 3),
            state("returns.eu", 24, "DEAD_LETTERED", 1, 0, 5),
            state("audit.x", 31, "DEAD_LETTERED", 1, 0, 7),
            state("DLQ.audit.x", dead(31, "audit.x", "X3"), "PENDING", 0, 7, 7),
            state("returns.x", 32, "DROPPED", 0, 0, 7),
            state("returns.x", 33, "DEAD_LETTERED", 1, 0, 7),
        ],
    )


def test_journal(batch):
    """Every transition but ROUTED, with its reason: the copies of other addresses that
    reach a shared address once it has its first auto-created queue find no route there."""
    _, _, journal, _ = batch

    def dropped(t: int, message_id: int, address: str) -> tuple:
        return (at(t), None, message_id, "DROPPED", "NO_ROUTE", address)

    assert_rows(
        journal.where(F.col("event") != "ROUTED").select(
            "at",
            "queue",
            "message_id",
            "event",
            F.col("detail")["reason"].alias("reason"),
            F.coalesce(F.col("detail")["to_address"], F.col("detail")["address"]).alias("to"),
        ),
        "at timestamp, queue string, message_id long, event string, reason string, to string",
        [
            (at(5), "returns.us", 1, "DROPPED", "EXPIRY_NO_BINDINGS", None),
            (at(9), "audit.all", 2, "EXPIRED", None, "EXP"),
            (at(9), "returns.us", 3, "EXPIRED", None, "EXP"),
            dropped(9, expired(3, "returns.us", "EXP"), "EXP"),
            (at(12), "returns.us", 4, "EXPIRED", None, "EXP"),
            dropped(12, expired(4, "returns.us", "EXP"), "EXP"),
            (at(5), "returns.us", 5, "DROPPED", "DLA_NO_BINDINGS", None),
            (at(9), "audit.all", 6, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "DLA"),
            (at(9), "returns.us", 7, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "DLA"),
            dropped(9, dead(7, "returns.us", "DLA"), "DLA"),
            (at(12), "returns.us", 8, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "DLA"),
            dropped(12, dead(8, "returns.us", "DLA"), "DLA"),
            (at(9), "returns.us", 9, "MOVED", None, "DLA"),
            dropped(9, 10, "DLA"),  # message rows at 9 come before the rollback at 9
            (at(3), "audit.eu", 21, "EXPIRED", None, "EXP2"),
            (at(5), "returns.eu", 22, "EXPIRED", None, "EXP2"),
            dropped(5, expired(22, "returns.eu", "EXP2"), "EXP2"),
            (at(3), "audit.eu", 23, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "DLA2"),
            (at(5), "returns.eu", 24, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "DLA2"),
            dropped(5, dead(24, "returns.eu", "DLA2"), "DLA2"),
            (at(7), "audit.x", 31, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "X3"),
            (at(7), "returns.x", 32, "DROPPED", "EXPIRY_NO_BINDINGS", None),
            (at(7), "returns.x", 33, "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", "X3"),
            dropped(7, dead(33, "returns.x", "X3"), "X3"),
        ],
    )


def test_rows_naming_a_queue_before_it_exists_are_rejected(batch):
    _, _, _, rejected = batch
    assert_rows(
        rejected.select("source", "at", "reason"),
        "source string, at timestamp, reason string",
        [
            ("deliveries", at(8), "unknown queue 'DLQ.audit.all'"),
            ("management", at(8), "to_queue 'DLQ.audit.all' does not exist"),
        ],
    )


def test_the_creation_moments_are_job_state():
    """Carried with each commit; a state written before them has created nothing yet."""
    state = JobState(5, {"anycast:q": 1}, {"DLQ.a": (7, 2)})
    assert JobState.from_json(state.to_json()) == state
    assert JobState.from_json('{"version": 1, "clock": 5, "positions": {}}') == JobState(5)


# --------------------------------------------------------------------------------------
# One batch or one event per batch: the same tables
# --------------------------------------------------------------------------------------

# one event at each instant: each is its own micro-batch under --max-events-per-trigger 1
JOB_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("messages", message(1, "returns.us", 0, expiration=50)),  # no binding on EXP at 50
    ("messages", message(2, "audit.all", 1, expiration=100)),  # creates EXP.audit.all at 100
    ("messages", message(3, "returns.us", 2, expiration=150)),
    ("messages", message(4, "returns.us", 3)),
    ("messages", message(5, "audit.all", 4)),
    ("messages", message(6, "returns.us", 5)),
    ("deliveries", delivery("returns.us", 4, "ROLLBACK", 60)),  # no binding on DLA at 60
    ("messages", message(7, "DLA", 90, properties=FOR_AUDIT_ALL)),  # before DLQ.audit.all
    ("management", move(6, 110)),  # before DLQ.audit.all: refused
    ("deliveries", delivery("audit.all", 5, "ROLLBACK", 120)),  # creates DLQ.audit.all
    ("deliveries", delivery("returns.us", 6, "ROLLBACK", 170)),
    ("messages", message(8, "DLA", 180, properties=FOR_AUDIT_ALL)),
]


def run_job(workdir: Path, spark, *options: str) -> tuple[Lake, int]:
    """The job over a fresh lake holding JOB_EVENTS, one commit per event; returns the
    lake and the number of micro-batches."""
    return route_events(workdir, spark, XML, JOB_EVENTS, *options)


def test_one_batch_or_one_event_per_batch_gives_the_same_tables(spark, tmp_path):
    whole, whole_batches = run_job(tmp_path / "whole", spark)
    single, single_batches = run_job(tmp_path / "single", spark, "--max-events-per-trigger", "1")
    assert (whole_batches, single_batches) == (1, len(JOB_EVENTS))

    summary = sorted((r["queue"], r["message_id"], r["status"]) for r in rows(whole.queue_messages))
    assert summary == sorted(
        [
            ("returns.us", 1, "DROPPED"),
            ("audit.all", 2, "EXPIRED"),
            ("EXP.audit.all", expired(2, "audit.all", "EXP"), "PENDING"),
            ("returns.us", 3, "EXPIRED"),
            ("returns.us", 4, "DROPPED"),
            ("audit.all", 5, "DEAD_LETTERED"),
            ("DLQ.audit.all", dead(5, "audit.all", "DLA"), "PENDING"),
            ("returns.us", 6, "DEAD_LETTERED"),
            ("DLQ.audit.all", 8, "PENDING"),
        ]
    )
    assert [r["reason"] for r in rows(whole.rejected)] == [
        "to_queue 'DLQ.audit.all' does not exist"
    ]
    created = {"EXP.audit.all": (micros(100), 1), "DLQ.audit.all": (micros(120), 2)}
    assert DeltaStorage(whole).state().created == created
    assert DeltaStorage(single).state().created == created

    assert_same_tables(spark, single, whole, {"returns.us", "audit.all", "DLA", "EXP"})
