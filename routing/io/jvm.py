"""The JVM behind a session, as py4j shows it: which classes it has."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession


def jvm_class(spark: SparkSession, name: str) -> Any | None:
    """The JVM class ``name`` (py4j's view of it, to call its static methods), or None when
    it is not on the classpath or the session has no JVM gateway (Spark Connect).

    Spark's class loader is asked, not the system one: ``spark.jars`` and ``--jars`` are
    loaded by Spark's own loader.
    """
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:
            return None
        jvm.org.apache.spark.util.Utils.classForName(name, True, False)
    except Exception:
        return None
    view = jvm
    for part in name.split("."):
        view = getattr(view, part)
    return view
