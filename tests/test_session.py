from pyspark.sql import functions as F


def test_session_runs_in_utc(spark):
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    row = spark.range(1).select(F.to_timestamp(F.lit("2026-01-01 00:00:00")).alias("t")).first()
    assert row.t.isoformat().startswith("2026-01-01T00:00:00")
