"""What a batch's plan knows of its classified rows before it plans (``engine.batch_facts``)."""

from __future__ import annotations

from datetime import UTC, datetime

from routing.broker.ids import COPY_ID_BASE
from routing.plan.engine import batch_facts
from routing.plan.id_ranges import IdRanges

CLASSIFIED = (
    "source string, message_id long, address string, sent_at timestamp, expiration timestamp, "
    "queue string, to_queue string, filter string, at timestamp, _reason string, _own boolean"
)


def at(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)


def micros(second: int) -> int:
    return int(at(second).timestamp() * 1_000_000)


def test_facts_of_rows_at_many_addresses_and_filters(spark):
    rows = [
        # messages: two to route at two addresses, an own copy, a refused one
        ("addresses/orders", 1, "orders", at(1), at(50), None, None, None, None, None, False),
        ("addresses/audit", 2, "audit", at(3), at(40), None, None, None, None, None, False),
        (
            "addresses/audit",
            COPY_ID_BASE + 7,
            "audit",
            at(2),
            at(5),
            None,
            None,
            None,
            None,
            None,
            True,
        ),
        ("addresses/bills", 3, "bills", at(4), None, None, None, None, None, "bad", False),
        # deliveries: one names a copy, one a queue the plan expects to be created
        ("deliveries", 1, None, None, None, "orders", None, None, at(6), None, False),
        (
            "deliveries",
            COPY_ID_BASE + 9,
            None,
            None,
            None,
            "DLQ.orders",
            None,
            None,
            at(9),
            None,
            False,
        ),
        # operators' rows by filter, and one by id
        ("management", None, None, None, None, "orders", "audit", "a = 1", at(7), None, False),
        ("management", None, None, None, None, "orders", None, "b = 2", at(8), None, False),
        ("management", 2, None, None, None, "audit", None, None, at(5), None, False),
    ]
    facts = batch_facts(spark.createDataFrame(rows, CLASSIFIED), ["DLQ.orders"])

    assert facts.latest == micros(9)
    assert facts.filters == ("a = 1", "b = 2")
    assert facts.addresses == frozenset({"orders", "audit"})
    assert facts.earliest_expiration == micros(40)  # of the rows to route only
    assert (facts.rows, facts.own_copies, facts.routed, facts.refused) == (9, 1, 2, 1)
    assert (facts.events, facts.copy_events, facts.filter_ops, facts.expecting) == (5, 1, 2, 1)
    assert facts.event_ids == IdRanges(((1, 2), (COPY_ID_BASE + 9, COPY_ID_BASE + 9)))


def test_facts_of_no_rows(spark):
    facts = batch_facts(spark.createDataFrame([], CLASSIFIED), [])

    assert (facts.latest, facts.earliest_expiration) == (None, None)
    assert (facts.filters, facts.addresses, facts.event_ids) == ((), frozenset(), IdRanges(()))
    assert (facts.rows, facts.routed, facts.events, facts.filter_ops) == (0, 0, 0, 0)
