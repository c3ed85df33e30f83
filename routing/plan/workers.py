"""The Python worker the plans' Arrow passes run in, asked for before a batch needs it.

A JVM starts its first Python worker when a query first calls Python: PySpark's daemon,
a fork of it, and the worker's imports of the passes' modules (numpy, pyarrow, this
package), about a second on one core while the batch's driver waits for it. A query of
one row through :func:`_same`, a function of this module, has a worker started and these
modules imported; Spark keeps the worker for the next Python pass
(``spark.python.worker.reuse``). :func:`routing.io.session.start_python_worker` runs it
beside a job's first batch.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

# the modules of the Arrow passes, imported by the worker that unpickles :func:`_same`
from routing.plan import breadcrumbs, sequences, turns

PASSES = (breadcrumbs, sequences, turns)
"""The modules whose Arrow passes run in the worker (a worker imports them with :func:`_same`)."""


def _same(ids: pa.Array) -> pa.Array:
    return ids


def worker_ready(spark: SparkSession) -> DataFrame:
    """One row through an Arrow UDF of this module: collected, a Python worker is running
    with the passes' modules imported."""
    same = F.arrow_udf(_same, "long")  # type: ignore[call-overload]
    return spark.range(0, 1, 1, 1).select(same("id").alias("id"))
