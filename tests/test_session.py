import re
import subprocess

from pyspark.sql import functions as F


def test_session_runs_in_utc(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    row = spark.range(1).select(F.to_timestamp(F.lit("2026-01-01 00:00:00")).alias("t")).first()
    assert row.t.isoformat().startswith("2026-01-01T00:00:00")


def estimate(frame) -> int:
    """Spark's estimate of ``frame``'s size in bytes (py4j gives the BigInt as an int)."""
    return frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()


def test_a_checkpoint_estimated_beyond_the_bound_is_estimated_as_unknown(spark):
    """A join is estimated at the product of its sides: checkpoints of joins of checkpoints
    would square their estimates pass after pass (routing.plan.scratch.bounded). Above the
    bound a kept frame is estimated as an RDD of unknown size; below it, as its plan."""
    from chispa import assert_df_equality

    from routing.plan.scratch import ESTIMATE_BOUND, Scratch

    scratch = Scratch()
    try:
        small = scratch.keep(spark.range(100).selectExpr("id", "string(id) AS text"))
        assert (
            0 < estimate(small) == estimate(spark.range(100).selectExpr("id", "string(id) AS text"))
        )
        wide = small
        for i in range(8):  # a join's estimate: the product of its sides'
            wide = wide.join(small.select("id", F.col("text").alias(f"t{i}")), "id")
        assert estimate(wide) > ESTIMATE_BOUND
        kept = scratch.keep(wide)
        assert estimate(kept) == 2**63 - 1  # spark.sql.defaultSizeInBytes
        assert_df_equality(kept.orderBy("id"), wide.orderBy("id"))
        squared = scratch.keep(kept.join(kept.select("id"), "id"))
        assert estimate(squared) == 2**63 - 1  # not (2^63 - 1)^2
    finally:
        scratch.release()


def test_checkpointed_rows_are_stored_with_kryo_and_read_back_whole(spark):
    from chispa import assert_df_equality

    from routing.io.session import KRYO
    from routing.plan.scratch import Scratch

    conf = spark.sparkContext.getConf()
    assert (conf.get("spark.serializer"), conf.get("spark.kryo.referenceTracking")) == (
        KRYO,
        "false",
    )
    rows = spark.createDataFrame(
        [(1, {"_AMQ_ORIG_ADDRESS": "orders", "_AMQ_ORIG_QUEUE_0": "q"}, [b"\x00\xff"], None)],
        "id long, properties map<string,string>, bodies array<binary>, note string",
    ).union(spark.range(2, 2000).selectExpr("id", "map('k', string(id))", "array()", "'x'"))
    scratch = Scratch()
    try:
        assert_df_equality(scratch.keep(rows).orderBy("id"), rows.orderBy("id"))
    finally:
        scratch.release()


def test_embedded_jvm_keeps_few_malloc_arenas_and_small_thread_buffers(spark):
    """What keeps a long replay's memory flat (docs/PERFORMANCE.md): glibc's arenas and Java's
    per-thread temporary buffers otherwise grow with Spark's hundreds of threads."""
    from routing.io.session import EMBEDDED_ENV

    system = spark.sparkContext._jvm.java.lang.System
    assert system.getenv("MALLOC_ARENA_MAX") == EMBEDDED_ENV["MALLOC_ARENA_MAX"] == "2"
    assert system.getProperty("jdk.nio.maxCachedBufferSize") == "262144"


def test_tables_are_written_with_int64_timestamps_and_no_dictionaries(spark, tmp_path):
    """Parquet as the job writes it (docs/PERFORMANCE.md): INT96 timestamps hashed into
    dictionaries, and dictionaries most columns outgrow, were much of a big batch's
    Parquet writing."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from routing.io.storage import append

    rows = spark.range(300).selectExpr(
        "id AS message_id",
        "timestamp_micros(1767225600000000 + id) AS sent_at",
        "CASE WHEN id % 2 = 0 THEN 'orders' ELSE 'payments' END AS address",
    )
    append(rows, str(tmp_path / "orders"))
    files = DeltaTable(str(tmp_path / "orders")).file_uris()
    chunks = [
        pq.ParquetFile(uri).metadata.row_group(0).column(i) for uri in files for i in range(3)
    ]
    assert files and {c.path_in_schema: c.physical_type for c in chunks}["sent_at"] == "INT64"
    assert not [c.path_in_schema for c in chunks if any("DICTIONARY" in e for e in c.encodings)]


def test_pyspark_builds_columns_without_looking_classes_up_in_the_jvm(spark):
    """The classes PySpark reaches by name are bound once (session.bind_static_members):
    building a Column sends the calls only, no reflection lookups (``r``)."""
    from chispa import assert_df_equality

    from tests.gateway import sent_commands

    def build():
        return F.struct(F.col("a"), (F.col("a") + F.lit(1)).alias("b")).alias("s")

    build()  # each function is looked up on its first use
    with sent_commands(spark) as sent:
        built = build()
    assert sent and "r" not in sent, sent
    rows = spark.range(2).toDF("a").select(built)
    expected = spark.createDataFrame([((0, 1),), ((1, 2),)], "s struct<a: bigint, b: bigint>")
    assert_df_equality(rows, expected, ignore_nullable=True)


def test_static_members_are_cached_but_fields_read_each_time(spark):
    from routing.io.session import PY4J_CLASSES, StaticMembers

    jvm = spark.sparkContext._jvm
    assert all(isinstance(jvm.__dict__[name], StaticMembers) for name in PY4J_CLASSES)
    math = StaticMembers(getattr(jvm, "java.lang.Math"))
    assert math.max(1, 2) == 2
    assert "max" in vars(math)  # a method: looked up once
    integer = StaticMembers(getattr(jvm, "java.lang.Integer"))
    assert integer.MAX_VALUE == 2**31 - 1
    assert "MAX_VALUE" not in vars(integer)  # a field's value: read from the JVM each time


def _collectors(java_options: str) -> set[str]:
    """The garbage collectors a JVM started with ``java_options`` turns on."""
    flags = subprocess.run(
        ["java", *java_options.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {gc for gc in ("UseG1GC", "UseParallelGC") if re.search(rf"\b{gc}\s+= true\b", flags)}


def test_every_embedded_job_collects_with_the_parallel_collector():
    """Runs to the end, short runs and continuous jobs alike: on two cores G1's concurrent
    work costs the batches more than the parallel collector's pauses (docs/PERFORMANCE.md, "A
    job collects with the parallel collector")."""
    from routing.io.session import embedded_java_options

    assert _collectors(embedded_java_options()) == {"UseParallelGC"}
    assert _collectors(embedded_java_options(short_run=True)) == {"UseParallelGC"}


def test_the_tests_session_runs_as_a_continuous_job_does(spark):
    names = {
        gc.getName()
        for gc in spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    }
    assert any(name.startswith("PS ") for name in names)  # "PS Scavenge", "PS MarkSweep"
