"""Bad input (issue 9): broken rows, hostile names, huge rows, broken configurations.

A generated corpus goes into one lake, mixed with good rows, in two runs of the job
(``jobs.replay`` for the first, so replay-log lines are part of it; ``jobs.route`` for
the second, after more appends). Every bad row must land in ``rejected`` with a reason,
the good rows of the same batch must go through, the job must keep running, and the
job's own figures must add up: rows in = routed + applied + rejected, with rows in and
rejected matching what was appended. Broken configurations must stop both entry points
with exit status 2 and a message naming the element, before anything is written.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame

from jobs import replay as replay_job
from jobs import route as route_job
from routing.broker.layout import address_dir
from routing.io.delta_tables import file_count
from routing.io.lake import Lake
from routing.io.storage import COMPACT_PRODUCER_IDS_AT, DeltaStorage
from routing.plan import inputs, schemas
from routing.tools import replay
from tests.frames import assert_rows_equal
from tests.lakeio import append, at, clean_up_log, read_table, rows
from tests.test_cluster import child_env

ROOT = Path(__file__).resolve().parents[1]
BROKER = ROOT / "conf" / "broker.xml"
PROGRESS = re.compile(
    r"^batch \d+: rows in (\d+), routed (\d+), applied (\d+), copies \d+, dead letters \d+, "
    r"expiries \d+, rejected (\d+),",
    re.MULTILINE,
)

CONF = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <diverts>
      <divert name="copy-big">
        <address>orders</address>
        <forwarding-address>a/b</forwarding-address>
        <filter string="big = 'yes'"/>
      </divert>
    </diverts>
    <address-settings>
      <address-setting match="#">
        <dead-letter-address>DLA</dead-letter-address>
        <max-delivery-attempts>2</max-delivery-attempts>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
      <address name="../x"><multicast><queue name="../x.q"/></multicast></address>
      <address name="a/b"><anycast><queue name="a/b"/></anycast></address>
      <address name="zürich orders"><anycast><queue name="zürich orders"/></anycast></address>
      <address name="DLA"><anycast><queue name="DLQ"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""

HUGE_PROPERTIES = 10_000
HUGE_BODY = 4 * 1024 * 1024


def iso(ms: int) -> str:
    """A conformance time as the rejected rows' JSON writes it."""
    return at(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


@dataclass
class Bad:
    """A bad input row: where it goes, the row, how to find it in ``rejected``, and why."""

    name: str
    table: str  # lake path: addresses/<dir>, deliveries, management
    row: dict[str, Any]
    marker: str  # a substring of its ``rejected.row``
    reason: str  # a substring of its ``rejected.reason``


def message(message_id, address="orders", ms=0, **extra) -> dict[str, Any]:
    sent_at = None if ms is None else at(ms)
    return {"message_id": message_id, "address": address, "sent_at": sent_at, **extra}


def delivery(queue, message_id, outcome, ms) -> dict[str, Any]:
    return {"queue": queue, "message_id": message_id, "outcome": outcome, "at": ms}


def management(op, queue, message_id=None, filter=None, to_queue=None, ms=None):
    return {
        "op": op,
        "queue": queue,
        "message_id": message_id,
        "filter": filter,
        "to_queue": to_queue,
        "at": ms,
    }


def _times(row: dict[str, Any]) -> dict[str, Any]:
    return {k: at(v) if k == "at" and isinstance(v, int) else v for k, v in row.items()}


def bad_message(name: str, reason: str, message_id, address="orders", ms=0, table=None, **extra):
    row = message(message_id, address, ms, user_id=f"case:{name}", **extra)
    source = table or f"addresses/{address_dir(address or 'orders')}"
    return Bad(name, source, row, f'"user_id":"case:{name}"', reason)


def bad_delivery(name: str, reason: str, row: dict[str, Any], marker: str) -> Bad:
    return Bad(name, "deliveries", _times(row), marker, reason)


def bad_management(name: str, reason: str, row: dict[str, Any], marker: str) -> Bad:
    return Bad(name, "management", _times(row), marker, reason)


# --------------------------------------------------------------------------------------
# The corpus of the first run
# --------------------------------------------------------------------------------------

BIG = {"big": "yes", **{f"p{i:05d}": f"value-{i}" for i in range(HUGE_PROPERTIES - 1)}}

GOOD_SENDS = [
    message(1, ms=1000, user_id="good"),
    message(2, ms=2000, user_id="good"),
    message(3, ms=3000, user_id="good"),
    message(4, ms=4000, user_id="good"),
    message(5, ms=5000, user_id="good"),
    message(6, ms=6000, user_id="good", properties=list(BIG.items())),
    message(
        7, ms=7000, user_id="good", properties=[("big", "yes")], body=b"\x00x" * (HUGE_BODY // 2)
    ),
    message(8, ms=8000, user_id="good-first-of-two"),
    # its id's earlier use (addresses/a=2Fb sorts first) is a row rejected for its priority:
    # only a row that would route uses an id
    message(12, ms=12_000, user_id="good-after-a-rejected-use"),
    message(20, "../x", 20_000, user_id="good"),
    message(21, "a/b", 21_000, user_id="good"),
    message(22, "zürich orders", 22_000, user_id="good"),
    message(23, "../../etc", 23_000, user_id="good"),  # no such address: dropped, NO_ROUTE
]

BAD_SENDS = [
    bad_message("null-id", "message_id is null", None, ms=100),
    bad_message("null-sent-at", "sent_at is null", 101, ms=None),
    bad_message("null-address", "address is null", 102, None, 102, table="addresses/orders"),
    bad_message("duplicate-in-batch", "duplicate message_id 8", 8, ms=8001),
    bad_message(
        "routing-type", "unknown routing_type 'BROADCAST'", 103, ms=103, routing_type="BROADCAST"
    ),
    bad_message("priority", "priority 42 is not in 0-9", 104, ms=104, priority=42),
    bad_message(
        "priority-of-an-id-used-later", "priority 42 is not in 0-9", 12, "a/b", 11, priority=42
    ),
    bad_message("copy-reason", "copy_reason is set", 105, ms=105, copy_reason="DIVERT"),
    bad_message(
        "property-type-unknown",
        "property_types: unknown type 'int' of 'n'; expected one of boolean, byte, short,",
        111,
        ms=111,
        properties=[("n", "1")],
        property_types=[("n", "int")],
    ),
    bad_message(
        "property-text-not-of-its-type",
        "property_types: 'n' is typed long but its value '1.5' does not read as one",
        112,
        ms=112,
        properties=[("n", "1.5")],
        property_types=[("n", "long")],
    ),
    bad_message(
        "property-out-of-range",
        "property_types: 'n' is typed byte but its value '300' does not read as one",
        113,
        ms=113,
        properties=[("n", "300")],
        property_types=[("n", "byte")],
    ),
    bad_message(
        "property-type-of-no-property",
        "property_types: 'm' is typed boolean but the message has no such property",
        114,
        ms=114,
        properties=[("n", "1")],
        property_types=[("m", "boolean")],
    ),
    bad_message("to-queue", "to_queue is set", 106, ms=106, to_queue="orders"),
    bad_message("id-too-big", "is outside [0, 2^62)", 2**62, ms=107),
    bad_message("id-negative", "message_id -5 is outside [0, 2^62)", -5, ms=108),
    bad_message(
        "misplaced",
        "address 'payments' does not belong in table addresses/orders",
        109,
        "payments",
        109,
        table="addresses/orders",
    ),
    bad_message(
        "space-dir",
        "address 'with space' does not belong in table addresses/with space",
        110,
        "with space",
        110,
        table="addresses/with space",  # a producer that did not escape the name
    ),
]

GOOD_DELIVERIES = [
    delivery("orders", 1, "ACK", 1500),
    delivery("orders", 2, "ROLLBACK", 2500),
    delivery("orders", 3, "ROLLBACK", 3500),
    delivery("orders", 3, "ROLLBACK", 3600),  # second attempt of two: dead-lettered
    delivery("../x.q", 20, "ACK", 20_500),
    delivery("a/b", 21, "ACK", 21_500),
]

BAD_DELIVERIES = [
    bad_delivery(
        "null-queue", "queue is null", delivery(None, 501, "ACK", 9001), '"message_id":501'
    ),
    bad_delivery(
        "null-message-id", "message_id is null", delivery("orders", None, "ACK", 9002), iso(9002)
    ),
    bad_delivery(
        "null-outcome", "outcome is null", delivery("orders", 502, None, 9003), '"message_id":502'
    ),
    bad_delivery("null-at", "at is null", delivery("orders", 503, "ACK", None), '"message_id":503'),
    bad_delivery(
        "outcome",
        "unknown outcome 'NACK'",
        delivery("orders", 504, "NACK", 9004),
        '"message_id":504',
    ),
    bad_delivery(
        "unknown-queue",
        "unknown queue 'nope'",
        delivery("nope", 505, "ACK", 9005),
        '"message_id":505',
    ),
    bad_delivery(
        "unknown-message",
        "no PENDING message 506 in queue orders",
        delivery("orders", 506, "ACK", 9006),
        '"message_id":506',
    ),
    bad_delivery(
        "before-the-message",  # event time before the message was sent: out of order
        "the message was not yet in the queue at that time",
        delivery("orders", 4, "ACK", 3000),
        iso(3000),
    ),
    bad_delivery(
        "acked-twice",
        "no PENDING message 1 in queue orders",
        delivery("orders", 1, "ACK", 9100),
        iso(9100),
    ),
]

GOOD_MANAGEMENT = [
    management("MOVE", "orders", 2, to_queue="a/b", ms=9500),
    management("RETRY", "DLQ", ms=9600),  # every PENDING message of DLQ: the dead letter of 3
]

BAD_MANAGEMENT = [
    bad_management(
        "bad-filter",
        "filter does not parse",
        management("MOVE", "orders", None, "region = = 'EU'", "a/b", 9201),
        iso(9201),
    ),
    bad_management("op", "unknown op 'PURGE'", management("PURGE", "orders", ms=9202), iso(9202)),
    bad_management(
        "move-nowhere", "MOVE needs to_queue", management("MOVE", "orders", 5, ms=9203), iso(9203)
    ),
    bad_management(
        "move-to-unknown",
        "to_queue 'nope' does not exist",
        management("MOVE", "orders", 5, to_queue="nope", ms=9204),
        iso(9204),
    ),
    bad_management(
        "retry-to-queue",
        "to_queue is only for MOVE",
        management("RETRY", "orders", 5, to_queue="orders", ms=9205),
        iso(9205),
    ),
    bad_management(
        "id-and-filter",
        "give message_id or filter, not both",
        management("MOVE", "orders", 5, "a = 1", "a/b", 9206),
        iso(9206),
    ),
    bad_management(
        "retry-without-origin",
        "RETRY: the message has no _AMQ_ORIG_ADDRESS, or no _AMQ_ORIG_QUEUE naming an",
        management("RETRY", "orders", 5, ms=9207),
        iso(9207),
    ),
    bad_management("null-op", "op is null", management(None, "orders", 5, ms=9208), iso(9208)),
    bad_management(
        "null-queue",
        "queue is null",
        management("MOVE", None, 5, to_queue="a/b", ms=9209),
        iso(9209),
    ),
    bad_management(
        "null-at", "at is null", management("SEND_TO_DLA", "orders", 509), '"message_id":509'
    ),
    bad_management(
        "management-unknown-queue",
        "unknown queue 'nope'",
        management("SEND_TO_DLA", "nope", 5, ms=9210),
        iso(9210),
    ),
    bad_management(
        "management-unknown-message",
        "no PENDING message 510 in queue orders",
        management("SEND_TO_DLA", "orders", 510, ms=9211),
        iso(9211),
    ),
]

# tables whose columns cannot be read as the SPEC types: every row is rejected
NAIVE = pa.schema(
    [
        ("message_id", pa.int64()),
        ("address", pa.string()),
        ("sent_at", pa.timestamp("us")),
        ("user_id", pa.string()),
    ]
)
NUMBER_MAP = pa.schema(
    [
        ("message_id", pa.int64()),
        ("address", pa.string()),
        ("sent_at", schemas.TIMESTAMP),
        ("user_id", pa.string()),
        ("properties", pa.map_(pa.string(), pa.int64())),
    ]
)
TYPED_BADLY = [
    (
        Bad(
            "naive-timestamp",
            "addresses/naive",
            {},
            '"user_id":"case:naive-timestamp"',
            "sent_at: timestamp without a time zone",
        ),
        pa.table(
            {
                "message_id": [30],
                "address": ["naive"],
                "sent_at": pa.array([at(30).replace(tzinfo=None)], pa.timestamp("us")),
                "user_id": ["case:naive-timestamp"],
            },
            schema=NAIVE,
        ),
    ),
    (
        Bad(
            "number-map",
            "addresses/numbers",
            {},
            '"user_id":"case:number-map"',
            "is not a map of strings to strings",
        ),
        pa.table(
            {
                "message_id": [31],
                "address": ["numbers"],
                "sent_at": pa.array([at(31)], schemas.TIMESTAMP),
                "user_id": ["case:number-map"],
                "properties": pa.array([[("n", 1)]], pa.map_(pa.string(), pa.int64())),
            },
            schema=NUMBER_MAP,
        ),
    ),
]

# replay-log lines (docs/REPLAY.md): refused at load, with their line numbers
LOG_LINES = [
    (
        json.dumps(
            {
                "type": "send",
                "address": "orders",
                "message_id": 40,
                "sent_at": iso(40_000),
                "properties": {"k": "v"},
            }
        ),
        None,
    ),
    (
        json.dumps(
            {
                "type": "send",
                "address": "orders",
                "message_id": 41,
                "sent_at": "2026-01-01T00:00:41",
            }
        ),
        'line 2: sent_at ["2026-01-01T00:00:41"] has no time zone',
    ),
    (
        json.dumps(
            {
                "type": "send",
                "address": "orders",
                "message_id": 42,
                "sent_at": iso(42_000),
                "expiration": "2026-01-02 00:00:00",
            }
        ),
        'line 3: expiration ["2026-01-02 00:00:00"] has no time zone',
    ),
    (
        json.dumps(
            {
                "type": "delivery",
                "queue": "orders",
                "message_id": 40,
                "outcome": "ACK",
                "at": "2026-01-01T00:00:43",
            }
        ),
        'line 4: at ["2026-01-01T00:00:43"] has no time zone',
    ),
    (
        json.dumps(
            {
                "type": "delivery",
                "queue": "orders",
                "message_id": 40,
                "outcome": "ROLLBACK",
                "at": iso(40_500),
            }
        ),
        None,
    ),
]


# --------------------------------------------------------------------------------------
# The corpus of the second run (appended after the first)
# --------------------------------------------------------------------------------------

SECOND_GOOD_SENDS = [message(50, ms=500, user_id="good-late")]  # older than the lake clock
SECOND_GOOD_DELIVERIES = [delivery("orders", 50, "ACK", 30_000)]
DUPLICATES_ACROSS_BATCHES = [
    bad_message("duplicate-across-batches", "duplicate message_id 1", 1, ms=30_100),
    bad_message("duplicate-on-another-address", "duplicate message_id 5", 5, "a/b", 30_200),
]
ACKED_IN_AN_EARLIER_BATCH = bad_delivery(
    "acked-in-an-earlier-batch",
    "no PENDING message 21 in queue a/b",  # as within one batch
    delivery("a/b", 21, "ACK", 30_300),
    iso(30_300),
)


def _append_rows(lake: Lake, table: str, rows: list[dict[str, Any]]) -> None:
    schema = {
        "deliveries": schemas.DELIVERY,
        "management": schemas.MANAGEMENT,
    }.get(table, schemas.MESSAGE)
    append(lake.table(table), [_times(r) for r in rows], schema)


def _by_table(good: Mapping[str, list[dict]], bad: list[Bad]) -> dict[str, list[dict]]:
    tables: dict[str, list[dict]] = {k: list(v) for k, v in good.items()}
    for case in bad:
        tables.setdefault(case.table, []).append(case.row)
    return tables


def compact(row_json: str) -> str:
    """A rejected row's JSON without the blank after a key (rows the reader could not type
    are kept as ``json.dumps`` wrote them, the others as Spark's ``to_json``)."""
    return row_json.replace('": ', '":')


def progress(output: str) -> dict[str, int]:
    totals = dict.fromkeys(("rows_in", "routed", "applied", "rejected"), 0)
    for match in PROGRESS.finditer(output):
        for key, value in zip(totals, match.groups(), strict=True):
            totals[key] += int(value)
    return totals


def _route(spark, conf: Path, lake: Lake, *extra: str) -> SimpleNamespace:
    """``jobs.route --available-now`` over ``lake``: its exit status and output."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--conf", str(conf), "--lake", lake.root, "--available-now", *extra]
    status = route_job.main(argv, spark=spark, out=out, err=err)
    return SimpleNamespace(status=status, out=out.getvalue(), err=err.getvalue())


@dataclass
class Corpus:
    lake: Lake
    conf: Path
    log: Path
    runs: list[SimpleNamespace] = field(default_factory=list)

    def rejected(self) -> list[dict[str, Any]]:
        return rows(self.lake.rejected)

    def queue_rows(self) -> dict[tuple[str, int], dict[str, Any]]:
        out = {}
        for row in rows(self.lake.queue_messages):
            out.setdefault((row["queue"], row["message_id"]), []).append(row)
        return out


@pytest.fixture(scope="module")
def corpus(spark, tmp_path_factory) -> Corpus:
    folder = tmp_path_factory.mktemp("bad-input")
    conf = folder / "broker.xml"
    conf.write_text(CONF, encoding="utf-8")
    log = folder / "log.jsonl"
    log.write_text("\n".join(line for line, _ in LOG_LINES) + "\n", encoding="utf-8")
    lake = Lake.at(folder / "lake")
    result = Corpus(lake, conf, log)

    # first run: everything, through a replay that also loads the log
    good = {
        "deliveries": GOOD_DELIVERIES,
        "management": GOOD_MANAGEMENT,
    }
    for send in GOOD_SENDS:
        good.setdefault(f"addresses/{address_dir(send['address'])}", []).append(send)
    tables = _by_table(good, BAD_SENDS + BAD_DELIVERIES + BAD_MANAGEMENT)
    for table, table_rows in tables.items():
        _append_rows(lake, table, table_rows)
    for case, data in TYPED_BADLY:
        write_deltalake(lake.table(case.table), data, mode="append")
    appended = sum(len(r) for r in tables.values()) + len(TYPED_BADLY)
    loaded = sum(1 for _, reason in LOG_LINES if reason is None)
    out, err = io.StringIO(), io.StringIO()
    status = replay_job.main(
        ["--log", str(log), "--lake", lake.root, "--conf", str(conf)], spark=spark, out=out, err=err
    )
    result.runs.append(
        SimpleNamespace(
            status=status, out=out.getvalue(), err=err.getvalue(), rows=appended + loaded
        )
    )

    # second run: late rows, duplicates of ids routed by the first run, a second ACK
    tables = _by_table(
        {"addresses/orders": SECOND_GOOD_SENDS, "deliveries": SECOND_GOOD_DELIVERIES},
        [*DUPLICATES_ACROSS_BATCHES, ACKED_IN_AN_EARLIER_BATCH],
    )
    for table, table_rows in tables.items():
        _append_rows(lake, table, table_rows)
    run = _route(spark, conf, lake)
    run.rows = sum(len(r) for r in tables.values())
    result.runs.append(run)
    return result


FIRST_RUN_BAD = [*BAD_SENDS, *BAD_DELIVERIES, *BAD_MANAGEMENT, *(case for case, _ in TYPED_BADLY)]


# --------------------------------------------------------------------------------------
# Bad rows
# --------------------------------------------------------------------------------------


def test_the_job_keeps_running_through_bad_input(corpus):
    for run in corpus.runs:
        assert run.status == 0, run.out + run.err
        assert PROGRESS.search(run.out), run.out


@pytest.mark.parametrize("case", FIRST_RUN_BAD, ids=lambda c: c.name)
def test_every_bad_row_is_rejected_with_its_reason(corpus, case):
    found = [r for r in corpus.rejected() if case.marker in compact(r["row"])]
    assert len(found) == 1, (case.marker, found)
    assert case.reason in found[0]["reason"], found[0]
    assert found[0]["source"] == case.table


def test_bad_log_lines_are_rejected_with_their_line_numbers(corpus):
    source = f"log:{corpus.log}"
    reasons = sorted(r["reason"] for r in corpus.rejected() if r["source"] == source)
    assert reasons == sorted(reason for _, reason in LOG_LINES if reason)


def test_good_rows_of_the_same_batch_go_through(corpus):
    queue = corpus.queue_rows()
    assert all(len(v) == 1 for k, v in queue.items() if k != ("orders", 1)), "one row per key"
    status = {key: v[-1]["status"] for key, v in queue.items()}
    assert status[("orders", 1)] == "ACKED" or "ACKED" in [
        r["status"] for r in queue[("orders", 1)]
    ]
    for key, expected in {
        ("orders", 2): "MOVED",
        ("orders", 3): "DEAD_LETTERED",
        ("orders", 4): "PENDING",  # its early ACK was rejected
        ("orders", 5): "PENDING",  # every management row naming it was rejected
        ("orders", 6): "PENDING",
        ("orders", 7): "PENDING",
        ("orders", 8): "PENDING",  # the first of the two rows with id 8
        ("orders", 40): "PENDING",  # from the replay log, rolled back once
        ("orders", 50): "ACKED",  # sent late (older than the clock), then acknowledged
        ("../x.q", 20): "ACKED",
        ("a/b", 21): "ACKED",
        ("zürich orders", 22): "PENDING",
    }.items():
        assert status.get(key) == expected, (key, status.get(key))
    assert queue[("orders", 8)][0]["user_id"] == "good-first-of-two"
    assert queue[("orders", 40)][0]["delivery_count"] == 1
    by_reason = {
        (q, r["copy_reason"]): r["status"]
        for (q, _), v in queue.items()
        for r in v
        if r["copy_reason"]
    }
    assert by_reason[("DLQ", "DEAD_LETTER")] == "MOVED"  # retried by the RETRY of DLQ
    assert by_reason[("orders", "RETRY")] == "PENDING"
    assert by_reason[("a/b", "MOVE")] == "PENDING"
    dropped = [r for r in rows(corpus.lake.journal) if r["event"] == "DROPPED"]
    assert [(r["message_id"], dict(r["detail"]).get("reason")) for r in dropped] == [
        (23, "NO_ROUTE")
    ]


def test_huge_rows_are_routed_and_copied_whole(corpus):
    copies = {
        r["properties"] and dict(r["properties"]).get("_AMQ_ORIG_MESSAGE_ID"): r
        for r in rows(corpus.lake.address_table("a/b"))
        if r["copy_reason"] == "DIVERT"
    }
    big_map, big_body = copies["6"], copies["7"]
    properties = dict(big_map["properties"])
    assert len(properties) == HUGE_PROPERTIES + 3  # + _AMQ_ORIG_ADDRESS, _QUEUE, _MESSAGE_ID
    assert all(properties[k] == v for k, v in BIG.items())
    assert big_body["body"] == b"\x00x" * (HUGE_BODY // 2)
    queue = corpus.queue_rows()
    assert {
        r["status"]
        for (q, _), v in queue.items()
        for r in v
        if q == "a/b" and r["copy_reason"] == "DIVERT"
    } == {"PENDING"}


def test_rows_in_are_routed_applied_or_rejected(corpus):
    first = progress(corpus.runs[0].out)
    assert first["rows_in"] == corpus.runs[0].rows
    assert first["rows_in"] == first["routed"] + first["applied"] + first["rejected"]
    good_sends = len(GOOD_SENDS) + sum(
        1 for line, reason in LOG_LINES if reason is None and '"send"' in line
    )
    assert first["routed"] == good_sends
    assert first["rejected"] == len(FIRST_RUN_BAD)
    job_rejected = [r for r in corpus.rejected() if not r["source"].startswith("log:")]
    second = progress(corpus.runs[1].out)
    assert second["rows_in"] == corpus.runs[1].rows
    assert second["rows_in"] == second["routed"] + second["applied"] + second["rejected"]
    assert len(job_rejected) == first["rejected"] + second["rejected"]


def test_hostile_names_stay_inside_the_lake(corpus):
    root = Path(corpus.lake.root)
    tables = {p.name for p in (root / "addresses").iterdir()}
    # SPEC §3 dir(address): a leading "." and every byte outside A-Z a-z 0-9 . _ - escaped
    assert {"=2E.=2Fx", "a=2Fb", "z=C3=BCrich=20orders", "=2E.=2F..=2Fetc"} <= tables
    assert tables <= {
        address_dir(a)
        for a in ("orders", "../x", "a/b", "zürich orders", "../../etc", "DLA", "naive", "numbers")
    } | {"with space"}
    outside = [
        p for p in root.parent.iterdir() if p.name not in (root.name, "broker.xml", "log.jsonl")
    ]
    assert outside == []
    for path, dirs, _ in os.walk(root):
        assert ".." not in Path(path).relative_to(root).parts
        assert all(Path(path, d).resolve().is_relative_to(root) for d in dirs)


@pytest.mark.parametrize("case", DUPLICATES_ACROSS_BATCHES, ids=lambda c: c.name)
def test_an_id_already_in_the_lake_is_rejected_in_a_later_batch(corpus, case):
    found = [r for r in corpus.rejected() if case.marker in compact(r["row"])]
    assert len(found) == 1 and case.reason in found[0]["reason"], found


def test_a_rejected_rows_reason_does_not_depend_on_where_batches_are_cut(corpus):
    case = ACKED_IN_AN_EARLIER_BATCH
    found = [r for r in corpus.rejected() if case.marker in compact(r["row"])]
    assert len(found) == 1, found
    assert found[0]["reason"] == case.reason


def _route_twice(spark, workdir: Path) -> Lake:
    """Two runs over one lake: ids used twice within the first batch, then ids the first
    run accepted used again."""
    workdir.mkdir()
    lake = Lake.at(workdir / "lake")
    conf = workdir / "broker.xml"
    conf.write_text(CONF, encoding="utf-8")
    first = [message(i, ms=1000 + i) for i in (1, 2, 3)] + [message(i, ms=2000 + i) for i in (1, 2)]
    second = [message(i, ms=3000 + i) for i in (3, 4)] + [message(4, "a/b", ms=3010)]
    for sends in (first, second):
        append(
            lake.address_table("orders"),
            [s for s in sends if s["address"] == "orders"],
            schemas.MESSAGE,
        )
        if others := [s for s in sends if s["address"] == "a/b"]:
            append(lake.address_table("a/b"), others, schemas.MESSAGE)
        run = _route(spark, conf, lake)
        assert run.status == 0, run.err
    return lake


def test_many_duplicate_ids_are_rejected_as_a_few_are(spark, tmp_path, monkeypatch):
    """A batch's few duplicate ids are broadcast back to its kept rows, and more than
    ``inputs.BROADCAST_CLASHES`` are joined once and the rows kept again: the same rows
    are rejected either way, each for its reason."""
    few = _route_twice(spark, tmp_path / "few")
    monkeypatch.setattr(inputs, "BROADCAST_CLASHES", 1)  # two ids in each batch: many
    many = _route_twice(spark, tmp_path / "many")

    def rejected(lake: Lake) -> DataFrame:
        return spark.createDataFrame(read_table(lake.rejected)).select("source", "reason", "row")

    assert_rows_equal(rejected(many), rejected(few), order_by=["row"])
    reasons = sorted(r["reason"] for r in rows(few.rejected))
    assert reasons == [f"duplicate message_id {i}" for i in (1, 2, 3, 4)]
    queue_rows = sorted((r["queue"], r["message_id"]) for r in rows(few.queue_messages))
    # the earliest sent wins: orders' row of id 4 (3004), not a/b's (3010), whose table
    # comes first by name
    assert queue_rows == [("orders", 1), ("orders", 2), ("orders", 3), ("orders", 4)]


@pytest.mark.parametrize("limit", [None, 1], ids=["one-batch", "a-batch-a-row"])
def test_the_earliest_use_of_an_id_wins_whatever_the_batches(spark, tmp_path, limit):
    """An id used in ``orders`` at 00:00:11 and again in ``a/b`` (a table first by name) at
    00:00:20: in one batch as in a batch per row, the first use routes and the later one
    is rejected (SPEC §5.6)."""
    lake = Lake.at(tmp_path / "lake")
    conf = tmp_path / "broker.xml"
    conf.write_text(CONF, encoding="utf-8")
    append(lake.address_table("orders"), [message(7, ms=11_000)], schemas.MESSAGE)
    append(lake.address_table("a/b"), [message(7, "a/b", ms=20_000)], schemas.MESSAGE)
    extra = [] if limit is None else ["--max-events-per-trigger", str(limit)]
    run = _route(spark, conf, lake, *extra)
    assert run.status == 0, run.err
    assert [(r["queue"], r["message_id"]) for r in rows(lake.queue_messages)] == [("orders", 7)]
    assert [(r["source"], r["reason"]) for r in rows(lake.rejected)] == [
        ("addresses/a=2Fb", "duplicate message_id 7")
    ]


def test_the_producer_ids_of_a_long_run_are_compacted_and_all_kept(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    batches = COMPACT_PRODUCER_IDS_AT + 2
    for batch in range(batches):
        ids = [{"message_id": batch * 10 + i, "batch_id": batch} for i in range(3)]
        append(lake.producer_ids, ids, schemas.PRODUCER_ID)

    assert file_count(lake.producer_ids) == batches
    taken = DeltaStorage(lake).taken(spark, batch_id=batches - 1)

    assert file_count(lake.producer_ids) == 1
    expected = sorted(b * 10 + i for b in range(batches - 1) for i in range(3))
    assert sorted(r["message_id"] for r in taken.collect()) == expected


def test_an_unescaped_unicode_table_folder_does_not_stop_the_job(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    append(lake.address_table("orders"), [_times(message(1, ms=1000))], schemas.MESSAGE)
    append(lake.table("addresses/zürich"), [_times(message(2, "zürich", 2000))], schemas.MESSAGE)
    run = _route(spark, BROKER, lake)
    assert run.status == 0, run.err
    assert [r["reason"] for r in rows(lake.rejected)] == [
        "address 'zürich' does not belong in table addresses/zürich"
    ]


@pytest.mark.parametrize(
    "properties",
    [[1, 2], "x", {"a": [1]}, {"a": {"b": "c"}}, {"a": {"type": "long", "value": [1]}}],
    ids=["array", "string", "list-value", "object-value", "typed-list-value"],
)
def test_replay_log_properties_that_are_not_typed_values_are_rejected(spark, tmp_path, properties):
    line = {
        "type": "send",
        "address": "orders",
        "message_id": 1,
        "sent_at": iso(0),
        "properties": properties,
    }
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(line) + "\n", encoding="utf-8")
    loaded = replay.load(spark, [str(log)])
    assert [r.reason for r in loaded.rejected.collect()] == [
        "line 1: properties is not an object of strings, numbers, booleans or "
        '{"type": ..., "value": ...} values'
    ]


# --------------------------------------------------------------------------------------
# Broken configurations
# --------------------------------------------------------------------------------------

GOOD_XML = BROKER.read_text(encoding="utf-8")


def _mutate(old: str, new: str) -> str:
    assert old in GOOD_XML, old
    return GOOD_XML.replace(old, new, 1)


DIVERT = """<divert name="{name}">
            <address>orders</address>
            <forwarding-address>audit</forwarding-address>
         </divert>
      </diverts>"""

BROKEN_CONFIGURATIONS = {
    "not well-formed": (GOOD_XML[: len(GOOD_XML) // 2], "not well-formed XML"),
    "hash not last": (
        _mutate('match="payments"', 'match="pay.#.ments"'),
        "address-setting match 'pay.#.ments': '#' must be the last word",
    ),
    "divert name twice": (
        _mutate("</diverts>", DIVERT.format(name="orders-audit")),
        "divert 'orders-audit': name already used by another divert",
    ),
    "divert named like a queue": (
        _mutate("</diverts>", DIVERT.format(name="payments")),
        "divert 'payments': name already used by queue 'payments'",
    ),
    "queue name twice": (
        _mutate('<queue name="orders.eu"/>', '<queue name="orders"/>'),
        "queue 'orders' on address 'orders.eu': name already used by the queue on address 'orders'",
    ),
    "queue filter": (
        _mutate("amount &gt; 500", "amount &gt;"),
        "queue 'audit.large' on address 'audit': filter \"amount >\" does not parse",
    ),
    "divert filter": (
        _mutate("region = 'EU'", "region = = 'EU'"),
        "divert 'orders-eu': filter \"region = = 'EU'\" does not parse",
    ),
    "divert routing type": (
        _mutate("<routing-type>STRIP</routing-type>", "<routing-type>BOTH</routing-type>"),
        "divert 'orders-audit': unknown routing-type 'BOTH'",
    ),
    "not a number": (
        _mutate(
            "<max-delivery-attempts>3</max-delivery-attempts>",
            "<max-delivery-attempts>three</max-delivery-attempts>",
        ),
        "address-setting match 'payments': <max-delivery-attempts>: expected a 32-bit integer, found 'three'",
    ),
    "not a whole number": (
        _mutate(
            "<redelivery-delay>1000</redelivery-delay>", "<redelivery-delay>1.5</redelivery-delay>"
        ),
        "<redelivery-delay>: expected a whole number of milliseconds, found '1.5'",
    ),
    "not a boolean": (
        _mutate("<exclusive>true</exclusive>", "<exclusive>yes</exclusive>"),
        "divert 'orders-eu': <exclusive>: expected true or false, found 'yes'",
    ),
    "placeholder without default": (
        _mutate(
            "<max-delivery-attempts>5</max-delivery-attempts>",
            "<max-delivery-attempts>${attempts}</max-delivery-attempts>",
        ),
        "${attempts}",
    ),
    "entity declaration": (
        GOOD_XML.replace("<configuration", '<!DOCTYPE c [<!ENTITY x "y">]>\n<configuration', 1),
        "DOCTYPE declaration is not allowed",
    ),
}


@pytest.fixture(scope="module")
def config_lake(tmp_path_factory) -> Lake:
    """A lake with input to route: a job that read the configuration too late would write."""
    lake = Lake.at(tmp_path_factory.mktemp("config") / "lake")
    append(lake.address_table("orders"), [_times(message(1, ms=1000))], schemas.MESSAGE)
    return lake


def _listing(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


@pytest.mark.parametrize("entry", ["route", "replay"])
@pytest.mark.parametrize("case", list(BROKEN_CONFIGURATIONS))
def test_a_broken_configuration_exits_2_before_writing(spark, config_lake, tmp_path, case, entry):
    text, message = BROKEN_CONFIGURATIONS[case]
    conf = tmp_path / "broker.xml"
    conf.write_text(text, encoding="utf-8")
    log = tmp_path / "log.jsonl"
    log.write_text(LOG_LINES[0][0] + "\n", encoding="utf-8")
    before = _listing(Path(config_lake.root))
    err = io.StringIO()
    argv = ["--conf", str(conf), "--lake", config_lake.root]
    if entry == "route":
        status = route_job.main([*argv, "--available-now"], spark=spark, out=io.StringIO(), err=err)
    else:
        status = replay_job.main(
            [*argv, "--log", str(log)], spark=spark, out=io.StringIO(), err=err
        )
    assert status == 2, err.getvalue()
    assert "configuration error" in err.getvalue() and message in err.getvalue(), err.getvalue()
    assert _listing(Path(config_lake.root)) == before


def test_the_module_exits_2_on_a_broken_configuration(config_lake, tmp_path):
    conf = tmp_path / "broker.xml"
    conf.write_text(BROKEN_CONFIGURATIONS["divert filter"][0], encoding="utf-8")
    before = _listing(Path(config_lake.root))
    done = subprocess.run(
        [sys.executable, "-m", "jobs.route", "--conf", str(conf), "--lake", config_lake.root],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,
    )
    assert done.returncode == 2, done.stderr
    assert "divert 'orders-eu': filter" in done.stderr
    assert _listing(Path(config_lake.root)) == before


def test_an_unknown_routing_type_element_exits_2(spark, tmp_path):
    conf = tmp_path / "broker.xml"
    conf.write_text(
        _mutate(
            '<anycast><queue name="payments"/></anycast>',
            '<broadcast><queue name="payments"/></broadcast>',
        ),
        encoding="utf-8",
    )
    run = _route(spark, conf, Lake.at(tmp_path / "lake"))
    assert run.status == 2 and "address 'payments'" in run.err, run.err


def test_a_truncated_commit_of_an_input_table_is_named_and_nothing_is_written(spark, tmp_path):
    """A producer's commit file cut short (a full disk, a copy interrupted): one line names
    the table, the commit and what to do, before the job writes anything."""
    lake = Lake.at(tmp_path / "lake")
    conf = tmp_path / "broker.xml"
    conf.write_text(CONF, encoding="utf-8")
    append(lake.address_table("orders"), [message(1, ms=1000)], schemas.MESSAGE)
    append(lake.address_table("orders"), [message(2, ms=2000)], schemas.MESSAGE)
    commit = Path(lake.address_table("orders"), "_delta_log", f"{1:020d}.json")
    commit.write_bytes(commit.read_bytes()[:-40])
    before = sorted(p.name for p in Path(lake.root).iterdir())
    run = _route(spark, conf, lake)
    assert run.status == 1 and run.out == ""
    assert run.err.count("\n") == 1, run.err
    assert run.err.startswith(
        "lake error: table addresses/orders: commit 1 (_delta_log/00000000000000000001.json) "
        "is not a valid Delta commit ("
    ), run.err
    assert "restore the file from a backup" in run.err
    assert sorted(p.name for p in Path(lake.root).iterdir()) == before  # no checkpoint, no table


def test_an_address_the_file_system_cannot_hold_stops_the_job_before_it_writes(spark, tmp_path):
    """A diverted copy would go to an address whose table folder is too long a name: the
    job refuses the configuration (exit 2) before any table, checkpoint or lock file."""
    lake = Lake.at(tmp_path / "lake")
    conf = tmp_path / "broker.xml"
    far = "注文" * 15  # 30 characters, 270 bytes as a folder name
    conf.write_text(
        CONF.replace(
            "<diverts>",
            f"<diverts><divert name='far'><address>orders</address>"
            f"<forwarding-address>{far}</forwarding-address></divert>",
        ),
        encoding="utf-8",
    )
    append(lake.address_table("orders"), [message(1, ms=1000)], schemas.MESSAGE)
    before = sorted(p.name for p in Path(lake.root).iterdir())
    run = _route(spark, conf, lake)
    assert run.status == 2 and run.out == ""
    assert run.err == (
        "configuration error: divert 'far': address '" + far + "' is too long for a table "
        "folder: its folder name takes 270 bytes, at most 255 fit (characters outside A-Z a-z "
        "0-9 . _ - take 3 bytes each)\n"
    )
    assert sorted(p.name for p in Path(lake.root).iterdir()) == before


def test_a_producers_log_cleaned_up_is_read_and_past_the_jobs_last_read_stops_it(spark, tmp_path):
    """Delta's log cleanup removes a table's commits before a checkpoint. Run after it, the
    job routes every message of the table, and again those sent since; cleaned up past the
    version the job read last (a job stopped longer than the log's retention), the rows
    since cannot be told from those it read: one line names the table, nothing is written."""
    lake = Lake.at(tmp_path / "lake")
    conf = tmp_path / "broker.xml"
    conf.write_text(CONF, encoding="utf-8")
    orders = lake.address_table("orders")
    append(orders, [message(1, ms=1000)], schemas.MESSAGE)
    append(orders, [message(2, ms=2000)], schemas.MESSAGE)
    clean_up_log(orders)
    assert _route(spark, conf, lake).status == 0
    append(orders, [message(3, ms=3000)], schemas.MESSAGE)
    assert _route(spark, conf, lake).status == 0
    assert sorted(r["message_id"] for r in rows(lake.queue_messages)) == [1, 2, 3]

    for n in (4, 5):
        append(orders, [message(n, ms=1000 * n)], schemas.MESSAGE)
    read_last = DeltaTable(orders).version() - 2
    clean_up_log(orders)
    before = _lake_files(lake)
    run = _route(spark, conf, lake)
    assert run.status == 1 and run.out == ""
    assert run.err.count("\n") == 1, run.err
    assert run.err.startswith(
        f"job failed: table addresses/orders: its Delta log was cleaned up past version "
        f"{read_last}, the last the job read, so the rows since cannot be told from those "
        "read; keep the log longer than the job stays stopped (delta.logRetentionDuration)"
    ), run.err
    assert _lake_files(lake) == before


def _lake_files(lake: Lake) -> list[str]:
    """Every file of the lake but the jobs' logs."""
    root = Path(lake.root)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
