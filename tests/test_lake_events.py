"""The job's input stream: every input table as one stream, cut in event time."""

from __future__ import annotations

import datetime as dt
import itertools
import pickle
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import Row
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from routing.broker.layout import ROUTING_APP_PREFIX
from routing.io.delta_tables import TableFiles, commit_app_ids, epoch_micros
from routing.io.lake import Lake
from routing.io.lake_events import (
    ARROW_FILE_ROWS,
    ARROW_READ_FILES,
    INPUT_READER,
    INPUT_SOURCE,
    MAX_EVENTS_PER_TRIGGER,
    ROW_CHECKS,
    SLICE,
    UNBOUNDED,
    LakeEventsReader,
    batch_as_of,
    batch_rows,
    check_lake,
    inputs_within,
    read_events,
    reads_by_arrow,
    stream,
)
from routing.io.session import (
    READER_BATCH_ROWS,
    SMALL_BATCH_ROWS,
    batch_conf,
    reader_batch_rows,
    small_batch,
)
from routing.io.storage import append as job_append
from routing.io.storage import session_conf
from routing.plan import schemas
from tests.frames import assert_rows_equal
from tests.lakeio import append, at, clean_up_log


def send(lake: Lake, address: str, *messages: tuple[int, int]) -> None:
    """One producer commit: (message_id, sent_at ms) pairs."""
    append(
        lake.address_table(address),
        [{"message_id": i, "address": address, "sent_at": at(t)} for i, t in messages],
        schemas.MESSAGE,
    )


def deliver(lake: Lake, *events: tuple[str, int, str, int]) -> None:
    append(
        lake.deliveries,
        [{"queue": q, "message_id": i, "outcome": o, "at": at(t)} for q, i, o, t in events],
        schemas.DELIVERY,
    )


SOURCES = ["jvm", "python"]
"""The stream's two sources (:data:`INPUT_SOURCE`): planned in the driver for the JVM's, in
Spark's Python processes for the ``lake_events`` data source. The tests of what a batch
holds run on both; the others on the default, the JVM's."""


def run(spark, lake: Lake, checkpoint: str, each=None, source: str = "jvm", **options) -> list:
    """Run the stream available-now; return ``each`` of each micro-batch's slices (by
    default, its input rows)."""
    if each is None:

        def each(slices):
            return read_events(spark, slices).collect()

    batches: list = []
    with session_conf(spark, {INPUT_SOURCE: source}):
        events = stream(spark, lake.root, {key: str(value) for key, value in options.items()})
    query = (
        events.writeStream.foreachBatch(lambda df, _: batches.append(each(df.collect())))
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return batches


def read_by_each(spark, setting: str, *values: str):
    """A batch function for :func:`run`: its slices read once with each of ``values`` of the
    session ``setting``."""

    def each(slices):
        frames = []
        for value in values:
            with session_conf(spark, {setting: value}):
                frames.append(read_events(spark, slices))
        return frames

    return each


def key(row) -> tuple:
    return (row.source, row.message_id, row.sent_at or row.at)


@pytest.mark.parametrize("source", SOURCES)
def test_every_input_table_in_one_stream(spark, tmp_path, source):
    lake = Lake.at(tmp_path)
    send(lake, "orders", (1, 0), (2, 10))
    send(lake, "a/b", (3, 5))
    deliver(lake, ("q", 1, "ACK", 20))
    append(
        lake.management,
        [{"op": "MOVE", "queue": "q", "message_id": 2, "to_queue": "r", "at": at(30)}],
        schemas.MANAGEMENT,
    )
    batches = run(spark, lake, str(tmp_path / "ck"), source=source)
    rows = [r for b in batches for r in b]
    assert sorted((r.source, r.message_id) for r in rows) == [
        ("addresses/a=2Fb", 3),
        ("addresses/orders", 1),
        ("addresses/orders", 2),
        ("deliveries", 1),
        ("management", 2),
    ]
    move = next(r for r in rows if r.source == "management")
    assert (move.op, move.queue, move.to_queue, move.error) == ("MOVE", "q", "r", None)
    assert all(r.error is None and r.raw is None for r in rows)


@pytest.mark.parametrize("source", SOURCES)
def test_two_tables_whose_files_share_names_are_each_read_once(spark, tmp_path, source):
    # a table copied to another address's folder: the same data files, by name
    lake = Lake.at(tmp_path)
    send(lake, "orders", (1, 0), (2, 10))
    shutil.copytree(lake.address_table("orders"), lake.address_table("archive"))
    send(lake, "notices", (3, 5))
    rows = [r for b in run(spark, lake, str(tmp_path / "ck"), source=source) for r in b]
    assert sorted((r.source, r.message_id) for r in rows) == [
        ("addresses/archive", 1),
        ("addresses/archive", 2),
        ("addresses/notices", 3),
        ("addresses/orders", 1),
        ("addresses/orders", 2),
    ]
    # the copy's rows name the address they were sent to, not the copy's
    assert {r.source for r in rows if r.error} == {"addresses/archive"}


def test_the_jvm_checks_of_rows_read_as_the_plain_path(spark, tmp_path):
    """The job's JVM functions of the types rule and of the quoting of values
    (:data:`ROW_CHECKS` ``jvm``) and Spark's expressions (``plain``) read the same rows,
    reasons word for word."""
    lake = Lake.at(tmp_path)
    typed = [
        ({"n": "7", "s": "x"}, {"n": "integer", "s": "string"}),
        ({"n": "7.5"}, {"n": "integer"}),
        ({"a": "1", "b": "2", "c": "3", "d": "4", "e": "true"}, dict.fromkeys("abcde", "long")),
        ({"n": "1"}, {"n": "decimal"}),
        ({}, {"n": "byte"}),
    ]
    append(
        lake.address_table("orders"),
        [
            {
                "message_id": i,
                "address": "orders",
                "sent_at": at(i),
                "properties": list(p.items()),
                "property_types": list(t.items()),
            }
            for i, (p, t) in enumerate(typed)
        ]
        # in the table of another address, quoted in its reason
        + [{"message_id": len(typed), "address": "ship\tment's", "sent_at": at(len(typed))}],
        schemas.MESSAGE,
    )

    ((jvm, plain),) = run(
        spark, lake, str(tmp_path / "ck"), read_by_each(spark, ROW_CHECKS, "jvm", "plain")
    )
    assert_rows_equal(jvm, plain, ["message_id"])
    errors = [r.error for r in jvm.orderBy("message_id").collect()]
    assert errors[0] is None and all(errors[1:]), errors
    assert errors[-1] == 'address "ship\\tment\'s" does not belong in table addresses/orders'


def test_the_arrow_reader_reads_what_sparks_reader_reads(spark, tmp_path):
    """A batch's input files read by pyarrow in Python workers (:data:`INPUT_READER`
    ``arrow``, what ``auto`` picks for many files) give the rows Spark's Parquet reader gives
    (``spark``, the plain path), positions and checks included: tables of every kind, a
    table whose later commit added columns (its first file has none of them: nulls), two
    tables whose files share names (told apart by folder), typed properties, bodies."""
    lake = Lake.at(tmp_path)
    narrow = pa.schema(
        [f for f in schemas.MESSAGE if f.name in ("message_id", "address", "sent_at")]
    )
    append(
        lake.address_table("orders"),
        [{"message_id": 1, "address": "orders", "sent_at": at(0)}],
        narrow,
    )
    write_deltalake(
        lake.address_table("orders"),
        pa.Table.from_pylist(
            [
                {
                    "message_id": 2,
                    "address": "orders",
                    "sent_at": at(10),
                    "expiration": at(900),
                    "priority": 7,
                    "durable": True,
                    "user_id": "u",
                    "properties": [("n", "7"), ("s", "x")],
                    "property_types": [("n", "integer")],
                    "body": b"\x00\xffpayload",
                },
                {
                    "message_id": 3,
                    "address": "elsewhere",
                    "sent_at": at(20),
                    "routing_type": "ANYCAST",
                },
            ],
            schema=schemas.MESSAGE,
        ),
        mode="append",
        schema_mode="merge",
    )
    send(lake, "a/b", (4, 5), (5, 6))
    shutil.copytree(lake.address_table("a/b"), lake.address_table("archive"))
    deliver(lake, ("q", 1, "ACK", 30), ("q", 2, "ROLLBACK", 40))
    append(
        lake.management,
        [{"op": "MOVE", "queue": "q", "message_id": 2, "to_queue": "r", "at": at(50)}],
        schemas.MANAGEMENT,
    )

    both = read_by_each(spark, INPUT_READER, "spark", "arrow")
    ((plain, arrow),) = run(spark, lake, str(tmp_path / "ck"), both)
    assert plain.count() == 10
    assert_rows_equal(arrow, plain, ["source", "version", "file", "row"])


@pytest.mark.parametrize(
    ("locations", "expected"),
    [
        (["/lake/addresses/orders/part-0.parquet"], True),
        (["file:///lake/addresses/a%3Db/part-0.parquet"], True),
        (["file:/lake/part-0.parquet", "s3a://bucket/lake/part-0.parquet"], False),
    ],
)
def test_the_arrow_reader_takes_local_files_only(spark, locations, expected):
    with session_conf(spark, {INPUT_READER: "arrow"}):
        assert reads_by_arrow(spark, locations, 1) is expected
    with session_conf(spark, {INPUT_READER: "spark"}):
        assert not reads_by_arrow(spark, locations, 1)


def test_the_arrow_reader_is_for_many_small_files(spark):
    files = [f"/lake/addresses/svc.{k}/part-0.parquet" for k in range(ARROW_READ_FILES)]
    small, large = len(files) * ARROW_FILE_ROWS, len(files) * ARROW_FILE_ROWS + 1
    assert reads_by_arrow(spark, files, small)
    assert not reads_by_arrow(spark, files, large)
    assert not reads_by_arrow(spark, files, None)  # statistics without counts
    assert not reads_by_arrow(spark, files[1:], 1)


def test_a_batch_knows_its_size_from_its_slices(spark, tmp_path):
    lake = Lake.at(tmp_path)
    send(lake, "orders", (1, 0), (2, 10))
    send(lake, "orders", (3, 20))
    deliver(lake, ("q", 1, "ACK", 30))
    assert run(spark, lake, str(tmp_path / "ck"), batch_rows) == [4]
    assert (small_batch(4), small_batch(SMALL_BATCH_ROWS + 1), small_batch(None)) == (
        True,
        False,
        False,
    )


def test_a_batch_reads_many_small_files_in_as_many_partitions_as_its_shuffles(spark, tmp_path):
    """Spark splits a read of many small files into many partitions (here one per two
    files); a large batch's settings (``session.batch_conf``) bound them by its shuffle
    partitions, and the rows are the same."""
    lake = Lake.at(tmp_path)
    for k in range(12):
        send(lake, f"svc.{k}", (k, k))
    (slices,) = run(spark, lake, str(tmp_path / "ck"), lambda s: s)
    split = {"spark.sql.files.maxPartitionBytes": str(8 << 20)}  # two 4 MB file opens
    with session_conf(spark, split):
        plain = read_events(spark, slices)
        assert plain.rdd.getNumPartitions() == 6
        with session_conf(spark, batch_conf(spark, SMALL_BATCH_ROWS + 1)):
            bounded = read_events(spark, slices)
            shuffles = int(spark.conf.get("spark.sql.shuffle.partitions"))
            assert bounded.rdd.getNumPartitions() == shuffles == 2
            assert_rows_equal(bounded, plain, ["message_id"])


def test_a_large_batch_of_small_files_reads_them_in_batches_of_their_size(spark, tmp_path):
    """Spark's Parquet reader allocates its batch's column vectors in every file it opens:
    a large batch of small files reads them in batches of about a file's rows (at least
    256), larger files in Spark's own 4,096; the rows read are the same."""
    assert [reader_batch_rows(1_100_000, n) for n in (4_000, 1_000, 16)] == [512, 2048, 4096]
    assert reader_batch_rows(10, 10) == 256
    assert batch_conf(spark, 1_100_000, 4_000)[READER_BATCH_ROWS] == "512"
    assert READER_BATCH_ROWS not in batch_conf(spark, 11_000_000, 2_000)
    assert READER_BATCH_ROWS not in batch_conf(spark, SMALL_BATCH_ROWS)  # small: its own

    lake = Lake.at(tmp_path)
    for k in range(2):  # files of 600 rows: three batches of at most 256
        rows = [
            {
                "message_id": k * 1000 + i,
                "address": f"svc.{k}",
                "sent_at": at(i),
                "properties": {"n": str(i)} if i % 3 else None,
                "body": bytes(i % 7),
            }
            for i in range(600)
        ]
        append(lake.address_table(f"svc.{k}"), rows, schemas.MESSAGE)
    (slices,) = run(spark, lake, str(tmp_path / "ck"), lambda s: s)
    plain = read_events(spark, slices)
    with session_conf(spark, batch_conf(spark, SMALL_BATCH_ROWS + 1, 1_000)):
        assert spark.conf.get(READER_BATCH_ROWS) == "256"
        assert_rows_equal(read_events(spark, slices), plain, ["message_id"])


def test_whether_the_input_tables_hold_at_most_so_many_rows(spark, tmp_path):
    """``jobs.route`` starts a short run's JVM (session.SHORT_RUN_JAVA_OPTIONS) when they do;
    a file without a row count in its statistics makes the answer no."""
    lake = Lake.at(tmp_path)
    send(lake, "orders", (1, 0), (2, 10))
    send(lake, "invoices", (3, 20))
    deliver(lake, ("q", 1, "ACK", 30))
    sources = check_lake(lake)
    assert [inputs_within(lake, sources, rows) for rows in (0, 3, 4, 5)] == [
        False,
        False,
        True,
        True,
    ]
    assert inputs_within(lake, [], 0)

    with session_conf(spark, {"spark.databricks.delta.stats.collect": "false"}):
        spark.createDataFrame(
            [("q", 2, "ACK", at(40))], schemas.spark_schema(schemas.DELIVERY)
        ).write.format("delta").mode("append").save(lake.deliveries)
    assert not inputs_within(lake, sources, 100)


@pytest.mark.parametrize("source", SOURCES)
def test_a_rate_limit_cuts_in_event_time_and_loses_nothing(spark, tmp_path, source):
    lake = Lake.at(tmp_path)
    # one commit per 100 ms of event time per table, interleaved across tables
    for step in range(8):
        send(lake, "a", *[(step * 10 + i, step * 100 + i * 10) for i in range(5)])
        send(lake, "b", (1000 + step, step * 100 + 50))
        deliver(lake, ("q", step * 10, "ACK", step * 100 + 60))
    whole = run(spark, lake, str(tmp_path / "ck1"), source=source)
    cut = run(spark, lake, str(tmp_path / "ck2"), source=source, maxEventsPerTrigger=12)

    assert len(cut) > 3
    assert sorted(key(r) for b in cut for r in b) == sorted(key(r) for b in whole for r in b)
    # every batch is "everything up to a time": no later batch holds an earlier event
    bounds = [
        (min(r.sent_at or r.at for r in b), max(r.sent_at or r.at for r in b)) for b in cut if b
    ]
    assert all(prev[1] < nxt[0] for prev, nxt in itertools.pairwise(bounds))


def test_a_rate_limit_counts_the_part_of_a_long_file_up_to_the_cut(tmp_path):
    """A sparse table's file spans far more time than a dense one's: the rows of it that a
    cut takes count towards the limit, so batches stay about the limit's size."""
    lake = Lake.at(tmp_path)
    for step in range(10):  # ten files of 10 rows, 100 ms each
        send(lake, "dense", *[(step * 10 + i, step * 100 + i * 10) for i in range(10)])
    send(lake, "sparse", *[(1000 + i, i * 10) for i in range(100)])  # one file: 0 to 990 ms
    times = [epoch_micros(at(s * 100 + i * 10)) for s in range(10) for i in range(10)]
    times += [epoch_micros(at(i * 10)) for i in range(100)]

    reader = LakeEventsReader(lake.root, {"maxeventspertrigger": "50"})
    reader.prepareForTriggerAvailableNow()
    untils, offset = [], reader.initialOffset()
    for _ in range(20):  # the batches of an available-now run
        offset = reader.latestOffset(offset, ReadMaxRows(50))
        untils.append(offset["until"])
        if offset["until"] == UNBOUNDED:
            break
    sizes = [
        sum(1 for t in times if low < t <= high) for low, high in itertools.pairwise([-1, *untils])
    ]
    assert sum(sizes) == 200 and len(sizes) >= 4
    assert all(0 < n <= 50 + 10 for n in sizes[:-1]), sizes  # the limit and a dense file


def test_rows_held_back_by_the_cut_come_later_and_late_rows_still_arrive(spark, tmp_path):
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0), (2, 1000))  # one file spanning the cut
    send(lake, "b", *[(10 + i, 10 + i) for i in range(20)])
    first = run(spark, lake, str(tmp_path / "ck"), maxEventsPerTrigger=5)
    seen = [r.message_id for b in first for r in b]
    assert sorted(seen) == sorted([1, 2, *range(10, 30)])
    send(lake, "a", (3, 5))  # late: older than everything already read
    second = run(spark, lake, str(tmp_path / "ck"), maxEventsPerTrigger=5)
    assert [r.message_id for b in second for r in b] == [3]


def test_rows_of_the_wrong_types_come_with_a_reason(spark, tmp_path):
    lake = Lake.at(tmp_path)
    naive = pa.schema(
        [
            ("message_id", pa.int64()),
            ("address", pa.string()),
            ("sent_at", pa.timestamp("us")),
            ("properties", pa.map_(pa.string(), pa.int64())),
        ]
    )
    append(
        lake.address_table("naive"),
        [
            {
                "message_id": 1,
                "address": "naive",
                "sent_at": at(0).replace(tzinfo=None),
                "properties": [("n", 1)],
            }
        ],
        naive,
    )
    texty = pa.schema(
        [("message_id", pa.string()), ("address", pa.string()), ("sent_at", pa.string())]
    )
    append(
        lake.address_table("texty"),
        [
            {"message_id": "7", "address": "texty", "sent_at": "2026-01-01T00:00:00Z"},
            {"message_id": "x", "address": "texty", "sent_at": "2026-01-01T00:00:01Z"},
            {"message_id": "8", "address": "texty", "sent_at": "2026-01-01 00:00:02"},
            {"message_id": "9", "address": "elsewhere", "sent_at": "2026-01-01T00:00:03+00:00"},
        ],
        texty,
    )
    rows = {(r.source, r.row): r for b in run(spark, lake, str(tmp_path / "ck")) for r in b}

    bad = rows[("addresses/naive", 0)]
    assert bad.error == "sent_at: timestamp without a time zone"
    assert '"properties":{"n":1}' in bad.raw
    assert (
        rows[("addresses/texty", 0)].error is None and rows[("addresses/texty", 0)].message_id == 7
    )
    assert rows[("addresses/texty", 1)].error == "message_id: 'x' is not an integer"
    assert "is not a timestamp with a time zone" in rows[("addresses/texty", 2)].error
    assert (
        rows[("addresses/texty", 3)].error
        == "address 'elsewhere' does not belong in table addresses/texty"
    )


def test_a_table_without_required_columns_stops_the_stream(spark, tmp_path):
    lake = Lake.at(tmp_path)
    append(
        lake.deliveries,
        [{"queue": "q", "at": at(0)}],
        pa.schema([("queue", pa.string()), ("at", schemas.TIMESTAMP)]),
    )
    with pytest.raises(Exception, match="missing required column"):
        run(spark, lake, str(tmp_path / "ck"))


def test_raising_as_of_alone_makes_a_batch(spark, tmp_path):
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0))
    ck = str(tmp_path / "ck")
    assert len(run(spark, lake, ck)) == 1
    assert run(spark, lake, ck) == []
    assert run(spark, lake, ck, asOf="2026-01-01T00:00:05Z") == [[]]
    assert run(spark, lake, ck, asOf="2026-01-01T00:00:05Z") == []


def test_a_batch_cut_before_the_as_of_applies_it_up_to_its_cut(tmp_path):
    """Rows held back by a cut may be earlier than ``--as-of``: a batch applies the as-of up
    to its cut, and the batch after the last cut the rest, with no row."""
    lake = Lake.at(tmp_path)
    for i in range(4):  # a commit a row, 0 to 300 ms
        send(lake, "a", (i, i * 100))
    as_of = epoch_micros(at(1000))
    reader = LakeEventsReader(lake.root, {"maxeventspertrigger": "1", "asof": str(as_of)})
    reader.prepareForTriggerAvailableNow()
    offsets = [reader.initialOffset()]
    while (following := reader.latestOffset(offsets[-1], ReadMaxRows(1))) != offsets[-1]:
        offsets.append(following)
    *cuts, last = [o["until"] for o in offsets[1:]]
    assert len(cuts) == 4 and max(cuts) < as_of and last == UNBOUNDED
    assert [o["asOf"] for o in offsets[1:]] == [*cuts, as_of]
    row = Row(*SLICE.names)
    batches = [
        [row(*s) for s in reader.slices(start, end)] for start, end in itertools.pairwise(offsets)
    ]
    assert [batch_as_of(slices, as_of) for slices in batches] == [*cuts, as_of]
    assert batches[-1] == []  # the as-of alone


def test_address_tables_created_later_are_picked_up(spark, tmp_path):
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0))
    ck = str(tmp_path / "ck")
    run(spark, lake, ck)
    send(lake, "brand-new", (2, 5))
    assert [[r.message_id for r in b] for b in run(spark, lake, ck)] == [[2]]


def test_unbounded_is_beyond_any_real_time():
    assert int(at(10**12).timestamp() * 1_000_000) < UNBOUNDED


def test_a_files_time_bound_covers_its_last_row(tmp_path):
    """Delta's statistics keep times in milliseconds: the bound a rate-limited cut relies on
    must still cover a row at a later microsecond of that millisecond."""
    lake = Lake.at(tmp_path)
    last = at(1582) + dt.timedelta(microseconds=609)
    deliver(lake, ("q", 1, "ACK", 0))
    append(
        lake.deliveries,
        [{"queue": "q", "message_id": 2, "outcome": "ACK", "at": last}],
        schemas.DELIVERY,
    )
    files = TableFiles(lake.deliveries, "at").added(-1, 1)
    assert [f.version for f in files] == [0, 1]
    micros = int(last.timestamp()) * 1_000_000 + last.microsecond
    assert files[1].max_time >= micros


def copy_back(spark, lake: Lake, address: str, app_id: str, message_id: int, ms: int) -> None:
    """One commit of ``app_id`` to an address table, as the routing job appends its copies
    (delta-spark, ``txnAppId`` / ``txnVersion``)."""
    row = {"message_id": message_id, "address": address, "sent_at": at(ms), "copy_reason": "DIVERT"}
    frame = spark.createDataFrame(pa.Table.from_pylist([row], schema=schemas.MESSAGE))
    job_append(frame, lake.address_table(address), app_id=app_id, txn_version=0)


def offered(reader: LakeEventsReader, start: dict, end: dict) -> list[tuple[str, int]]:
    """(source, version) of each file the batch from ``start`` to ``end`` reads."""
    (partition,) = reader.partitions(start, end)
    return [(s[0], s[3]) for s in reader.read(partition)]


def test_the_routing_jobs_own_commits_are_not_offered(spark, tmp_path):
    """The job's copies come back as new versions of the address tables it wrote: they make
    no batch, and a later batch reads the producers' files beside them only."""
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0))  # version 0
    reader = LakeEventsReader(lake.root, {})
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert first["tables"] == {"addresses/a": 0}

    copy_back(spark, lake, "a", f"{ROUTING_APP_PREFIX}query", 1 << 62, 0)  # version 1
    assert commit_app_ids(lake.address_table("a"), 1) == {f"{ROUTING_APP_PREFIX}query"}
    assert reader.latestOffset(first, ReadAllAvailable()) == first
    restarted = LakeEventsReader(lake.root, {})  # learns the table from version 0 again
    assert restarted.latestOffset(first, ReadAllAvailable()) == first

    send(lake, "a", (2, 5))  # version 2: a producer's
    second = reader.latestOffset(first, ReadAllAvailable())
    assert second["tables"] == {"addresses/a": 2}
    assert offered(reader, first, second) == [("addresses/a", 2)]
    assert offered(restarted, first, second) == [("addresses/a", 2)]

    # another writer with an app id (the replay loader) appends input rows: offered
    copy_back(spark, lake, "a", "jobs.replay:log", 3, 10)  # version 3
    third = reader.latestOffset(second, ReadAllAvailable())
    assert offered(reader, second, third) == [("addresses/a", 3)]


def test_a_commit_whose_file_is_gone_counts_as_a_producers(tmp_path):
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0))
    assert commit_app_ids(lake.address_table("a"), 0) == frozenset()  # no app transaction
    assert commit_app_ids(lake.address_table("a"), 7) == frozenset()  # no such commit file


def test_a_stream_reads_a_cleaned_up_log_and_restarts_from_the_checkpoint_before_it(
    spark, tmp_path
):
    """A table whose log was cleaned up past its first commits is read whole; restarted
    after more commits, the stream reads only those, whether its view of the table starts
    at the checkpoint before its last batch's version or reads every commit there is."""
    lake = Lake.at(tmp_path / "lake")
    send(lake, "a", (0, 0))
    send(lake, "a", (1, 10), (2, 20))
    clean_up_log(lake.address_table("a"))
    checkpoint = tmp_path / "ck"
    first = run(spark, lake, str(checkpoint), catchUpCommits=0)
    assert sorted(r.message_id for b in first for r in b) == [0, 1, 2]

    for n in range(3, 6):
        send(lake, "a", (n, 10 * n))
    DeltaTable(lake.address_table("a")).create_checkpoint()
    send(lake, "a", (6, 60))
    for catch_up in (0, 1 << 62):
        restarted = tmp_path / f"ck{catch_up}"
        shutil.copytree(checkpoint, restarted)
        later = run(spark, lake, str(restarted), catchUpCommits=catch_up)
        assert sorted(r.message_id for b in later for r in b) == [3, 4, 5, 6]


def test_a_rewrite_of_a_tables_layout_is_not_offered(spark, tmp_path):
    """A producer that rewrites its table's files without changing its rows, as Delta's
    docs show (an overwrite with ``dataChange`` false), adds no rows to read: as Delta's
    streaming source, the stream offers none of those files."""
    lake = Lake.at(tmp_path)
    send(lake, "a", (1, 0))
    send(lake, "a", (2, 10))
    reader = LakeEventsReader(lake.root, {})
    first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    table = lake.address_table("a")
    (
        spark.read.format("delta")
        .load(table)
        .repartition(1)
        .write.format("delta")
        .mode("overwrite")
        .option("dataChange", "false")
        .save(table)
    )
    assert reader.latestOffset(first, ReadAllAvailable()) == first
    send(lake, "a", (3, 20))
    second = reader.latestOffset(first, ReadAllAvailable())
    assert offered(reader, first, second) == [("addresses/a", 3)]


@pytest.mark.parametrize("limit", [None, 1])
def test_a_long_running_streams_state_does_not_grow_with_the_tables_history(tmp_path, limit):
    """A stream that has planned batch after batch of a table holds what it has still to
    read, not every file the table ever had: its reader's state after 200 commits is the
    size it was after 20, each batch offering the commit since the last (rate-limited too,
    a batch a row)."""
    lake = Lake.at(tmp_path)
    options = {} if limit is None else {MAX_EVENTS_PER_TRIGGER.lower(): str(limit)}
    reader = LakeEventsReader(lake.root, options)
    start = reader.initialOffset()
    sizes = {}
    for n in range(200):
        send(lake, "a", (n, 10 * n))
        end = reader.latestOffset(start, ReadMaxRows(limit) if limit else ReadAllAvailable())
        assert offered(reader, start, end) == [("addresses/a", n)]
        start = end
        sizes[n + 1] = len(pickle.dumps(reader))
    assert sizes[200] <= 1.2 * sizes[20], sizes
