"""Replay of historical logs (docs/REPLAY.md): ``routing.tools.replay`` and ``jobs.replay``."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from jobs import demo
from jobs import replay as replay_job
from routing.io.lake import Lake
from routing.io.session import SMALL_BATCH_ROWS
from routing.plan._columns import union_by_name
from routing.tools import replay
from tests.lakeio import rows

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "conf" / "sample-log.jsonl"
BROKER = ROOT / "conf" / "broker.xml"
UTC = dt.UTC


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = [
    json.dumps(
        {
            "type": "send",
            "address": "orders",
            "message_id": 1,
            "sent_at": "2026-01-01T00:00:00Z",
            "properties": {"region": "EU"},
            "body": "hi",
        }
    ),
    json.dumps(
        {
            "type": "delivery",
            "queue": "orders",
            "message_id": 1,
            "outcome": "ACK",
            "at": "2026-01-01T00:00:01+00:00",
        }
    ),
    json.dumps({"type": "management", "op": "RETRY", "queue": "DLQ", "at": "2026-01-01T00:00:02Z"}),
]
BAD = [
    "not json at all",
    json.dumps(
        {"type": "send", "address": "orders", "message_id": 2, "sent_at": "2026-01-01T00:00:00"}
    ),
    json.dumps(
        {
            "type": "delivery",
            "queue": "orders",
            "message_id": "x",
            "outcome": "ACK",
            "at": "2026-01-01T00:00:01Z",
        }
    ),
    json.dumps({"type": "teleport", "at": "2026-01-01T00:00:01Z"}),
    json.dumps({"type": "management", "queue": "q", "at": "2026-01-01T00:00:01Z"}),
]


def test_bad_lines_are_rejected_with_their_line_numbers(spark, tmp_path):
    log = write_lines(
        tmp_path / "log.jsonl",
        [GOOD[0], BAD[0], "", BAD[1], GOOD[1], BAD[2], BAD[3], BAD[4], GOOD[2]],
    )
    loaded = replay.load(spark, [str(log)])

    reasons = sorted(r.reason for r in loaded.rejected.collect())
    assert reasons == [
        "line 2: not a JSON object",
        'line 4: sent_at ["2026-01-01T00:00:00"] has no time zone',
        "line 6: message_id is not an integer: x",
        'line 7: unknown type ["teleport"]',
        "line 8: management record without op",
    ]
    assert {r.source for r in loaded.rejected.collect()} == {f"log:{log}"}
    assert sorted((r.kind, r.number) for r in loaded.records.collect()) == [
        ("delivery", 5),
        ("management", 9),
        ("send", 1),
    ]


def test_line_numbers_hold_across_the_splits_of_a_large_log(spark, tmp_path):
    lines = [
        json.dumps(
            {
                "type": "send",
                "address": "a",
                "message_id": i,
                "sent_at": "2026-01-01T00:00:00Z",
                "body": "x" * 200,
            }
        )
        for i in range(1, 30_001)
    ]
    lines[25_000] = "{broken"
    log = write_lines(tmp_path / "big.jsonl", lines)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(1 << 20))  # several splits
    try:
        loaded = replay.load(spark, [str(log)])
        assert [r.reason for r in loaded.rejected.collect()] == ["line 25001: not a JSON object"]
        numbers = loaded.records.selectExpr(
            "min(number)", "max(number)", "count(*)", "sum(number - message_id)"
        ).first()
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert tuple(numbers) == (1, 30_000, 29_999, 0)


def test_a_parquet_log_loads_like_the_same_json_lines(spark, tmp_path):
    log = write_lines(tmp_path / "log.jsonl", GOOD)
    table = pa.table(
        {
            "type": ["send", "delivery", "management"],
            "address": ["orders", None, None],
            "message_id": pa.array([1, 1, None], pa.int64()),
            "sent_at": pa.array(
                [dt.datetime(2026, 1, 1, tzinfo=UTC), None, None], pa.timestamp("us", "UTC")
            ),
            "properties": pa.array(
                [[("region", "EU")], None, None], pa.map_(pa.string(), pa.string())
            ),
            "body": pa.array([b"hi", None, None], pa.binary()),
            "queue": [None, "orders", "DLQ"],
            "outcome": [None, "ACK", None],
            "op": [None, None, "RETRY"],
            "at": pa.array(
                [
                    None,
                    dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
                    dt.datetime(2026, 1, 1, 0, 0, 2, tzinfo=UTC),
                ],
                pa.timestamp("us", "UTC"),
            ),
        }
    )
    parquet = tmp_path / "log.parquet"
    pq.write_table(table, parquet)

    def tables(path):
        checked = replay.checked(spark, [str(path)])
        counts = replay.table_counts(checked)
        assert counts == {"addresses/orders": 1, "deliveries": 1, "management": 1}
        rows = replay.lake_rows(replay.split(checked), counts)
        return union_by_name(list(rows.values()), allow_missing=True)

    assert_df_equality(tables(parquet), tables(log), ignore_row_order=False, ignore_nullable=True)


def test_property_values_carry_their_types_into_the_lake(spark, tmp_path):
    """A JSON value's type goes to ``property_types`` (a string stays untyped), with its
    text in Java's form; a record's ``property_types`` adds or overrides types; a Parquet
    log's ``property_types`` column goes as it is (docs/REPLAY.md)."""
    line = {
        "type": "send",
        "address": "orders",
        "message_id": 1,
        "sent_at": "2026-01-01T00:00:00Z",
        "properties": {
            "region": "EU",
            "qty": 3,
            "price": 2.5,
            "big": 1e20,
            "express": True,
            "code": "007",
            "small": {"type": "short", "value": "7"},
            "ratio": {"type": "float", "value": 0.5},
        },
        "property_types": {"code": "string"},
    }
    log = write_lines(tmp_path / "log.jsonl", [json.dumps(line)])
    parquet = tmp_path / "log.parquet"
    pq.write_table(
        pa.table(
            {
                "type": ["send"],
                "address": ["orders"],
                "message_id": pa.array([2], pa.int64()),
                "sent_at": pa.array(
                    [dt.datetime(2026, 1, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")
                ),
                "properties": pa.array([[("qty", "4")]], pa.map_(pa.string(), pa.string())),
                "property_types": pa.array(
                    [[("qty", "integer")]], pa.map_(pa.string(), pa.string())
                ),
            }
        ),
        parquet,
    )
    loaded = replay.load(spark, [str(log), str(parquet)])
    found = {
        r.message_id: (dict(r.properties), dict(r.property_types or {}))
        for r in loaded.records.collect()
    }
    assert found == {
        1: (
            {
                "region": "EU",
                "qty": "3",
                "price": "2.5",
                "big": "1.0E20",
                "express": "true",
                "code": "007",
                "small": "7",
                "ratio": "0.5",
            },
            {
                "qty": "long",
                "price": "double",
                "big": "double",
                "express": "boolean",
                "code": "string",
                "small": "short",
                "ratio": "float",
            },
        ),
        2: ({"qty": "4"}, {"qty": "integer"}),
    }
    assert loaded.rejected.count() == 0


def test_a_short_replay_counts_the_logs_records_and_the_lakes_rows(spark, tmp_path):
    """``jobs.replay`` starts a short run's JVM (C1 only, session.SHORT_RUN_JAVA_OPTIONS)
    when the logs and the lake's input so far are one small batch at most."""
    log = write_lines(tmp_path / "log.jsonl", GOOD)
    parquet = tmp_path / "log.parquet"
    pq.write_table(pa.table({"type": ["send"] * 5}), parquet)
    logs = [str(log), str(parquet)]
    assert [replay.records_within(logs, rows) for rows in (2, 7, 8, 100)] == [None, None, 8, 8]

    lake = Lake.at(tmp_path / "lake")
    near = [str(write_lines(tmp_path / "near.jsonl", [GOOD[0]] * (SMALL_BATCH_ROWS - 1)))]
    assert replay_job.short_run(lake, near)  # an empty lake
    replay_job.load_logs(spark, lake, [str(log)])  # three input rows
    assert replay_job.short_run(lake, [str(log)])
    assert not replay_job.short_run(lake, near)
    assert not replay_job.short_run(lake, [str(tmp_path / "missing.jsonl")])


def test_the_records_are_counted_by_the_table_they_go_to(spark, tmp_path):
    """One job finds the tables a load writes and their rows, rejected lines included."""
    log = write_lines(tmp_path / "log.jsonl", [*GOOD, BAD[0], GOOD[0]])
    counts = replay.table_counts(replay.checked(spark, [str(log)]))
    assert counts == {
        "addresses/orders": 2,
        "deliveries": 1,
        "management": 1,
        "rejected": 1,
    }


def test_loading_the_same_logs_twice_appends_them_once(spark, tmp_path):
    log = write_lines(tmp_path / "log.jsonl", [*GOOD, BAD[0]])
    lake = Lake.at(tmp_path / "lake")
    for _ in range(2):
        replay_job.load_logs(spark, lake, [str(log)])
    assert len(rows(lake.address_table("orders"))) == 1
    assert len(rows(lake.deliveries)) == 1
    assert len(rows(lake.management)) == 1
    assert [r["reason"] for r in rows(lake.rejected)] == ["line 4: not a JSON object"]
    message = rows(lake.address_table("orders"))[0]
    assert (message["message_id"], message["body"], message["properties"]) == (
        1,
        b"hi",
        [("region", "EU")],
    )


def test_replaying_the_sample_log_routes_retries_and_moves(spark, tmp_path):
    out = io.StringIO()
    lake = tmp_path / "lake"
    status = replay_job.main(
        ["--log", str(SAMPLE), "--lake", str(lake), "--conf", str(BROKER)], spark=spark, out=out
    )
    assert status == 0, out.getvalue()
    state = {
        (r["queue"], r["copy_reason"]): r["status"] for r in rows(Lake.at(lake).queue_messages)
    }
    assert state == {
        ("orders", None): "ACKED",
        ("orders.eu", "DIVERT"): "MOVED",  # MOVE by filter to audit.large
        ("audit.archive", "DIVERT"): "PENDING",  # the US order's audit copy
        ("audit.large", "MOVE"): "PENDING",
        ("payments", None): "DEAD_LETTERED",  # three rollbacks
        ("DLQ.payments", "DEAD_LETTER"): "MOVED",  # RETRY by queue, no filter, in the same batch
        ("payments", "RETRY"): "PENDING",
        ("notifications.email", None): "ACKED",
        ("notifications.sms", None): "EXPIRED",
        ("ExpiryQueue", "EXPIRY"): "PENDING",
    }
    assert "summary:" in out.getvalue()
    # the tables replay creates have the SPEC's types: the RETRY copy appended by the job reads back
    payments = spark.read.format("delta").load(Lake.at(lake).address_table("payments"))
    assert dict(payments.dtypes)["copy_reason"] == "string"
    assert sorted((r.copy_reason or "") for r in payments.collect()) == ["", "RETRY"]


def test_an_invalid_configuration_stops_the_replay_before_it_writes(spark, tmp_path):
    conf = tmp_path / "broker.xml"
    conf.write_text(BROKER.read_text().replace('match="payments"', 'match="pay#ments.#"'))
    err = io.StringIO()
    lake = tmp_path / "lake"
    status = replay_job.main(
        ["--log", str(SAMPLE), "--lake", str(lake), "--conf", str(conf)], spark=spark, err=err
    )
    assert status == 2
    assert "configuration error" in err.getvalue() and "pay#ments.#" in err.getvalue()
    assert not lake.exists()


def test_a_missing_log_is_an_error_before_anything_is_written(spark, tmp_path):
    err = io.StringIO()
    status = replay_job.main(
        [
            "--log",
            str(tmp_path / "nope.jsonl"),
            "--lake",
            str(tmp_path / "lake"),
            "--conf",
            str(BROKER),
        ],
        spark=spark,
        err=err,
    )
    assert status == 1 and "nope.jsonl" in err.getvalue()
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("seed", [1, 2])
def test_the_demo_traffic_is_seeded(seed):
    assert demo.traffic(300, seed).equals(demo.traffic(300, seed))
    assert not demo.traffic(300, seed).equals(demo.traffic(300, seed + 10))
