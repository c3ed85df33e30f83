"""The running figures of each message's events (routing.plan.sequences): the vectorized pass
equals a plain per-message loop, wherever Arrow batch boundaries fall, and in Spark."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routing.io.storage import session_conf
from routing.plan.sequences import FIGURES, in_order, scan

KEY = ("queue", "message_id")
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

Event = dict[str, Any]


def reference(events: list[Event]) -> list[Event]:
    """The figures of one message's events, in order, by the rules of SPEC §5.3 written
    out one event at a time: a message that waits for its redelivery takes no delivery
    (nor a MOVE or SEND_TO_DLA by id) until then."""
    out: list[Event] = []
    rollbacks = 0  # the message's ROLLBACKs so far that did not wait (counted on past its end)
    until = events[0]["redeliver_at"]  # when the message may be delivered again
    ended = False
    for pos, e in enumerate(events, start=1):
        waiting = bool(
            e["_eligible"] and e["_ready"] and not ended and until is not None and e["at"] < until
        )
        live = e["_eligible"] and not waiting
        rollback, ack = e["_rollback"] and live, e["_ack"] and live
        attempts = e["max_delivery_attempts"] or 0
        rollbacks += rollback
        count = (e["delivery_count"] or 0) + rollbacks + ack
        ends = ack or (e["_terminal"] and live) or (rollback and attempts > 0 and count >= attempts)
        applied = live and not ended
        redeliver_at = None
        if applied and rollback and not ends:
            delay = e["redelivery_delay"]
            millis = int(
                min(
                    delay * e["redelivery_delay_multiplier"] ** (count - 1),
                    e["max_redelivery_delay"],
                )
            )
            redeliver_at = e["at"] + dt.timedelta(milliseconds=millis) if delay > 0 else None
            until = redeliver_at
        out.append(
            {
                "_pos": pos,
                "_count": count,
                "_ends": ends,
                "_applied": applied,
                "_waiting": waiting,
                "_waits_until": until if waiting else None,
                "_redeliver_at": redeliver_at,
            }
        )
        ended = ended or (ends and applied)
    ending = [f["_pos"] for f in out if f["_ends"] and f["_applied"]]
    first_end = ending[0] if ending else None
    live_positions = [
        f["_pos"] for f, e in zip(out, events, strict=True) if e["_eligible"] and not f["_waiting"]
    ]
    last = first_end if first_end is not None else (max(live_positions) if live_positions else None)
    for f in out:
        f["_first_end"] = first_end
        f["_last"] = last
        f["_redeliver_at_after"] = until
    return [{name: f[name] for name in FIGURE_NAMES} for f in out]


FIGURE_NAMES = [f.name for f in FIGURES.fields]


def event(queue: str, message_id: int, second: int, kind: str, **state: Any) -> Event:
    """An event: ``kind`` one of rollback, ack, terminal (by filter: needs no delivery),
    by_id (a MOVE or SEND_TO_DLA by id: terminal, needs one), ineligible."""
    eligible = kind != "ineligible"
    return {
        "queue": queue,
        "message_id": message_id,
        "at": T0 + dt.timedelta(seconds=second),
        "_eligible": eligible,
        "_rollback": kind == "rollback",
        "_ack": kind == "ack",
        "_terminal": kind in ("terminal", "by_id"),
        "_ready": kind in ("rollback", "ack", "by_id"),
        "delivery_count": state.get("delivery_count", 0),
        "redeliver_at": state.get("redeliver_at"),
        "max_delivery_attempts": state.get("attempts", 3),
        "redelivery_delay": state.get("delay", 0),
        "redelivery_delay_multiplier": state.get("multiplier", 1.0),
        "max_redelivery_delay": state.get("max_delay", 10 * state.get("delay", 0)),
    }


INPUT = pa.schema(
    [
        ("queue", pa.string()),
        ("message_id", pa.int64()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("_eligible", pa.bool_()),
        ("_rollback", pa.bool_()),
        ("_ack", pa.bool_()),
        ("_terminal", pa.bool_()),
        ("_ready", pa.bool_()),
        ("delivery_count", pa.int32()),
        ("redeliver_at", pa.timestamp("us", tz="UTC")),
        ("max_delivery_attempts", pa.int32()),
        ("redelivery_delay", pa.int64()),
        ("redelivery_delay_multiplier", pa.float64()),
        ("max_redelivery_delay", pa.int64()),
    ]
)


def run_scan(events: list[Event], cuts: list[int]) -> list[Event]:
    """:func:`scan` over the events cut into Arrow batches at ``cuts``."""
    table = pa.Table.from_pylist(events, schema=INPUT)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(events))), len(events)]
    batches = [
        table.slice(a, b - a).to_batches()[0] for a, b in itertools.pairwise(bounds) if b > a
    ]
    produced = list(scan(iter(batches), KEY))
    if not produced:
        return []
    out = pa.Table.from_batches(produced)
    return [{n: r[n] for n in FIGURE_NAMES} for r in out.to_pylist()]


def expected(events: list[Event]) -> list[Event]:
    figures: list[Event] = []
    start = 0
    for i in range(1, len(events) + 1):
        if i == len(events) or (events[i]["queue"], events[i]["message_id"]) != (
            events[start]["queue"],
            events[start]["message_id"],
        ):
            figures += reference(events[start:i])
            start = i
    return figures


def test_dead_letter_after_attempts_then_later_events_are_not_applied():
    """max-delivery-attempts 2: the second ROLLBACK ends the message; the ACK after it is
    not applied; the first ROLLBACK is the last rescheduling."""
    events = [
        event("q", 1, 1, "rollback", attempts=2),
        event("q", 1, 2, "rollback", attempts=2),
        event("q", 1, 3, "ack", attempts=2),
    ]
    got = run_scan(events, [])
    assert [f["_count"] for f in got] == [1, 2, 3]
    assert [f["_ends"] for f in got] == [False, True, True]
    assert [f["_applied"] for f in got] == [True, True, False]
    assert {f["_first_end"] for f in got} == {2}
    assert {f["_last"] for f in got} == {2}
    assert {f["_redeliver_at_after"] for f in got} == {None}  # no redelivery delay


def test_a_message_with_no_eligible_event_has_no_last_row():
    got = run_scan([event("q", 7, 1, "ineligible"), event("q", 8, 1, "ack")], [])
    assert (got[0]["_last"], got[0]["_applied"]) == (None, False)
    assert (got[1]["_last"], got[1]["_applied"], got[1]["_count"]) == (1, True, 1)


def test_a_message_waiting_for_its_redelivery_takes_no_delivery_until_then():
    """redelivery-delay 1.5 s, multiplier 2: a ROLLBACK at 1 s schedules 2.5 s; the ACK at
    2 s and the MOVE by id at 2 s wait (rejected, nothing counted); the ROLLBACK at 3 s
    applies (count 2, next 3 s + 3 s = 6 s); the MOVE by filter at 4 s takes the message."""
    state = {"attempts": 5, "delay": 1500, "multiplier": 2.0, "max_delay": 10_000}
    events = [
        event("q", 1, 1, "rollback", **state),
        event("q", 1, 2, "ack", **state),
        event("q", 1, 2, "by_id", **state),
        event("q", 1, 3, "rollback", **state),
        event("q", 1, 4, "terminal", **state),
    ]
    got = run_scan(events, [])
    second = dt.timedelta(seconds=1)
    assert [f["_waiting"] for f in got] == [False, True, True, False, False]
    assert [f["_waits_until"] for f in got] == [
        None,
        T0 + 2.5 * second,
        T0 + 2.5 * second,
        None,
        None,
    ]
    assert [f["_applied"] for f in got] == [True, False, False, True, True]
    assert [f["_count"] for f in got] == [1, 1, 1, 2, 2]
    assert [f["_redeliver_at"] for f in got] == [
        T0 + 2.5 * second,
        None,
        None,
        T0 + 6 * second,
        None,
    ]
    assert {f["_last"] for f in got} == {5}
    assert got == expected(events)


def test_a_redelivery_time_from_an_earlier_batch_holds_deliveries_back():
    """The message's ``redeliver_at`` from before the batch: a delivery before it waits."""
    until = T0 + dt.timedelta(seconds=5)
    events = [
        event("q", 1, 4, "ack", redeliver_at=until),
        event("q", 1, 5, "ack", redeliver_at=until),
    ]
    got = run_scan(events, [])
    assert [f["_waiting"] for f in got] == [True, False]
    assert [f["_applied"] for f in got] == [False, True]
    assert got == expected(events)


KINDS = st.sampled_from(
    ["rollback", "ack", "terminal", "by_id", "ineligible", "rollback", "rollback"]
)


@st.composite
def batches_of_events(draw) -> tuple[list[Event], list[int]]:
    messages = draw(st.lists(st.tuples(KINDS.map(lambda _: None), st.integers(0, 5)), max_size=12))
    events: list[Event] = []
    for number, (_, size) in enumerate(messages):
        state = {
            "delivery_count": draw(st.integers(0, 3)),
            "attempts": draw(st.integers(-1, 4)),
            "delay": draw(st.sampled_from([0, 0, 500, 1000, 2500])),
            "multiplier": draw(st.sampled_from([1.0, 2.0, 1.5])),
            "max_delay": draw(st.sampled_from([1000, 4000, 100_000])),
            "redeliver_at": draw(st.sampled_from([None, T0 + dt.timedelta(seconds=2)])),
        }
        queue = draw(st.sampled_from(["a", "b"]))
        for second in sorted(draw(st.lists(st.integers(0, 8), min_size=size, max_size=size))):
            events.append(event(queue, number, second, draw(KINDS), **state))
    cuts = draw(st.lists(st.integers(0, max(len(events), 1)), max_size=6))
    return events, cuts


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(batches_of_events())
def test_the_vectorized_pass_equals_the_loop_wherever_batches_are_cut(case):
    events, cuts = case
    assert run_scan(events, cuts) == expected(events)


@pytest.mark.parametrize("batch_rows", ["10000", "1"])
@pytest.mark.parametrize("partitions", ["2", "1"])
def test_in_order_sorts_and_groups_the_rows_in_spark(spark, partitions, batch_rows):
    """In the session's partitions, and in the one partition of a small batch
    (``session.SMALL_BATCH_CONF``), where no shuffle brings a message's events together;
    with a message's events in one Arrow batch, and cut across batches (one row each),
    which the UDF completes with the next batch."""
    conf = {
        "spark.sql.shuffle.partitions": partitions,
        "spark.sql.execution.arrow.maxRecordsPerBatch": batch_rows,
    }
    with session_conf(spark, conf):
        check_in_order(spark, shuffled=partitions != "1")


def check_in_order(spark, *, shuffled: bool) -> None:
    events = [
        event("q", 2, 3, "ack"),
        event("q", 1, 2, "ack"),
        event("q", 1, 1, "rollback"),
        event("r", 1, 1, "terminal"),
    ]
    rows = spark.createDataFrame(pa.Table.from_pylist(events, schema=INPUT).to_pandas())
    actual = in_order(rows, KEY, ["at"]).select(*KEY, "at", *[f.name for f in FIGURES.fields])
    plan = actual._jdf.queryExecution().executedPlan().toString()
    assert ("Exchange" in plan) == shuffled, plan
    ordered = sorted(events, key=lambda e: (e["queue"], e["message_id"], e["at"]))
    figures = expected(ordered)
    rows_expected = [
        {"queue": e["queue"], "message_id": e["message_id"], "at": e["at"], **f}
        for e, f in zip(ordered, figures, strict=True)
    ]
    assert_df_equality(
        actual,
        spark.createDataFrame(rows_expected, actual.schema),
        ignore_row_order=True,
        ignore_nullable=True,
    )
