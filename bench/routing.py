"""Routing throughput: 1M message rows over 10 addresses with diverts, through ``Router.route``.

The routing step alone (SPEC §5.2), as a micro-batch runs it: expiry settings,
exclusive and non-exclusive diverts (with filters), anycast turns (round-robin),
multicast queues with filters, divert copies with their breadcrumbs, and the copies
routed in turn at their addresses. No Delta I/O: the input rows are generated and
checkpointed in memory before the clock starts, and the outputs (queue entries,
journal, copies) are forced into the ``noop`` sink in one job, tagged by kind as the
job's write tags them by table, and counted on the way (an ``Observation``); then the
round-robin positions are collected.

Topology: addresses ``orders.0`` .. ``orders.9``, each with two anycast queues (they
take turns) and a multicast queue filtered on ``region``; every address has a
non-exclusive divert of EU rows to ``audit``; even addresses also an exclusive divert
of refunds to ``refunds``. Target: >= 200k input rows routed per second. One warm-up
run on a tenth of the rows, then the best of two; a plain scan of the same input into
the sink is the floor the routing time is compared with, and so is making outputs of
the same kinds and about the same sizes with no routing decision at all (each row to
one or two queues by a hash, 40% copied by the same copy function): what is left of the
routing time is the turns and the decisions.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from bench import Figure
from routing.broker import layout
from routing.broker.config import ANYCAST, MULTICAST, parse_config
from routing.broker.ids import DIVERT
from routing.broker.topology import Topology
from routing.plan import journal, schemas
from routing.plan._columns import tagged_union, union_all
from routing.plan.copies import make_copies
from routing.plan.router import Router, entering
from routing.plan.scratch import Scratch
from routing.plan.turns import positions_frame

FULL_ROWS = 1_000_000
ADDRESSES = 10
TARGET = 200_000  # rows/s
REPEATS = 2
BASE_MICROS = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
KIND = "_kind"
KINDS = ("entries", "journal", "copies")


def broker_xml(addresses: int = ADDRESSES) -> str:
    diverts, declared = [], []
    for i in range(addresses):
        name = f"orders.{i}"
        diverts.append(
            f'<divert name="tap.{i}"><address>{name}</address>'
            "<forwarding-address>audit</forwarding-address>"
            "<filter string=\"region = 'eu'\"/></divert>"
        )
        if i % 2 == 0:
            diverts.append(
                f'<divert name="refund.{i}"><address>{name}</address>'
                "<forwarding-address>refunds</forwarding-address>"
                "<filter string=\"kind = 'refund'\"/><exclusive>true</exclusive></divert>"
            )
        declared.append(
            f'<address name="{name}"><anycast><queue name="{name}.a"/><queue name="{name}.b"/>'
            f'</anycast><multicast><queue name="{name}.eu"><filter string="region = \'eu\'"/>'
            "</queue></multicast></address>"
        )
    declared.append(
        '<address name="audit"><multicast><queue name="audit.q"/></multicast></address>'
    )
    declared.append(
        '<address name="refunds"><anycast><queue name="refunds.q"/></anycast></address>'
    )
    return (
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        f"<diverts>{''.join(diverts)}</diverts><addresses>{''.join(declared)}</addresses>"
        "</core></configuration>"
    )


def _pick(values: list[str], h) -> F.Column:
    return F.element_at(F.array(*map(F.lit, values)), (h % len(values) + 1).cast("int"))


def message_rows(spark: SparkSession, rows: int) -> DataFrame:
    """Producer rows entering their addresses (message columns + the router's internals)."""
    h = F.abs(F.xxhash64("id"))  # bench data only; copy ids never use Spark hashes
    address = F.concat(F.lit("orders."), (F.col("id") % ADDRESSES).cast("string"))
    sent_at = F.timestamp_micros(F.lit(BASE_MICROS) + F.col("id") * 1000)
    return spark.range(rows).select(
        F.col("id").alias("message_id"),
        address.alias("address"),
        F.when(h % 10 == 0, F.lit(MULTICAST))
        .when(h % 10 == 1, F.lit(ANYCAST))
        .cast("string")
        .alias("routing_type"),
        sent_at.alias("sent_at"),
        F.when(h % 20 == 0, sent_at + F.expr("INTERVAL 1 HOUR")).alias("expiration"),
        (h % 10).cast("int").alias("priority"),
        F.lit(True).alias("durable"),
        F.lit(None).cast("string").alias("user_id"),
        F.create_map(
            F.lit("kind"),
            _pick(["order", "invoice", "refund", "audit"], h),
            F.lit("region"),
            _pick(["eu", "us", "apac"], F.floor(h / 4)),
            F.lit("customer"),
            F.concat(F.lit("c"), (h % 9973).cast("string")),
        ).alias("properties"),
        F.encode(F.concat(F.lit("payload-"), F.col("id").cast("string")), "UTF-8").alias("body"),
        F.lit(None).cast("string").alias("copy_reason"),
        F.lit(None).cast("string").alias("to_queue"),
        *entering(F.concat(F.lit(f"{layout.ADDRESSES}/"), address)),
    )


def _sink(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def _force(entries: DataFrame, journal_rows: DataFrame, copies: DataFrame) -> dict[str, int]:
    """Force the outputs in one job, tagged by kind as the job's write tags them by table;
    returns how many rows of each kind."""
    outputs = tagged_union(
        [
            frame.withColumn(KIND, F.lit(kind))
            for kind, frame in zip(KINDS, (entries, journal_rows, copies), strict=True)
        ]
    )
    sizes = Observation("sizes")
    _sink(outputs.observe(sizes, *[F.count_if(F.col(KIND) == k).alias(k) for k in KINDS]))
    return sizes.get


def route_once(router: Router, rows: DataFrame) -> dict[str, int]:
    """Route ``rows`` and force every output; returns the output sizes."""
    spark = rows.sparkSession
    scratch = Scratch()
    try:
        routed = router.route(rows, positions_frame(spark, {}), scratch)
        sizes = _force(*map(union_all, (routed.entries, routed.journal, routed.copies)))
        routed.positions.collect()
        return sizes
    finally:
        scratch.release()


def outputs_alone(rows: DataFrame) -> dict[str, int]:
    """Entries, journal and copies like routing's, made without deciding anything."""
    h = F.abs(F.xxhash64("message_id"))
    queues = F.when(h % 2 == 0, F.array(F.lit("q.a"), F.lit("q.b"))).otherwise(
        F.array(F.lit("q.a"))
    )
    entries = rows.select(
        *schemas.MESSAGE.names,
        F.explode(queues).alias("queue"),
        F.col("sent_at").alias("routed_at"),
    )
    copies = rows.where(h % 5 < 2).transform(
        make_copies(
            F.lit(DIVERT), F.lit("tap"), F.lit("audit"), F.col("sent_at"), keep_expiration=True
        )
    )
    return _force(
        entries, entries.select(*journal.routed_columns()), copies.select(*schemas.MESSAGE.names)
    )


def _best(step: Callable[[], object], repeat: int = REPEATS) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        value = step()
        best = min(best, time.perf_counter() - started)
    return best, value


def run(spark: SparkSession, scale: float) -> list[Figure]:
    rows = max(1_000, int(FULL_ROWS * scale))
    router = Router(Topology(parse_config(broker_xml())))
    scratch = Scratch()
    try:
        warm = scratch.keep(message_rows(spark, max(1_000, rows // 10)))
        route_once(router, warm)  # Python workers up, code paths compiled
        data = scratch.keep(message_rows(spark, rows))
        data.count()
        t_scan, _ = _best(lambda: _sink(data))
        t_route, sizes = _best(lambda: route_once(router, data))
        t_alone, alone = _best(lambda: outputs_alone(data))
    finally:
        scratch.release()
    rate = rows / t_route
    return [
        Figure(
            f"rows routed per s ({rows:,} rows, {ADDRESSES} addresses)",
            rate,
            "rows/s",
            target=f">= {TARGET:,} rows/s",
            ok=rate >= TARGET,
        ),
        Figure("  routing per row", t_route / rows * 1e6, "µs"),
        Figure("  queue entries made", sizes["entries"], "rows"),
        Figure("  divert copies made", sizes["copies"], "rows"),
        Figure("  journal rows", sizes["journal"], "rows"),
        Figure("rows scanned per s, no routing (floor)", rows / t_scan, "rows/s"),
        Figure("routing time / scan time", t_route / t_scan, "x"),
        Figure(
            f"outputs alone, no decisions ({sum(alone.values()):,} rows) per s",
            rows / t_alone,
            "rows/s",
        ),
        Figure("routing time / outputs-alone time", t_route / t_alone, "x"),
    ]
