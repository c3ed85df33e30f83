"""The one place that builds a SparkSession: embedded default or a cluster.

Library code never calls ``getOrCreate()``; jobs, tests and notebooks call
:func:`build_session` once and pass the session down.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from py4j.java_gateway import JavaClass, JavaMember, JVMView
from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from routing.io.jvm import jvm_class
from routing.plan._columns import shuffle_partitions
from routing.plan.workers import worker_ready

log = logging.getLogger(__name__)

_LOG4J = Path(__file__).with_name("log4j2.properties")
DELTA_JARS = Path(os.environ.get("ROUTING_DELTA_JARS", Path(__file__).parents[2] / "jars" / "lib"))
"""Delta's JVM connector and its own dependencies, fetched by ``make setup`` (jars/pom.xml)."""
LOCAL_FS_JAR = Path(__file__).parents[2] / "jars" / "build" / "routing-localfs.jar"
"""The forkless local file system (jars/src/routing/localfs), built by ``make setup``."""
JOB_JAR = Path(__file__).parents[2] / "jars" / "build" / "routing-job.jar"
"""The job's own classes, built by ``make setup``: Delta's append without its check of the
table's transactions (jars/src/routing/delta, :func:`routing.io.storage.append`), the input
stream's source (jars/src/routing/stream, :func:`routing.io.lake_events.stream`), the check of
property types and Python's repr() of a value (jars/src/routing/properties,
:func:`routing.io.lake_events.row_checks`)."""

CLASS_ARCHIVE = Path(__file__).parents[2] / "jars" / "build" / "spark-classes.jsa"
"""The classes a job loads, parsed and verified once (Java's class-data sharing), recorded
by ``make setup`` (``python -m jobs.class_archive``): a JVM that maps it starts with
Spark's, Hadoop's and Delta's classes ready: about 30% less CPU to start a session."""

_QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"
"""An archive that no longer matches (a jar replaced since) is skipped without a word."""

LOCAL_FS_CONF: dict[str, str] = {
    # Without Hadoop's native library (pip's pyspark has none) the local file system forks
    # `chmod` for every file it creates and `readlink` before every rename: about a
    # hundred processes per micro-batch from a JVM of several GiB (docs/DESIGN.md).
    "spark.hadoop.fs.file.impl": "routing.localfs.ForklessLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "routing.localfs.ForklessLocalFs",
}

DELTA_CONF: dict[str, str] = {
    # What configure_spark_with_delta_pip sets up, with the jars fetched at setup.
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Small machine, as Delta's own tests run: a snapshot's state in few partitions.
    "spark.databricks.delta.snapshotPartitions": "2",
    # A commit to a table of few files lists them all in its checksum (.crc), read back by no
    # reader (only by the next commit, to list them again). A table's first commit, or one
    # after a writer that kept no checksum (delta-rs), plans a query of the table's state
    # for it: 4,000 new address tables, 4,000 queries (docs/PERFORMANCE.md).
    "spark.databricks.delta.allFilesInCrc.enabled": "false",
}

KRYO = "org.apache.spark.serializer.KryoSerializer"
"""Spark's faster serializer for stored blocks (pass it to ``spark-submit`` on a cluster)."""

EMBEDDED_CONF: dict[str, str] = {
    # A small machine: few shuffle partitions, adaptive execution coalesces further.
    "spark.sql.shuffle.partitions": os.environ.get("ROUTING_SHUFFLE_PARTITIONS", "4"),
    "spark.default.parallelism": "4",
    # A batch reads its input files by name (lake_events.read_events); Spark checks them in a
    # job of one task per file past 32 files: 4,000 address tables' files took 21.6 s, in
    # four tasks 1.0 s (docs/PERFORMANCE.md).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    # The whole job (JVM, Python workers) within 3 GiB at 1M messages; Spark spills the rest.
    "spark.driver.memory": os.environ.get("ROUTING_DRIVER_MEMORY", "1536m"),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    # small micro-batches collapse to one shuffle partition, large ones keep their parallelism
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    # ... but a 1M-row batch (tens of MB of shuffle) still spreads over both cores
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "8m",
    # a join whose smaller side is at most this much per partition hashes it instead of
    # sorting both sides (the wide message rows meet their narrow round-robin choices)
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": "32m",
    # Checkpointed rows are stored serialized and every reader deserializes them: Java's
    # serialization took a fifth of a 1M batch's task samples. Kryo, without reference
    # tracking (a row holds no shared references, and tracking reset Kryo's tables for
    # every row read back): the batch about 5% faster (docs/PERFORMANCE.md).
    "spark.serializer": KRYO,
    "spark.kryo.referenceTracking": "false",
    # The Python workers (the Arrow passes, the breadcrumb UDF) reached over Unix domain
    # sockets, not loopback TCP, where a query that calls Python waits about 35 ms more
    # (Nagle's algorithm against delayed acknowledgements): a warm small batch about 0.9x
    # (docs/PERFORMANCE.md, "Where a small batch's time goes").
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.local.dir": os.environ.get("ROUTING_SPARK_LOCAL_DIR", "/tmp/routing-spark"),
    # no Hive metastore or warehouse folder in the working directory
    "spark.sql.catalogImplementation": "in-memory",
    # No Parquet dictionaries: most columns (ids, times, bodies) outgrow a page's
    # dictionary and fall back to plain values after building it (docs/PERFORMANCE.md).
    "spark.hadoop.parquet.enable.dictionary": "false",
    # A thread's temporary direct buffer no larger than 256 KiB: Spark's pools keep hundreds
    # of threads, each holding a buffer as large as its largest read or write. The parallel
    # collector, not G1: on two cores G1's concurrent threads and write barriers cost the
    # batches more than the parallel collector's pauses, a continuous job's as well as a
    # run to the end's (docs/PERFORMANCE.md, "A job collects with the parallel collector").
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG4J} "
    "-XX:-DontCompileHugeMethods -Djdk.nio.maxCachedBufferSize=262144 -XX:+UseParallelGC",
}

EMBEDDED_ENV: dict[str, str] = {
    # Two malloc arenas, not eight a core: the C library keeps what a freed arena held,
    # and with a JVM's hundreds of threads a long replay's memory grew batch by batch.
    "MALLOC_ARENA_MAX": "2",
}
"""The environment the embedded JVM (and the Python workers it starts) inherit, unless set."""

COMMON_CONF: dict[str, str] = {
    # Every timestamp in the lake is UTC (SPEC §3); never let the JVM's zone leak in.
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches between the JVM and the Python workers: large enough that a batch's
    # fixed cost vanishes, small enough that two workers hold about 0.1 GiB less than at 64k.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.python.worker.reuse": "true",
    # Building Columns makes many py4j calls; debugging call-site capture makes each slower.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.legacy.allowNonEmptyLocationInCTAS": "false",
    # Parquet timestamps as INT64 microseconds, not the legacy INT96 (12-byte values
    # hashed into a dictionary page after page; docs/PERFORMANCE.md).
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # A micro-batch generates a few hundred classes; with the default 100-entry cache
    # every batch compiled them all again (about 4 s of a 14 s batch, docs/PERFORMANCE.md).
    "spark.sql.codegen.cache.maxEntries": "4096",
}


SMALL_BATCH_CONF: dict[str, str] = {
    # expressions evaluated, not compiled
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # one partition: every checkpoint is a single partition, so the joins, aggregates and
    # windows over checkpoints need no shuffle, and each table gets one file a batch
    "spark.sql.shuffle.partitions": "1",
    # each query planned once, as one job (its broadcasts aside), not stage by stage
    "spark.sql.adaptive.enabled": "false",
    # no broadcast unless a plan asks for one: a broadcast is a job of its own
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}
"""What a small micro-batch runs under (:data:`SMALL_BATCH_ROWS`; docs/PERFORMANCE.md, "Where a
small batch's time goes").

- Expressions evaluated, not compiled. Even with every class in the codegen cache, each
  task generates the Java source of its projections again to look the class up (wide
  rows: string building and comment-stripping regexes), which was two thirds of the
  executors' samples in a warm 120-row batch. The ten-message lake 0.90x.
- One shuffle partition. A frame kept by :class:`routing.plan.scratch.Scratch` is
  coalesced to it, and a single partition satisfies any clustering a later join,
  aggregate or window asks for: the plans over checkpoints shuffle nothing, and what
  still shuffles (the input files, explicit repartitions) runs one task, not four.
- No adaptive execution. It runs each shuffle and broadcast stage of a query as a job of
  its own and plans the rest again after each; with one partition there is nothing left
  for it to coalesce or re-plan. A warm 120-row batch 0.9x (docs/PERFORMANCE.md).
- No broadcast by size, only by a plan's hint. A broadcast is a job of its own before the
  query's: the one-row frames of a batch's values were two such jobs a batch, and now
  join in the query's own job (docs/PERFORMANCE.md).
"""

SMALL_BATCH_ROWS = 10_000
"""Input rows of a micro-batch up to which it runs under :data:`SMALL_BATCH_CONF`."""


def small_batch(rows: int | None) -> bool:
    """A batch of ``rows`` input rows (None: unknown) is small enough for
    :data:`SMALL_BATCH_CONF`."""
    return rows is not None and rows <= SMALL_BATCH_ROWS


FILE_PARTITIONS = "spark.sql.files.maxPartitionNum"
"""Spark's bound on the partitions a read of files is split into (:func:`batch_conf`)."""

READER_BATCH_ROWS = "spark.sql.parquet.columnarReaderBatchSize"
"""The rows of a batch of Spark's Parquet reader: its column vectors are allocated for them,
for every file it opens (:func:`reader_batch_rows`)."""

READER_BATCH_BOUNDS = (256, 4096)
"""The least and the most rows :func:`reader_batch_rows` gives the reader's batch: Spark's
default is the most; the least keeps the reader's work per batch small beside its rows."""


def reader_batch_rows(rows: int, files: int) -> int:
    """The rows of the Parquet reader's batch for a read of ``rows`` in ``files`` files: the
    power of two that holds a file's rows on average, within :data:`READER_BATCH_BOUNDS`.

    The reader allocates its column vectors (a message's maps and body among them) for a
    batch's rows in every file it opens: at Spark's 4,096 for the 4,000 address tables' files
    of about 275 rows each, their read took 14.6-15.4 s, at 256 or 512 12.0-12.9 s
    (docs/PERFORMANCE.md)."""
    least, most = READER_BATCH_BOUNDS
    mean = -(-rows // max(files, 1))
    return min(most, max(least, 1 << max(mean - 1, 0).bit_length()))


def batch_conf(spark: SparkSession, rows: int | None, files: int = 1) -> dict[str, str]:
    """What a micro-batch of ``rows`` input rows in ``files`` files runs under:
    :data:`SMALL_BATCH_CONF` when it is small; otherwise its files read in at most as many
    partitions as its shuffles have (:data:`FILE_PARTITIONS`), by a reader whose batches fit
    its files (:func:`reader_batch_rows`).

    A batch keeps what it reads in that many partitions anyway (``Scratch.keep``), but a read
    of many small files, packed by Spark's open cost of 4 MB a file, is split into a
    partition for every 32 of them, and the input's normalising step, which is not part of
    a generated stage, builds its projection again for each: 126 times for the 4,000
    address tables' files, about 3 s of a 15 s read (docs/PERFORMANCE.md). A small batch
    reads few files, and its latency did not gain from the bound.
    """
    if small_batch(rows):
        return dict(SMALL_BATCH_CONF)
    conf = {FILE_PARTITIONS: str(shuffle_partitions(spark))}
    batch = reader_batch_rows(rows, files) if rows is not None else READER_BATCH_BOUNDS[1]
    if batch < READER_BATCH_BOUNDS[1]:  # small files; larger ones keep Spark's (or yours)
        conf[READER_BATCH_ROWS] = str(batch)
    return conf


PY4J_CLASSES: dict[str, str] = {
    "functions": "org.apache.spark.sql.functions",
    "org.apache.spark.sql.functions": "org.apache.spark.sql.functions",
    "PythonUtils": "org.apache.spark.api.python.PythonUtils",
    "PythonSQLUtils": "org.apache.spark.sql.api.python.PythonSQLUtils",
}
"""The Java classes PySpark reaches through the gateway's JVM view for nearly every Column
and DataFrame operation, by the names it uses (:func:`bind_static_members`)."""


class StaticMembers:
    """A Java class's static methods (and nested classes) as py4j reaches them, each looked
    up in the JVM once rather than on every read.

    py4j resolves a name in the JVM each time Python reads it: ``jvm.functions.col(...)``
    is a round trip for ``functions``, one for ``col``, then the call. A short name is
    worse: the JVM first tries it as a class of the default package, then under each
    package PySpark imported, and each miss searches every jar and throws. A warm
    ten-message batch read these names about 7,000 times (docs/PERFORMANCE.md).
    """

    def __init__(self, java_class: JavaClass) -> None:
        self._java_class = java_class

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._java_class, name)
        if isinstance(member, JavaMember | JavaClass):  # not a field: its value may change
            setattr(self, name, member)
        return member


def bind_static_members(jvm: JVMView) -> None:
    """Bind :data:`PY4J_CLASSES` on ``jvm`` (a session's ``sparkContext._jvm``) to their
    :class:`StaticMembers`: an attribute of the view is read in Python, without asking the
    JVM. Each class is looked up once, by its full name."""
    for name, fqn in PY4J_CLASSES.items():
        if not isinstance(jvm.__dict__.get(name), StaticMembers):
            setattr(jvm, name, StaticMembers(getattr(jvm, fqn)))


class MissingDeltaError(RuntimeError):
    """Delta's JVM connector is not there: the jars were never fetched, or a cluster lacks them."""


def delta_jars() -> str:
    """The fetched connector jars, comma-separated for ``spark.jars``."""
    jars = sorted(DELTA_JARS.glob("*.jar")) if DELTA_JARS.is_dir() else []
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise MissingDeltaError(
            f"Delta's JVM connector is not in {DELTA_JARS}: run `make setup` "
            "(it fetches io.delta:delta-spark_4.2_2.13 with Maven), or set ROUTING_DELTA_JARS"
        )
    return ",".join(str(j) for j in jars)


def job_jars() -> str:
    """Delta's connector jars and the job's own (:data:`JOB_JAR`, when built),
    comma-separated for ``spark.jars`` or ``--jars``."""
    own = [str(JOB_JAR)] if JOB_JAR.is_file() else []
    return ",".join([delta_jars(), *own])


def class_archive_options(record_to: Path | None = None) -> str:
    """JVM options that map :data:`CLASS_ARCHIVE` when it is there, or, with ``record_to``,
    record the classes the JVM loaded into a new archive when it exits."""
    if record_to is not None:
        return f"-XX:ArchiveClassesAtExit={record_to} {_QUIET_CDS}"
    if CLASS_ARCHIVE.is_file():
        return f"-XX:SharedArchiveFile={CLASS_ARCHIVE} {_QUIET_CDS}"
    return ""


SHORT_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The JIT of a short-lived JVM: C1 only. Java keeps no compiled code between runs, and
C2's thread spends a core for most of a short run compiling Spark's hot methods for a
batch that is over before the code pays back: the ten-message lake 0.88x the wall. A
long-running job keeps C2: C1's code is slower for good (docs/PERFORMANCE.md, "Where the
ten-message lake's time goes")."""


def embedded_java_options(record_classes_to: Path | None = None, *, short_run: bool = False) -> str:
    """The embedded JVM's options (``spark.driver.extraJavaOptions``): :data:`EMBEDDED_CONF`'s,
    the class archive's (:func:`class_archive_options`), and a short run's
    (:data:`SHORT_RUN_JAVA_OPTIONS`)."""
    options = [
        EMBEDDED_CONF["spark.driver.extraJavaOptions"],
        class_archive_options(record_classes_to),
        SHORT_RUN_JAVA_OPTIONS if short_run else "",
    ]
    return " ".join(filter(None, options))


def under_spark_submit() -> bool:
    """True when the Python driver was launched by ``spark-submit`` (the JVM came first)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    app_name: str = "artemis-lake-routing",
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    record_classes_to: Path | None = None,
    short_run: bool = False,
    log_file: Path | None = None,
) -> SparkSession:
    """Build (or return) the session with Delta's JVM connector and the job's own classes.

    Embedded default: ``local[*]`` (or ``ROUTING_SPARK_MASTER``), sized for a
    2-core machine, Python workers on this interpreter, quiet logs, Delta's jars from
    ``make setup``. Under ``spark-submit`` the master, resources and Delta's jars
    (``--packages`` or ``--jars``) come from the command line and only the settings the
    job relies on (UTC, Arrow, Delta's extension and catalog) are added.

    :param app_name: the Spark application name.
    :param master: overrides the master for the embedded default.
    :param conf: extra Spark settings, applied last.
    :param record_classes_to: embedded only: record a class archive there when the JVM
        exits (``jobs.class_archive``) instead of mapping :data:`CLASS_ARCHIVE`.
    :param short_run: embedded only: the JVM lives for one small batch or so, and
        compiles with :data:`SHORT_RUN_JAVA_OPTIONS`.
    :param log_file: embedded only: where the JVM and the Python workers it starts write
        their output (Spark's log, the JVM's warnings, a worker's traceback), appended;
        None: this process's own stdout and stderr.
    :return: the active session.

    Example::

        spark = build_session("routing-tests", conf={"spark.sql.shuffle.partitions": "2"})
    """
    builder = SparkSession.builder.appName(app_name)
    settings = {**COMMON_CONF, **DELTA_CONF}
    if not under_spark_submit():
        builder = builder.master(master or os.environ.get("ROUTING_SPARK_MASTER", "local[*]"))
        settings.update(EMBEDDED_CONF)
        settings["spark.driver.extraJavaOptions"] = embedded_java_options(
            record_classes_to, short_run=short_run
        )
        settings["spark.jars"] = job_jars()
        if LOCAL_FS_JAR.is_file():
            # on the JVM's own class path: Hadoop looks file systems up by class name
            settings["spark.driver.extraClassPath"] = str(LOCAL_FS_JAR)
            settings.update(LOCAL_FS_CONF)
        settings["spark.pyspark.python"] = sys.executable
        settings["spark.pyspark.driver.python"] = sys.executable
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        for name, value in EMBEDDED_ENV.items():
            os.environ.setdefault(name, value)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    with _output_to(log_file if not under_spark_submit() else None):
        spark = builder.getOrCreate()
    if spark.sparkContext._jvm is not None:
        bind_static_members(spark.sparkContext._jvm)
        if not under_spark_submit():
            _ignore_terminate(spark.sparkContext._jvm)
    spark.sparkContext.setLogLevel(os.environ.get("ROUTING_LOG_LEVEL", "WARN"))
    if not has_jvm_delta(spark):
        raise MissingDeltaError(
            "Delta's JVM connector is not on the classpath: pass --packages "
            "io.delta:delta-spark_4.2_2.13:4.4.0 (or --jars) to spark-submit"
        )
    return spark


def _ignore_terminate(jvm: JVMView) -> None:
    """The embedded JVM ignores SIGTERM, as PySpark has it ignore SIGINT: a stop sent to
    the job's whole process group or control group (systemd stopping a service, ``kill
    -TERM -PGID``) reaches the Python driver alone, which ends the running batch and stops
    the JVM itself. Not ignoring it, the JVM shut down under the batch, and the driver
    failed talking to it. The JVM still exits when its driver does (its stdin closes)."""
    signals = jvm.sun.misc
    signals.Signal.handle(signals.Signal("TERM"), signals.SignalHandler.SIG_IGN)


def start_python_worker(spark: SparkSession) -> threading.Thread:
    """Have ``spark``'s first Python worker started now, on a thread of its own
    (:mod:`routing.plan.workers`): a job's first batch then finds it ready rather than
    waiting about a second for it, while its driver plans on the other core. The worker's
    query ends with the session if the job ends first; it never fails the job."""

    def start() -> None:
        try:
            worker_ready(spark).collect()
        except Exception as error:  # a session stopped under it, or no worker to start
            log.debug("the Python worker was not started ahead", exc_info=error)

    thread = threading.Thread(target=start, name="python-worker-ahead", daemon=True)
    thread.start()
    return thread


def stop_session(spark: SparkSession) -> None:
    """Stop ``spark``; a JVM gone already (killed, out of memory) is logged, not raised:
    the job has said why it ends."""
    try:
        spark.stop()
    except (Py4JError, OSError) as error:
        log.debug("the session's JVM is gone", exc_info=error)


@contextmanager
def _output_to(log_file: Path | None) -> Iterator[None]:
    """Within the block, this process's stdout and stderr are ``log_file``: a JVM started
    there (PySpark's ``Popen`` inherits them) writes there for its whole life, and so do
    the Python workers it starts."""
    if log_file is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log_file, "ab") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def has_jvm_delta(spark: SparkSession) -> bool:
    """True when the JVM Delta connector (``io.delta:delta-spark``) is on the classpath."""
    return jvm_class(spark, "io.delta.tables.DeltaTable") is not None
