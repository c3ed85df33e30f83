"""The audit functions of ``routing.tools.audit`` over a small lake with every kind of dead letter.

The lake is one replay (``jobs.replay``) of a short log under a small broker.xml:

- 1 on ``orders`` rolls back twice: dead-lettered to ``DLA`` (C1), later retried by an
  operator back to ``orders`` (R1) and acknowledged there;
- 2 on ``orders`` is diverted to ``orders.eu`` (D2); an operator sends D2 to the DLA (X2);
- 3 on ``strays`` has no route: send-to-dla-on-no-route sends it on to ``DLA`` (S3, the
  same message);
- 4 on ``nowhere`` has no route and is dropped;
- ``scratch`` has neither dead-letter nor expiry address: 6 (two rollbacks) and 5
  (expires) are dropped; ``lonely``'s addresses have no queue: 8 and 9 are dropped;
- 7 on ``orders`` expires to ``ExpiryQueue`` (E7).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs import replay
from jobs.what_if import what_if
from routing.broker.ids import copy_id_py
from routing.io.delta_tables import transaction_version
from routing.io.lake import Lake
from routing.io.storage import append, route_app_id
from routing.plan import schemas
from routing.tools import audit

BROKER = """<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <diverts>
      <divert name="orders-eu">
        <address>orders</address>
        <forwarding-address>orders.eu</forwarding-address>
        <filter string="region = 'EU'"/>
        <exclusive>true</exclusive>
      </divert>
    </diverts>
    <address-settings>
      <address-setting match="#">
        <expiry-address>ExpiryQueue</expiry-address>
        <max-delivery-attempts>2</max-delivery-attempts>
      </address-setting>
      <address-setting match="orders.#">
        <dead-letter-address>DLA</dead-letter-address>
      </address-setting>
      <address-setting match="strays">
        <dead-letter-address>DLA</dead-letter-address>
        <send-to-dla-on-no-route>true</send-to-dla-on-no-route>
      </address-setting>
      <address-setting match="scratch">
        <expiry-address/>
      </address-setting>
      <address-setting match="lonely">
        <dead-letter-address>nobody</dead-letter-address>
        <expiry-address>nobody</expiry-address>
      </address-setting>
    </address-settings>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
      <address name="orders.eu"><anycast><queue name="orders.eu"/></anycast></address>
      <address name="scratch"><anycast><queue name="scratch"/></anycast></address>
      <address name="lonely"><anycast><queue name="lonely"/></anycast></address>
      <address name="DLA"><anycast><queue name="DLQ"/></anycast></address>
      <address name="ExpiryQueue"><anycast><queue name="ExpiryQueue"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""

D2 = copy_id_py(2, "DIVERT", "orders-eu", "orders.eu", None)
C1 = copy_id_py(1, "DEAD_LETTER", "orders", "DLA", None)
X2 = copy_id_py(D2, "DEAD_LETTER", "orders.eu", "DLA", None)
R1 = copy_id_py(C1, "RETRY", "DLQ", "orders", None)  # a queue named as its address: no to_queue
S3 = 3  # send-to-dla-on-no-route sends the message itself on
E7 = copy_id_py(7, "EXPIRY", "orders", "ExpiryQueue", None)


def t(seconds: int) -> dt.datetime:
    return dt.datetime(2026, 1, 1, 0, 0, seconds, tzinfo=dt.UTC)


def iso(seconds: int) -> str:
    return t(seconds).isoformat().replace("+00:00", "Z")


def send(address: str, message_id: int, at: int, **fields: object) -> dict:
    if "expiration" in fields:
        fields["expiration"] = iso(fields["expiration"])
    return dict(type="send", address=address, message_id=message_id, sent_at=iso(at), **fields)


def delivery(queue: str, message_id: int, outcome: str, at: int) -> dict:
    return dict(type="delivery", queue=queue, message_id=message_id, outcome=outcome, at=iso(at))


def operator(op: str, queue: str, message_id: int, at: int) -> dict:
    return dict(type="management", op=op, queue=queue, message_id=message_id, at=iso(at))


LOG = [
    send("orders", 1, 0, properties={"region": "US"}),
    delivery("orders", 1, "ROLLBACK", 1),
    send("orders", 2, 2, properties={"region": "EU"}),
    delivery("orders", 1, "ROLLBACK", 3),
    send("strays", 3, 4),
    operator("SEND_TO_DLA", "orders.eu", D2, 5),
    send("nowhere", 4, 6),
    send("scratch", 5, 7, expiration=9),
    send("scratch", 6, 8),
    send("orders", 7, 8, expiration=12, properties={"region": "US"}),
    send("lonely", 8, 9),
    send("lonely", 9, 9, expiration=14),
    delivery("scratch", 6, "ROLLBACK", 10),
    delivery("scratch", 6, "ROLLBACK", 11),
    delivery("lonely", 8, "ROLLBACK", 12),
    delivery("lonely", 8, "ROLLBACK", 13),
    operator("RETRY", "DLQ", C1, 15),
    delivery("orders", R1, "ACK", 16),
    delivery("DLQ", X2, "ROLLBACK", 20),
]

PATH = "hop int, message_id long, address string, via string, copy_reason string, sent_at timestamp"
LINEAGE = (
    "hop int, message_id long, address string, copy_reason string, queue string, event string, "
    "reason string, delivery_count int, at timestamp"
)


@pytest.fixture(scope="module")
def lake_dir(spark, tmp_path_factory) -> Path:
    """The replayed lake (built once for the module)."""
    root = tmp_path_factory.mktemp("audit")
    conf = root / "broker.xml"
    conf.write_text(BROKER, encoding="utf-8")
    log = root / "log.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in LOG) + "\n", encoding="utf-8")
    status = replay.main(
        ["--log", str(log), "--lake", str(root / "lake"), "--conf", str(conf)], spark=spark
    )
    assert status == 0
    return root


@pytest.fixture(scope="module")
def lake(spark, lake_dir) -> Iterator[audit.LakeFrames]:
    frames = audit.load_lake(spark, lake_dir / "lake").cache()
    yield frames
    frames.unpersist()


@pytest.fixture(scope="module")
def dead(lake) -> DataFrame:
    return audit.dead_letters(lake.journal, lake.messages, lake.queue_messages, lake.deliveries)


def equal(actual, expected) -> None:
    assert_df_equality(actual, expected, ignore_nullable=True)


# ---- lineage ------------------------------------------------------------------------------


def test_path_rebuilds_each_hop_from_the_breadcrumbs(spark, lake):
    expected = spark.createDataFrame(
        [
            (0, 2, "orders", None, None, t(2)),
            (1, D2, "orders.eu", "orders-eu", "DIVERT", t(2)),
            (2, X2, "DLA", "orders.eu", "DEAD_LETTER", t(5)),
        ],
        PATH,
    )
    equal(audit.path(lake.messages, X2), expected)


def test_lineage_follows_a_retried_dead_letter_hop_by_hop(spark, lake):
    expected = spark.createDataFrame(
        [
            (0, 1, "orders", None, "orders", "ROUTED", None, 0, t(0)),
            (0, 1, "orders", None, "orders", "REDELIVERY_SCHEDULED", None, 1, t(1)),
            (0, 1, "orders", None, "orders", "DEAD_LETTERED", "MAX_DELIVERY_ATTEMPTS", 2, t(3)),
            (1, C1, "DLA", "DEAD_LETTER", "DLQ", "ROUTED", None, 0, t(3)),
            (1, C1, "DLA", "DEAD_LETTER", "DLQ", "RETRIED", None, 0, t(15)),
            (2, R1, "orders", "RETRY", "orders", "ROUTED", None, 0, t(15)),
            (2, R1, "orders", "RETRY", "orders", "ACKED", None, 1, t(16)),
        ],
        LINEAGE,
    )
    equal(audit.lineage(lake.messages, lake.journal, R1), expected)


def test_lineage_shows_the_divert_and_the_operator(spark, lake):
    expected = spark.createDataFrame(
        [
            (0, 2, "orders", None, "orders-eu", "DIVERTED", None, None, t(2)),
            (1, D2, "orders.eu", "DIVERT", "orders.eu", "ROUTED", None, 0, t(2)),
            (1, D2, "orders.eu", "DIVERT", "orders.eu", "DEAD_LETTERED", "SEND_TO_DLA", 0, t(5)),
            (2, X2, "DLA", "DEAD_LETTER", "DLQ", "ROUTED", None, 0, t(5)),
            (2, X2, "DLA", "DEAD_LETTER", "DLQ", "REDELIVERY_SCHEDULED", None, 1, t(20)),
        ],
        LINEAGE,
    )
    equal(audit.lineage(lake.messages, lake.journal, X2), expected)


def test_lineage_of_a_no_route_dead_letter(spark, lake):
    expected = spark.createDataFrame(
        [
            (0, 3, "strays", None, None, "DEAD_LETTERED", "NO_ROUTE", 0, t(4)),
            (1, S3, "DLA", "DEAD_LETTER", "DLQ", "ROUTED", None, 0, t(4)),
        ],
        LINEAGE,
    )
    equal(audit.lineage(lake.messages, lake.journal, S3), expected)


def test_copies_of_finds_every_copy_of_a_producer_message(spark, lake):
    schema = (
        "depth int, message_id long, address string, copy_reason string, sent_at timestamp, "
        "queue string, status string, delivery_count int, status_at timestamp"
    )
    retried = spark.createDataFrame(
        [
            (0, 1, "orders", None, t(0), "orders", "DEAD_LETTERED", 2, t(3)),
            (1, C1, "DLA", "DEAD_LETTER", t(3), "DLQ", "MOVED", 0, t(15)),
            (2, R1, "orders", "RETRY", t(15), "orders", "ACKED", 1, t(16)),
        ],
        schema,
    )
    equal(audit.copies_of(lake.messages, lake.queue_messages, 1), retried)
    diverted = spark.createDataFrame(
        [
            (0, 2, "orders", None, t(2), None, None, None, None),
            (1, D2, "orders.eu", "DIVERT", t(2), "orders.eu", "DEAD_LETTERED", 0, t(5)),
            (2, X2, "DLA", "DEAD_LETTER", t(5), "DLQ", "PENDING", 1, t(20)),
        ],
        schema,
    )
    equal(audit.copies_of(lake.messages, lake.queue_messages, 2), diverted)
    # send-to-dla-on-no-route sent 3 itself on: one hop, the same id, at the DLA
    sent_on = spark.createDataFrame(
        [
            (0, 3, "strays", None, t(4), None, None, None, None),
            (1, 3, "DLA", "DEAD_LETTER", t(4), "DLQ", "PENDING", 0, t(4)),
        ],
        schema,
    )
    equal(audit.copies_of(lake.messages, lake.queue_messages, 3), sent_on)


def test_properties_of_shows_each_property_with_its_type(spark, lake):
    """A typed property with its type, an untyped one as ``untyped`` (the log's 7 sends
    ``region`` as a string: untyped); the copies' breadcrumbs are typed."""
    equal(
        audit.properties_of(lake.messages, 7),
        spark.createDataFrame(
            [("orders", "region", "US", "untyped")],
            "address string, name string, value string, type string",
        ),
    )
    crumbs = audit.properties_of(lake.messages, E7).where(F.col("name").startswith("_AMQ_"))
    equal(
        crumbs,
        spark.createDataFrame(
            [
                ("ExpiryQueue", "_AMQ_ACTUAL_EXPIRY", str(int(t(12).timestamp() * 1000)), "long"),
                ("ExpiryQueue", "_AMQ_ORIG_ADDRESS", "orders", "string"),
                ("ExpiryQueue", "_AMQ_ORIG_MESSAGE_ID", "7", "long"),
                ("ExpiryQueue", "_AMQ_ORIG_QUEUE", "orders", "string"),
            ],
            "address string, name string, value string, type string",
        ),
    )


def message(message_id, address, properties, copy_reason=None, sent_at=None) -> tuple:
    columns = dict.fromkeys(schemas.MESSAGE.names)
    columns.update(
        message_id=message_id,
        address=address,
        properties=properties,
        copy_reason=copy_reason,
        sent_at=sent_at,
    )
    return tuple(columns.values())


def test_paths_from_breadcrumbs_alone_and_around_a_no_route_hop(spark):
    spec_example = message(
        789,
        "DLA",
        {
            "_AMQ_ORIG_ADDRESS_0": "A",
            "_AMQ_ORIG_QUEUE_0": "divertAtoB",
            "_AMQ_ORIG_MESSAGE_ID_0": "123",
            "_AMQ_ORIG_ADDRESS": "B",
            "_AMQ_ORIG_QUEUE": "X",
            "_AMQ_ORIG_MESSAGE_ID": "456",
            "_AMQ_ORIG_ADDRESS_01": "not a hop",
        },
        "DEAD_LETTER",
        t(9),
    )
    # 3 had no route (77 on DLA, no _AMQ_ORIG_QUEUE); 77 was dead-lettered from DLQ (99)
    no_route = message(
        77, "DLA", {"_AMQ_ORIG_ADDRESS": "strays", "_AMQ_ORIG_MESSAGE_ID": "3"}, "DEAD_LETTER", t(4)
    )
    after = message(
        99,
        "Parking",
        {
            "_AMQ_ORIG_ADDRESS_0": "strays",
            "_AMQ_ORIG_MESSAGE_ID_0": "3",
            "_AMQ_ORIG_ADDRESS": "DLA",
            "_AMQ_ORIG_QUEUE": "DLQ",
            "_AMQ_ORIG_MESSAGE_ID": "77",
        },
        "DEAD_LETTER",
        t(6),
    )
    messages = spark.createDataFrame(
        [spec_example, no_route, after], schemas.spark_schema(schemas.MESSAGE)
    )
    expected = spark.createDataFrame(
        [
            (789, 0, 123, "A", None, None, None),
            (789, 1, 456, "B", "divertAtoB", None, None),
            (789, 2, 789, "DLA", "X", "DEAD_LETTER", t(9)),
            (99, 0, 3, "strays", None, None, None),
            (99, 1, 77, "DLA", None, "DEAD_LETTER", t(4)),
            (99, 2, 99, "Parking", "DLQ", "DEAD_LETTER", t(6)),
        ],
        "message_id long, hop int, hop_message_id long, address string, via string, "
        "copy_reason string, sent_at timestamp",
    )
    of = messages.where("message_id in (789, 99)")
    equal(
        audit.paths(of, messages).orderBy("message_id", "hop"),
        expected.orderBy("message_id", "hop"),
    )


def test_message_ids_are_ints(lake):
    with pytest.raises(TypeError, match="message_id must be an int, got str"):
        audit.path(lake.messages, "1")


# ---- dead letters, drops, expiries -----------------------------------------------------------


# fmt: off
DEAD_LETTERS = [
    (t(3), "orders", "orders", 1, "MAX_DELIVERY_ATTEMPTS", "DEAD_LETTERED", None, 2, t(0), 3.0, "DLA", C1, "orders", 1, None),
    (t(4), "strays", None, 3, "NO_ROUTE", "DEAD_LETTERED", None, 0, None, None, "DLA", S3, "strays", 3, None),
    (t(5), "orders.eu", "orders.eu", D2, "SEND_TO_DLA", "DEAD_LETTERED", None, 0, t(2), 3.0, "DLA", X2, "orders", 2, "orders-eu"),
    (t(11), "scratch", "scratch", 6, "MAX_DELIVERY_ATTEMPTS", "DROPPED", "NO_DLA", 2, t(8), 3.0, None, None, "scratch", 6, None),
    (t(13), "lonely", "lonely", 8, "MAX_DELIVERY_ATTEMPTS", "DROPPED", "DLA_NO_BINDINGS", 2, t(9), 4.0, None, None, "lonely", 8, None),
]
# fmt: on


def test_dead_letters_name_their_cause_attempts_and_time(spark, dead):
    expected = spark.createDataFrame(
        DEAD_LETTERS,
        "at timestamp, address string, queue string, message_id long, cause string, "
        "outcome string, dropped_reason string, delivery_count int, routed_at timestamp, "
        "seconds double, dead_letter_address string, copy_id long, origin_address string, "
        "origin_message_id long, divert string",
    )
    equal(dead.orderBy("at"), expected)


def test_dead_letters_over_time_causes_and_attempts(spark, dead):
    assert audit.bucket_width(dead) == "500 milliseconds"
    assert audit.bucket_width(dead, buckets=1) == "10 seconds"
    with pytest.raises(ValueError, match="every must be an interval"):
        audit.dead_letters_over_time(dead, "5 seconds'; DROP")
    equal(
        audit.dead_letters_over_time(dead, "5 seconds"),
        spark.createDataFrame(
            [
                (t(0), "orders", 1),
                (t(0), "strays", 1),
                (t(5), "orders.eu", 1),
                (t(10), "lonely", 1),
                (t(10), "scratch", 1),
            ],
            "bucket timestamp, address string, dead_letters long",
        ),
    )
    equal(
        audit.dead_letters_over_time(dead, "2 seconds", by=[], fill=True),
        spark.createDataFrame(
            [(t(2), 1), (t(4), 2), (t(6), 0), (t(8), 0), (t(10), 1), (t(12), 1)],
            "bucket timestamp, dead_letters long",
        ),
    )
    # every queue gets every bucket, the no-route dead letters (no queue) too
    by_queue = audit.dead_letters_over_time(dead, "2 seconds", by=["queue"], fill=True)
    equal(
        by_queue.groupBy("queue")
        .agg(F.count(F.lit(1)).alias("buckets"), F.sum("dead_letters").alias("dead_letters"))
        .orderBy("queue"),
        spark.createDataFrame(
            [
                (None, 6, 1),
                ("lonely", 6, 1),
                ("orders", 6, 1),
                ("orders.eu", 6, 1),
                ("scratch", 6, 1),
            ],
            "queue string, buckets long, dead_letters long",
        ),
    )
    equal(
        audit.top_causes(dead),
        spark.createDataFrame(
            [
                ("MAX_DELIVERY_ATTEMPTS", 3, 2, 0.6),
                ("NO_ROUTE", 1, 0, 0.2),
                ("SEND_TO_DLA", 1, 0, 0.2),
            ],
            "cause string, dead_letters long, dropped long, share double",
        ),
    )
    equal(
        audit.attempts_and_durations(dead, by=["cause"]),
        spark.createDataFrame(
            [
                ("MAX_DELIVERY_ATTEMPTS", 3, 2, 2.0, 2, 10 / 3, 4.0),
                ("NO_ROUTE", 1, 0, 0.0, 0, None, None),
                ("SEND_TO_DLA", 1, 0, 0.0, 0, 3.0, 3.0),
            ],
            "cause string, dead_letters long, attempts_min int, attempts_avg double, "
            "attempts_max int, seconds_avg double, seconds_max double",
        ),
    )


def test_dropped_messages_and_why(spark, lake):
    drops = audit.dropped(lake.journal, lake.messages)
    equal(
        drops.orderBy("at"),
        spark.createDataFrame(
            [
                (t(6), "nowhere", None, 4, "NO_ROUTE", 0),
                (t(9), "scratch", "scratch", 5, "NO_EXPIRY_ADDRESS", 0),
                (t(11), "scratch", "scratch", 6, "NO_DLA", 2),
                (t(13), "lonely", "lonely", 8, "DLA_NO_BINDINGS", 2),
                (t(14), "lonely", "lonely", 9, "EXPIRY_NO_BINDINGS", 0),
            ],
            "at timestamp, address string, queue string, message_id long, reason string, "
            "delivery_count int",
        ),
    )
    equal(
        audit.drops_by_reason(drops, by=["address"]),
        spark.createDataFrame(
            [("lonely", 2), ("scratch", 2), ("nowhere", 1)], "address string, dropped long"
        ),
    )


def test_expiries_per_address(spark, lake):
    expired = audit.expiries(lake.journal, lake.queue_messages)
    equal(
        expired.orderBy("at"),
        spark.createDataFrame(
            [
                (t(9), "scratch", "scratch", 5, "DROPPED", "NO_EXPIRY_ADDRESS", None, None),
                (t(12), "orders", "orders", 7, "EXPIRED", None, "ExpiryQueue", E7),
                (t(14), "lonely", "lonely", 9, "DROPPED", "EXPIRY_NO_BINDINGS", None, None),
            ],
            "at timestamp, address string, queue string, message_id long, outcome string, "
            "reason string, expiry_address string, copy_id long",
        ),
    )
    equal(
        audit.expiries_per_address(expired),
        spark.createDataFrame(
            [("lonely", 0, 1, 1), ("orders", 1, 0, 1), ("scratch", 0, 1, 1)],
            "address string, expired long, dropped long, total long",
        ),
    )


# ---- what if ---------------------------------------------------------------------------------


def test_what_if_replays_the_inputs_under_another_broker_xml(spark, lake, lake_dir, tmp_path):
    assert audit.lake_clock(lake_dir / "lake") == t(20)
    variant = tmp_path / "three-attempts.xml"
    variant.write_text(
        BROKER.replace("<max-delivery-attempts>2<", "<max-delivery-attempts>3<"), encoding="utf-8"
    )

    run = what_if(spark, lake_dir / "lake", variant, tmp_path / "scratch")

    assert run.status == 0, run.output
    then = audit.load_lake(spark, run.lake)
    # three attempts: 1, 6 and 8 are still pending after two rollbacks, so no C1 to retry
    equal(
        audit.compare_outcomes(lake.queue_messages, then.queue_messages),
        spark.createDataFrame(
            [
                ("DLA", "DLQ", "MOVED", 1, 0, -1),
                ("DLA", "DLQ", "PENDING", 2, 2, 0),
                ("ExpiryQueue", "ExpiryQueue", "PENDING", 1, 1, 0),
                ("lonely", "lonely", "DROPPED", 2, 1, -1),
                ("lonely", "lonely", "PENDING", 0, 1, 1),
                ("orders", "orders", "ACKED", 1, 0, -1),
                ("orders", "orders", "DEAD_LETTERED", 1, 0, -1),
                ("orders", "orders", "EXPIRED", 1, 1, 0),
                ("orders", "orders", "PENDING", 0, 1, 1),
                ("orders.eu", "orders.eu", "DEAD_LETTERED", 1, 1, 0),
                ("scratch", "scratch", "DROPPED", 2, 1, -1),
                ("scratch", "scratch", "PENDING", 0, 1, 1),
            ],
            "address string, queue string, status string, before long, after long, difference long",
        ),
    )
    # the RETRY of C1 and the ACK of its retry copy name messages that were never made
    equal(
        audit.compare_rejections(lake.rejected, then.rejected),
        spark.createDataFrame(
            [
                ("deliveries", "no PENDING message <id> in queue orders", 0, 1, 1),
                ("management", "no PENDING message <id> in queue DLQ", 0, 1, 1),
            ],
            "source string, reason string, before long, after long, difference long",
        ),
    )


def test_what_if_never_writes_to_the_audited_lake(spark, lake_dir, tmp_path):
    with pytest.raises(ValueError, match="is the audited lake"):
        audit.copy_inputs(spark, lake_dir / "lake", lake_dir / "lake")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "deliveries").mkdir()
    with pytest.raises(ValueError, match="is not empty"):
        audit.copy_inputs(spark, lake_dir / "lake", tmp_path / "used")


def test_a_half_written_batch_is_not_seen_until_it_is_finished(spark, lake_dir, tmp_path):
    """A run that stopped inside a batch left that batch's journal and a copy committed, and
    not its queue rows: the audit reads the lake as of the last finished batch, and sees
    the batch once its queue_messages commit lands (a restart rolls it forward)."""
    root = tmp_path / "lake"
    shutil.copytree(lake_dir / "lake", root)
    lake = Lake.at(root)
    before = audit.load_lake(spark, lake)
    journal, messages = before.journal.count(), before.messages.count()
    app_id = route_app_id(lake)
    assert app_id is not None
    batch = transaction_version(lake.queue_messages, app_id) + 1

    def commit(location: str, rows: DataFrame) -> None:
        append(rows, location, app_id=app_id, txn_version=batch)

    commit(lake.journal, before.journal.limit(2))
    commit(lake.address_table("DLA"), before.messages.where("address = 'DLA'").limit(1))
    commit(lake.address_table("new.address"), before.messages.limit(1))  # created by it
    half = audit.load_lake(spark, lake)
    assert (half.journal.count(), half.messages.count()) == (journal, messages)

    commit(lake.queue_messages, before.queue_messages.limit(0))
    finished = audit.load_lake(spark, lake)
    assert (finished.journal.count(), finished.messages.count()) == (journal + 2, messages + 2)
