from pyspark.sql import functions as F


def test_session_runs_in_utc(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    row = spark.range(1).select(F.to_timestamp(F.lit("2026-01-01 00:00:00")).alias("t")).first()
    assert row.t.isoformat().startswith("2026-01-01T00:00:00")


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
