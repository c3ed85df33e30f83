"""The JVM behind a session, as py4j shows it: which classes it has."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from py4j.java_collections import MapConverter
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


def java_map(spark: SparkSession, entries: Mapping[str, str]) -> Any:
    """``entries`` as one ``java.util.Map`` to hand to many calls: py4j converts a dict
    passed to a call entry by entry, a round trip each, every time."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None  # a session with a JVM (jvm_class found the caller's class)
    return MapConverter().convert(dict(entries), gateway._gateway_client)
