"""The routing rules of SPEC §5.2 pinned at the library level (issue 5).

Most rules are checked on ONE routing of small inline rows through
:class:`routing.plan.router.Router` (the ``routed`` fixture): one broker.xml with one
address per rule, one ``Router.route`` call, and a test per rule reading its own
address's part of the result. Routing is lazy and checkpoints each pass, so one call
keeps the suite fast; every case has its own addresses, so the cases cannot meet.

The cases the conformance scenarios lack have their own, smaller routings: the
anycast turn carried from one micro-batch to the next (two ``route`` calls with the
positions carried as the job carries them, in :class:`routing.broker.state.JobState`), a
chain of 25 diverts, and the SPEC §5.5 example (123 sent to ``A``, diverted to ``B``
into ``X``, dead-lettered to ``DLA``) through :func:`routing.plan.engine.run_batch`.

Expected ids are computed with :func:`routing.broker.ids.copy_id_py`, the reference of
SPEC §5.6, never with the Column version under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import reduce
from typing import Any

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.broker.config import parse_config
from routing.broker.ids import copy_id_py
from routing.broker.layout import address_source
from routing.broker.state import JobState
from routing.broker.topology import Topology
from routing.io.lake_events import EVENT
from routing.plan import schemas
from routing.plan._columns import local_frame
from routing.plan.engine import run_batch
from routing.plan.router import MAX_HOPS, Router
from routing.plan.scratch import Scratch
from routing.plan.turns import positions_frame
from tests.frames import assert_rows_equal
from tests.lakeio import at

# --------------------------------------------------------------------------------------
# Helpers shared with tests/test_delivery_rules.py
# --------------------------------------------------------------------------------------

ROUTER_INPUT = pa.schema(
    [
        *schemas.MESSAGE,
        ("_hops", pa.int32()),
        ("_dla_hint", pa.bool_()),
        ("_source", pa.string()),
        ("_session", pa.bool_()),
    ]
)
"""What :meth:`Router.route` takes: message columns + ``routing.plan.router.INTERNAL``."""

QUEUE_ROWS = schemas.spark_schema(schemas.QUEUE_MESSAGE)
JOURNAL_ROWS = schemas.spark_schema(schemas.JOURNAL)
MESSAGE_ROWS = schemas.spark_schema(schemas.MESSAGE)

DIVERT, DEAD_LETTER, EXPIRY, RETRY = "DIVERT", "DEAD_LETTER", "EXPIRY", "RETRY"


def broker(body: str) -> str:
    """A broker.xml around the children of ``<core>``."""
    return (
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        f"{body}</core></configuration>"
    )


def topology_of(body: str) -> Topology:
    return Topology(parse_config(broker(body)))


def message(
    message_id: int,
    address: str,
    t: int = 0,
    *,
    properties: Mapping[str, str] | None = None,
    routing_type: str | None = None,
    expiration: int | None = None,
    **columns: Any,
) -> dict[str, Any]:
    """A message row (SPEC §3.1); times in ms after the conformance epoch."""
    return {
        "message_id": message_id,
        "address": address,
        "routing_type": routing_type,
        "sent_at": at(t),
        "expiration": None if expiration is None else at(expiration),
        "properties": list((properties or {}).items()),
        **columns,
    }


def router_input(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    """Rows entering their addresses, as the engine hands them to the router."""
    full = [
        {
            "_hops": 0,
            "_dla_hint": False,
            "_source": address_source(r["address"]),
            "_session": True,  # producers' rows
            **r,
        }
        for r in rows
    ]
    return spark.createDataFrame(pa.Table.from_pylist(full, schema=ROUTER_INPUT))


def batch_events(
    spark: SparkSession,
    messages: Sequence[Mapping[str, Any]] = (),
    deliveries: Sequence[Mapping[str, Any]] = (),
    management: Sequence[Mapping[str, Any]] = (),
) -> DataFrame:
    """A micro-batch of ``lake_events`` rows, as the stream hands it to ``run_batch``."""
    out = []
    for source_of, rows in (
        (lambda r: address_source(r["address"]), messages),
        (lambda r: "deliveries", deliveries),
        (lambda r: "management", management),
    ):
        for number, row in enumerate(rows):
            out.append({"source": source_of(row), "version": 0, "file": "f", "row": number, **row})
    return spark.createDataFrame(pa.Table.from_pylist(out, schema=EVENT))


def delivery(queue: str, message_id: int, outcome: str, t: int) -> dict[str, Any]:
    return {"queue": queue, "message_id": message_id, "outcome": outcome, "at": at(t)}


def no_pending(spark: SparkSession) -> DataFrame:
    """``queue_messages`` before the first batch: no PENDING row."""
    schema = schemas.spark_schema(schemas.QUEUE_MESSAGE).add("_file", "string")
    return spark.createDataFrame([], schema)


def union(frames: Iterable[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), list(frames))


def assert_rows(actual: DataFrame, ddl: str, expected: Iterable[tuple]) -> None:
    """chispa, rows in any order. Nullability is not under test (derived columns differ)."""
    frame = actual.sparkSession.createDataFrame(list(expected), ddl)
    assert_df_equality(actual, frame, ignore_row_order=True, ignore_nullable=True)


def orig(address: str, queue: str | None, message_id: int, n: int | None = None) -> dict:
    """The breadcrumbs of one hop, unsuffixed or as history ``_n``."""
    suffix = "" if n is None else f"_{n}"
    out = {f"_AMQ_ORIG_ADDRESS{suffix}": address, f"_AMQ_ORIG_MESSAGE_ID{suffix}": str(message_id)}
    if queue is not None:
        out[f"_AMQ_ORIG_QUEUE{suffix}"] = queue
    return out


def divert_copy(parent: int, divert: str, target: str) -> int:
    return copy_id_py(parent, DIVERT, divert, target, None)


def positions_of(frame: DataFrame) -> dict[str, int]:
    """The round-robin positions as the job stores them in its state (JobState)."""
    return {r["group"]: r["position"] for r in frame.collect()}


# --------------------------------------------------------------------------------------
# One routing for most rules
# --------------------------------------------------------------------------------------

RULES_XML = """
<address-settings>
  <address-setting match="nr.dla"><dead-letter-address>nr.DLA</dead-letter-address>
    <send-to-dla-on-no-route>true</send-to-dla-on-no-route></address-setting>
  <address-setting match="nr.void"><dead-letter-address>nr.VOID</dead-letter-address>
    <send-to-dla-on-no-route>true</send-to-dla-on-no-route></address-setting>
  <address-setting match="nr.filtered"><dead-letter-address>nr.DLA</dead-letter-address>
    <send-to-dla-on-no-route>true</send-to-dla-on-no-route></address-setting>
  <address-setting match="xp.none"><no-expiry>true</no-expiry></address-setting>
  <address-setting match="xp.delay"><expiry-delay>1000</expiry-delay></address-setting>
  <address-setting match="xp.clamp"><min-expiry-delay>500</min-expiry-delay>
    <max-expiry-delay>2000</max-expiry-delay></address-setting>
  <address-setting match="xp.min"><min-expiry-delay>500</min-expiry-delay></address-setting>
</address-settings>
<diverts>
  <divert name="ex.red"><address>ex</address><forwarding-address>ex.red.out</forwarding-address>
    <filter string="color = 'red'"/><exclusive>true</exclusive></divert>
  <divert name="ex.big"><address>ex</address><forwarding-address>ex.big.out</forwarding-address>
    <filter string="size &gt; 10"/><exclusive>true</exclusive></divert>
  <divert name="ex.tap"><address>ex</address><forwarding-address>ex.tap.out</forwarding-address></divert>
  <divert name="rr.1"><routing-name>grp</routing-name><address>rr</address>
    <forwarding-address>rr.out1</forwarding-address></divert>
  <divert name="rr.2"><routing-name>grp</routing-name><address>rr</address>
    <forwarding-address>rr.out2</forwarding-address><filter string="k IS NULL"/></divert>
  <divert name="rr.3"><routing-name>grp</routing-name><address>rr</address>
    <forwarding-address>rr.out3</forwarding-address></divert>
  <divert name="rr.solo"><address>rr</address><forwarding-address>rr.solo.out</forwarding-address></divert>
  <divert name="cf.d"><address>cf</address><forwarding-address>cf.x, cf.y</forwarding-address>
    <exclusive>true</exclusive></divert>
  <divert name="rt.any"><address>rt</address><forwarding-address>rt.out</forwarding-address>
    <routing-type>ANYCAST</routing-type></divert>
  <divert name="rt.multi"><address>rt</address><forwarding-address>rt.out</forwarding-address>
    <routing-type>MULTICAST</routing-type></divert>
  <divert name="rt.pass"><address>rt</address><forwarding-address>rt.out</forwarding-address>
    <routing-type>PASS</routing-type></divert>
  <divert name="rt.strip"><address>rt</address><forwarding-address>rt.out</forwarding-address>
    <routing-type>STRIP</routing-type></divert>
  <divert name="rt.default"><address>rt</address><forwarding-address>rt.out</forwarding-address></divert>
  <divert name="mv.d"><address>mv</address><forwarding-address>mv.out</forwarding-address>
    <exclusive>true</exclusive></divert>
  <divert name="xp.d"><address>xp.src</address><forwarding-address>xp.delay</forwarding-address>
    <exclusive>true</exclusive></divert>
  <divert name="hop.d"><address>hop</address><forwarding-address>hop.out</forwarding-address>
    <exclusive>true</exclusive></divert>
</diverts>
<addresses>
  <address name="ex"><multicast><queue name="ex.q"/></multicast></address>
  <address name="ex.red.out"><anycast><queue name="ex.red.q"/></anycast></address>
  <address name="ex.big.out"><anycast><queue name="ex.big.q"/></anycast></address>
  <address name="ex.tap.out"><anycast><queue name="ex.tap.q"/></anycast></address>
  <address name="rr"><multicast><queue name="rr.q"/></multicast></address>
  <address name="rr.out1"><anycast><queue name="rr.q1"/></anycast></address>
  <address name="rr.out2"><anycast><queue name="rr.q2"/></anycast></address>
  <address name="rr.out3"><anycast><queue name="rr.q3"/></anycast></address>
  <address name="rr.solo.out"><anycast><queue name="rr.solo.q"/></anycast></address>
  <address name="cf"><anycast/></address>
  <address name="cf.x"><anycast><queue name="cf.x.q"/></anycast></address>
  <address name="cf.y"><anycast><queue name="cf.y.q"/></anycast></address>
  <address name="rt"><multicast/></address>
  <address name="rt.out"><anycast><queue name="rt.out.a"/></anycast>
    <multicast><queue name="rt.out.m"/></multicast></address>
  QUEUES_OF_Q
  <address name="mv"><anycast><queue name="mv.q1"><filter string="color = 'red'"/></queue>
    <queue name="mv.q2"/></anycast></address>
  <address name="mv.out"><anycast><queue name="mv.out.q"/></anycast></address>
  <address name="nr.drop"><anycast/></address>
  <address name="nr.filtered"><anycast><queue name="nr.filtered.q">
    <filter string="color = 'red'"/></queue></anycast></address>
  <address name="nr.dla"><anycast/></address>
  <address name="nr.DLA"><anycast><queue name="nr.DLQ"/></anycast></address>
  <address name="nr.void"><anycast/></address>
  <address name="xp.none"><anycast><queue name="xp.none.q"/></anycast></address>
  <address name="xp.delay"><anycast><queue name="xp.delay.q"/></anycast></address>
  <address name="xp.clamp"><anycast><queue name="xp.clamp.q"/></anycast></address>
  <address name="xp.min"><anycast><queue name="xp.min.q"/></anycast></address>
  <address name="xp.src"><anycast/></address>
  <address name="hop"><anycast/></address>
  <address name="hop.out"><anycast><queue name="hop.out.q"/></anycast></address>
</addresses>
"""

Q_XML = """
  <address name="q">
    <anycast><queue name="q.a1"><filter string="color = 'red'"/></queue>
      <queue name="q.a2"/><queue name="q.a3"/></anycast>
    <multicast><queue name="q.m1"/><queue name="q.m2"><filter string="color = 'red'"/></queue>
    </multicast>
  </address>
"""

RED = {"color": "red"}

# Address q: rows in (sent_at, message_id) turn order 502, 501, 503, (504), 505 | 506, 507.
# q.a1 takes only red rows; a MULTICAST row (504) uses an anycast turn up (it enters no
# anycast queue: Artemis's BindingsImpl.getNextBinding, SPEC §5.2 step 2).
Q_ROWS = [
    message(502, "q", 1),
    message(501, "q", 2, properties=RED),
    message(503, "q", 2, properties=RED, routing_type="ANYCAST"),
    message(504, "q", 2, properties=RED, routing_type="MULTICAST"),
    message(505, "q", 3),
    message(506, "q", 4, routing_type="ANYCAST"),
    message(507, "q", 5, properties=RED),
]
Q_ENTRIES = [
    # anycast, one queue each, in turn from position 0:
    ("q.a2", 502),  # position 0 is q.a1, which takes red rows only: skipped
    ("q.a3", 501),  # same instant as 503, smaller id: its turn comes first
    ("q.a1", 503),
    # 504, MULTICAST, takes q.a2's turn and does not enter it
    ("q.a3", 505),
    ("q.a2", 506),  # q.a1 takes red rows only: skipped
    ("q.a3", 507),
    # multicast: every row whose routing type is MULTICAST or null, if the filter matches
    ("q.m1", 501),
    ("q.m1", 502),
    ("q.m1", 504),
    ("q.m1", 505),
    ("q.m1", 507),
    ("q.m2", 501),
    ("q.m2", 504),
    ("q.m2", 507),
]

RULE_ROWS = [
    # exclusive diverts
    message(101, "ex", properties={"color": "red", "size": "1"}),
    message(102, "ex", properties={"color": "red", "size": "20"}),
    message(103, "ex", properties={"color": "blue", "size": "1"}),
    message(104, "ex", properties={"color": "blue", "size": "20"}),
    # non-exclusive diverts sharing a routing-name
    *[message(201 + i, "rr", 1 + i) for i in range(3)],
    *[message(204 + i, "rr", 4 + i, properties={"k": "x"}) for i in range(2)],
    message(206, "rr", 6),
    # composite forwarding address
    message(301, "cf"),
    # divert routing types
    message(401, "rt", routing_type="MULTICAST"),
    message(402, "rt", routing_type="ANYCAST"),
    message(403, "rt"),
    # queues
    *Q_ROWS,
    # MOVE copies: to_queue only; a RETRY copy meets the exclusive divert first
    message(601, "mv", copy_reason="MOVE", to_queue="mv.q1"),
    message(602, "mv", copy_reason="RETRY", to_queue="mv.q2"),
    message(603, "mv"),
    # no route
    message(701, "nr.drop"),
    message(702, "nr.filtered", properties={"color": "blue"}),
    message(703, "nr.dla", properties={"k": "v"}),
    message(704, "nr.void"),
    # expiry settings on entering an address, at sent_at = 1000
    message(801, "xp.none", 1000, expiration=1100),
    message(802, "xp.delay", 1000),
    message(803, "xp.delay", 1000, expiration=1050),
    message(804, "xp.clamp", 1000),
    message(805, "xp.clamp", 1000, expiration=1100),
    message(806, "xp.clamp", 1000, expiration=6000),
    message(807, "xp.clamp", 1000, expiration=2000),
    message(808, "xp.min", 1000),
    message(809, "xp.src", 1000),
    message(810, "xp.src", 1000, expiration=1300),
    # rows arriving 63 and 64 divert hops down a chain
    {**message(901, "hop"), "_hops": MAX_HOPS - 1},
    {**message(902, "hop"), "_hops": MAX_HOPS},
]


@dataclass
class Routing:
    entries: DataFrame
    journal: DataFrame
    rejected: DataFrame
    copies: DataFrame
    positions: DataFrame

    def queues(self, prefix: str) -> DataFrame:
        """(queue, message_id) of the rows entering queues named ``prefix``..."""
        return self.entries.where(F.col("queue").startswith(prefix)).select("queue", "message_id")

    def copies_from(self, prefix: str) -> DataFrame:
        """Divert copies by diverts named ``prefix``...: which divert copied which row."""
        p = F.col("properties")
        return self.copies.where(p["_AMQ_ORIG_QUEUE"].startswith(prefix)).select(
            p["_AMQ_ORIG_MESSAGE_ID"].cast("long").alias("parent"),
            p["_AMQ_ORIG_QUEUE"].alias("divert"),
            "address",
            "message_id",
            "routing_type",
        )


@contextmanager
def route(router: Router, rows: DataFrame, positions: Mapping[str, int]) -> Iterator[Routing]:
    """Route ``rows`` once; the frames stay readable inside the ``with`` block."""
    scratch = Scratch()
    try:
        result = router.route(rows, positions_frame(rows.sparkSession, positions), scratch)
        spark = rows.sparkSession

        def kept(frames: list[DataFrame], schema: pa.Schema | None = None) -> DataFrame:
            """Computed once (the tests read many small slices); a topology without diverts
            or dead-letter addresses plans no copy and no cut (``schema``'s empty frame)."""
            if not frames and schema is not None:
                return local_frame(spark, [], schemas.spark_schema(schema))
            return scratch.keep(union(frames))

        yield Routing(
            kept(result.entries),
            kept(result.journal),
            kept(result.rejected, schemas.REJECTED),
            kept(result.copies, schemas.MESSAGE),
            scratch.keep(result.positions),
        )
    finally:
        scratch.release()


@pytest.fixture(scope="module")
def rules_topology() -> Topology:
    return topology_of(RULES_XML.replace("QUEUES_OF_Q", Q_XML))


@pytest.fixture(scope="module")
def routed(spark, rules_topology) -> Iterator[Routing]:
    with route(Router(rules_topology), router_input(spark, RULE_ROWS), {}) as result:
        yield result


# --------------------------------------------------------------------------------------
# Diverts
# --------------------------------------------------------------------------------------


def test_exclusive_diverts_fire_alone(routed):
    """Every matching exclusive divert fires, and then nothing else on the address does:
    no queue, no non-exclusive divert. A row no exclusive divert takes is routed normally."""
    expected = [
        (101, "ex.red", "ex.red.out"),
        (102, "ex.red", "ex.red.out"),  # both exclusive diverts match: both fire
        (102, "ex.big", "ex.big.out"),
        (103, "ex.tap", "ex.tap.out"),  # no exclusive divert matched
        (104, "ex.big", "ex.big.out"),
    ]
    assert_rows(
        routed.copies_from("ex."),
        "parent long, divert string, address string, message_id long, routing_type string",
        [(p, d, a, divert_copy(p, d, a), None) for p, d, a in expected],
    )
    assert_rows(
        routed.queues("ex."),
        "queue string, message_id long",
        [("ex.q", 103)] + [(a.replace(".out", ".q"), divert_copy(p, d, a)) for p, d, a in expected],
    )


def test_diverts_sharing_a_routing_name_take_turns(routed):
    """rr.1, rr.2 and rr.3 share a routing-name: one of them copies each row, in turn from
    position 0, skipping a divert whose filter does not match (rr.2 wants no ``k``); the
    divert without a routing-name copies every row; the queue gets every row."""
    turns = [
        (201, "rr.1", "rr.out1"),
        (202, "rr.2", "rr.out2"),
        (203, "rr.3", "rr.out3"),
        (204, "rr.1", "rr.out1"),
        (205, "rr.3", "rr.out3"),  # rr.2's turn, but k = 'x': the next divert takes it
        (206, "rr.1", "rr.out1"),
    ]
    solo = [(m, "rr.solo", "rr.solo.out") for m in range(201, 207)]
    assert_rows(
        routed.copies_from("rr."),
        "parent long, divert string, address string, message_id long, routing_type string",
        [(p, d, a, divert_copy(p, d, a), None) for p, d, a in turns + solo],
    )
    assert_rows(
        routed.queues("rr."),
        "queue string, message_id long",
        [("rr.q", m) for m in range(201, 207)]
        + [(f"rr.q{a[-1]}", divert_copy(p, d, a)) for p, d, a in turns]
        + [("rr.solo.q", divert_copy(p, d, a)) for p, d, a in solo],
    )


def test_composite_forwarding_address_copies_to_each(routed):
    ids = {a: divert_copy(301, "cf.d", a) for a in ("cf.x", "cf.y")}
    assert ids["cf.x"] != ids["cf.y"]
    assert_rows(
        routed.copies_from("cf."),
        "parent long, divert string, address string, message_id long, routing_type string",
        [(301, "cf.d", a, i, None) for a, i in ids.items()],
    )
    assert_rows(
        routed.queues("cf."),
        "queue string, message_id long",
        [("cf.x.q", ids["cf.x"]), ("cf.y.q", ids["cf.y"])],
    )


def test_divert_routing_types(routed):
    """ANYCAST / MULTICAST set the copy's routing type, PASS keeps the row's, STRIP (the
    default) clears it; the copy then reaches only the queues of a matching kind (null:
    both kinds)."""
    sent = {401: "MULTICAST", 402: "ANYCAST", 403: None}
    rule = {
        "rt.any": lambda _: "ANYCAST",
        "rt.multi": lambda _: "MULTICAST",
        "rt.pass": lambda kind: kind,
        "rt.strip": lambda _: None,
        "rt.default": lambda _: None,
    }
    copies = [
        (m, d, "rt.out", divert_copy(m, d, "rt.out"), make(kind))
        for m, kind in sent.items()
        for d, make in rule.items()
    ]
    assert_rows(
        routed.copies_from("rt."),
        "parent long, divert string, address string, message_id long, routing_type string",
        copies,
    )
    entries = [
        (queue, copy)
        for _, _, _, copy, kind in copies
        for queue, takes in (("rt.out.a", "ANYCAST"), ("rt.out.m", "MULTICAST"))
        if kind in (None, takes)
    ]
    assert_rows(routed.queues("rt.out"), "queue string, message_id long", entries)


def test_divert_hop_guard(routed):
    """A row already 63 hops down a divert chain is diverted once more; one at 64 hops is
    not diverted (the chain is cut) and is rejected, and goes nowhere else."""
    assert_rows(
        routed.queues("hop."),
        "queue string, message_id long",
        [("hop.out.q", divert_copy(901, "hop.d", "hop.out"))],
    )
    assert_rows(
        routed.rejected.select(
            "source",
            F.get_json_object("row", "$.message_id").cast("long").alias("message_id"),
            "reason",
            "at",
        ),
        "source string, message_id long, reason string, at timestamp",
        [
            (
                "addresses/hop",
                902,
                "divert chain longer than 64 hops: not diverted from hop",
                at(0),
            )
        ],
    )


# --------------------------------------------------------------------------------------
# Queues
# --------------------------------------------------------------------------------------


def test_multicast_queues_all_anycast_one_in_turn(routed):
    """Every matching MULTICAST queue; one ANYCAST queue, in turn in (sent_at, message_id)
    order, only among queues whose filter matches; the row's routing type picks the kinds
    (ANYCAST rows skip multicast queues, a MULTICAST row's anycast turn is used up)."""
    assert_rows(routed.queues("q."), "queue string, message_id long", Q_ENTRIES)


def test_to_queue_copies_go_to_that_queue_only(routed):
    """A MOVE copy enters its ``to_queue`` only: no divert (mv.d is exclusive), no queue
    filter (mv.q1 wants red rows), no anycast turn. A RETRY copy meets its address's
    exclusive diverts first (Artemis's BindingsImpl.route): mv.d takes 602 to mv.out."""
    assert_rows(
        routed.queues("mv."),
        "queue string, message_id long",
        [
            ("mv.q1", 601),
            ("mv.out.q", divert_copy(602, "mv.d", "mv.out")),
            ("mv.out.q", divert_copy(603, "mv.d", "mv.out")),
        ],
    )
    assert_rows(
        routed.copies_from("mv."),
        "parent long, divert string, address string, message_id long, routing_type string",
        [
            (602, "mv.d", "mv.out", divert_copy(602, "mv.d", "mv.out"), None),
            (603, "mv.d", "mv.out", divert_copy(603, "mv.d", "mv.out"), None),
        ],
    )


def test_positions_after_the_rows(routed):
    """Where each round-robin group stands after the rows (the job state): a group no row
    took a turn in (anycast:mv: only to_queue and diverted rows) is not recorded."""
    assert positions_of(routed.positions) == {"anycast:q": 0, "divert:rr:grp": 1}


def test_every_entry_is_journalled_once(routed):
    journal = routed.journal.where(F.col("event") == "ROUTED")
    assert_df_equality(
        journal.select("at", "queue", "message_id", F.col("detail")["address"].alias("address")),
        routed.entries.select(F.col("routed_at").alias("at"), "queue", "message_id", "address"),
        ignore_row_order=True,
        ignore_nullable=True,
    )


# --------------------------------------------------------------------------------------
# No route
# --------------------------------------------------------------------------------------


def test_no_route_is_dropped_or_dead_lettered(routed):
    """No queue and no divert: DROPPED with NO_ROUTE; with send-to-dla-on-no-route the
    message itself goes to the DLA (same id, no _AMQ_ORIG_QUEUE, no routing type), and
    one that finds no route there is dropped, not dead-lettered again; an address with a
    queue that refuses the row (nr.filtered) drops it whatever its settings say."""
    to_dlq, to_void = 703, 704  # the messages themselves go on

    def dropped(message_id: int, address: str) -> tuple:
        return (at(0), None, message_id, "DROPPED", 0, {"reason": "NO_ROUTE", "address": address})

    def dead_lettered(message_id: int, dla: str, copy: int) -> tuple:
        detail = {"reason": "NO_ROUTE", "to_address": dla, "copy_id": str(copy)}
        return (at(0), None, message_id, "DEAD_LETTERED", 0, detail)

    assert_rows_equal(
        routed.journal.where(F.col("event") != "ROUTED"),
        routed.journal.sparkSession.createDataFrame(
            [
                dropped(701, "nr.drop"),
                dropped(702, "nr.filtered"),
                dead_lettered(703, "nr.DLA", to_dlq),
                dead_lettered(704, "nr.VOID", to_void),
                dropped(704, "nr.VOID"),
            ],
            JOURNAL_ROWS,
        ),
        order_by=["message_id", "event"],
        ignore_nullable=True,
    )
    copies = routed.copies.where(F.col("copy_reason") == DEAD_LETTER)
    assert_rows_equal(
        copies.select("message_id", "address", "routing_type", "sent_at", "properties"),
        copies.sparkSession.createDataFrame(
            [
                (to_dlq, "nr.DLA", None, at(0), {"k": "v", **orig("nr.dla", None, 703)}),
                (to_void, "nr.VOID", None, at(0), orig("nr.void", None, 704)),
            ],
            "message_id long, address string, routing_type string, sent_at timestamp, "
            "properties map<string,string>",
        ),
        order_by=["message_id"],
        ignore_nullable=True,
    )
    assert_rows(routed.queues("nr."), "queue string, message_id long", [("nr.DLQ", to_dlq)])


# --------------------------------------------------------------------------------------
# Expiry settings on entering an address
# --------------------------------------------------------------------------------------


def test_expiry_settings_on_entering_an_address(routed):
    """At the row's sent_at (1000): no-expiry clears; expiry-delay sets only when absent;
    min/max set (max first) when absent and clamp when present; a divert copy gets the
    settings of the address it enters, keeping an expiration it carries."""
    assert_rows(
        routed.entries.where(F.col("queue").startswith("xp.")).select(
            "queue", "message_id", "expiration"
        ),
        "queue string, message_id long, expiration timestamp",
        [
            ("xp.none.q", 801, None),
            ("xp.delay.q", 802, at(2000)),
            ("xp.delay.q", 803, at(1050)),
            ("xp.clamp.q", 804, at(3000)),
            ("xp.clamp.q", 805, at(1500)),
            ("xp.clamp.q", 806, at(3000)),
            ("xp.clamp.q", 807, at(2000)),
            ("xp.min.q", 808, at(1500)),
            ("xp.delay.q", divert_copy(809, "xp.d", "xp.delay"), at(2000)),
            ("xp.delay.q", divert_copy(810, "xp.d", "xp.delay"), at(1300)),
        ],
    )


# --------------------------------------------------------------------------------------
# Cases of their own
# --------------------------------------------------------------------------------------


def test_anycast_turn_is_carried_across_micro_batches(spark):
    """Address q routed in two micro-batches (up to 3 ms, then the rest), the positions
    kept in between as the job keeps them: the same queues as in one routing."""
    router = Router(topology_of(f"<addresses>{Q_XML}</addresses>"))
    first = [r for r in Q_ROWS if r["sent_at"] <= at(3)]
    second = [r for r in Q_ROWS if r["sent_at"] > at(3)]
    with route(router, router_input(spark, first), {}) as one:
        state = JobState(positions=positions_of(one.positions))
        # after 502, 501, 503, 504 (a turn used up), 505 (q.a3): q.a1 is next
        assert state.positions == {"anycast:q": 0}
        carried = JobState.from_json(state.to_json())  # as committed with queue_messages
        with route(router, router_input(spark, second), carried.positions) as two:
            assert_rows(
                one.queues("q.").unionByName(two.queues("q.")),
                "queue string, message_id long",
                Q_ENTRIES,
            )
            assert positions_of(two.positions) == {"anycast:q": 0}


def test_copies_take_anycast_turns_where_they_arrive(spark):
    """Turns are taken in every pass, not only the first: src's rows are diverted to
    mid and on to dst, whose two unfiltered anycast queues take the copies in turn
    (sent_at order), as dst's own rows routed at the same time take theirs; src's own
    anycast queue is a group of one (no turn)."""
    xml = (
        '<diverts><divert name="d1"><address>src</address>'
        "<forwarding-address>mid</forwarding-address></divert>"
        '<divert name="d2"><address>mid</address>'
        "<forwarding-address>dst</forwarding-address></divert></diverts>"
        '<addresses><address name="src"><anycast><queue name="src.q"/></anycast></address>'
        '<address name="mid"><anycast/></address>'
        '<address name="dst"><anycast><queue name="dst.a"/><queue name="dst.b"/></anycast>'
        "</address></addresses>"
    )
    router = Router(topology_of(xml))
    rows = [message(900 + i, "src", 2 * i) for i in range(4)]
    with route(router, router_input(spark, rows), {"anycast:dst": 1}) as result:
        copies = [divert_copy(divert_copy(900 + i, "d1", "mid"), "d2", "dst") for i in range(4)]
        assert_rows(
            result.queues("dst."),
            "queue string, message_id long",
            [
                ("dst.b", copies[0]),
                ("dst.a", copies[1]),
                ("dst.b", copies[2]),
                ("dst.a", copies[3]),
            ],
        )
        assert_rows(
            result.queues("src."),
            "queue string, message_id long",
            [("src.q", 900 + i) for i in range(4)],
        )
        assert positions_of(result.positions) == {"anycast:dst": 1}


def test_an_address_with_two_turn_groups_keeps_each_groups_turns(spark):
    """At ``both`` the two anycast queues take turns (a rotation, from position 1) and,
    apart from them, the diverts sharing routing-name grp take theirs (a scan from 0: grp.1
    wants ``k = 'a'``, so a 'b' row goes to grp.2); each row's two turns stay apart."""
    xml = (
        '<diverts><divert name="grp.1"><routing-name>grp</routing-name><address>both</address>'
        "<forwarding-address>out1</forwarding-address>"
        "<filter string=\"k = 'a'\"/></divert>"
        '<divert name="grp.2"><routing-name>grp</routing-name><address>both</address>'
        "<forwarding-address>out2</forwarding-address></divert></diverts>"
        '<addresses><address name="both"><anycast><queue name="both.a"/><queue name="both.b"/>'
        '</anycast></address><address name="out1"><anycast><queue name="out1.q"/></anycast>'
        '</address><address name="out2"><anycast><queue name="out2.q"/></anycast></address>'
        "</addresses>"
    )
    router = Router(topology_of(xml))
    kinds = ["b", "a", "a", "b"]
    rows = [message(910 + i, "both", i, properties={"k": k}) for i, k in enumerate(kinds)]
    with route(router, router_input(spark, rows), {"anycast:both": 1}) as result:
        assert_rows(
            result.queues("both."),
            "queue string, message_id long",
            [("both.b", 910), ("both.a", 911), ("both.b", 912), ("both.a", 913)],
        )
        diverted = [(910, "grp.2", "out2"), (911, "grp.1", "out1"), (912, "grp.2", "out2")]
        diverted.append((913, "grp.2", "out2"))
        assert_rows(
            result.copies_from("grp."),
            "parent long, divert string, address string, message_id long, routing_type string",
            [(p, d, a, divert_copy(p, d, a), None) for p, d, a in diverted],
        )
        assert positions_of(result.positions) == {"anycast:both": 1, "divert:both:grp": 0}


CHAIN = 25


def test_divert_chain_of_25_hops(spark):
    """c0 -> c1 -> ... -> c25 by diverts d0..d24: the copy reaching queue ``end`` names the
    latest hop unsuffixed and keeps every earlier one as _0 ... _23, oldest first."""
    diverts = "".join(
        f'<divert name="d{i}"><address>c{i}</address>'
        f"<forwarding-address>c{i + 1}</forwarding-address></divert>"
        for i in range(CHAIN)
    )
    addresses = "".join(f'<address name="c{i}"><anycast/></address>' for i in range(CHAIN))
    addresses += f'<address name="c{CHAIN}"><anycast><queue name="end"/></anycast></address>'
    router = Router(topology_of(f"<diverts>{diverts}</diverts><addresses>{addresses}</addresses>"))
    ids = [123]
    for i in range(CHAIN):
        ids.append(divert_copy(ids[-1], f"d{i}", f"c{i + 1}"))
    rows = router_input(spark, [message(123, "c0", properties={"k": "v"})])
    with route(router, rows, {}) as result:
        assert_rows(
            result.copies.select("address", "message_id", "copy_reason"),
            "address string, message_id long, copy_reason string",
            [(f"c{i + 1}", ids[i + 1], DIVERT) for i in range(CHAIN)],
        )
        entries = result.entries
        assert_rows(
            entries.select("queue", "message_id"),
            "queue string, message_id long",
            [("end", ids[CHAIN])],
        )
        p = F.col("properties")
        latest = {"k": "v", **orig(f"c{CHAIN - 1}", f"d{CHAIN - 1}", ids[CHAIN - 1])}
        expected = {**latest}
        for n in range(CHAIN - 1):
            expected.update(orig(f"c{n}", f"d{n}", ids[n], n))
        assert_rows_equal(
            entries.select("message_id", "address", "properties"),
            spark.createDataFrame(
                [(ids[CHAIN], f"c{CHAIN}", expected)],
                "message_id long, address string, properties map<string,string>",
            ),
            order_by=["message_id"],
            ignore_nullable=True,
        )
        # the history in order: _n names hop n (address c<n>, divert d<n>, its id)
        hops = entries.select(
            F.explode(F.sequence(F.lit(0), F.lit(CHAIN - 2))).alias("n"), "properties"
        ).select(
            "n",
            *[
                p[F.concat(F.lit(f"{name}_"), F.col("n").cast("string"))].alias(name)
                for name in ("_AMQ_ORIG_ADDRESS", "_AMQ_ORIG_QUEUE", "_AMQ_ORIG_MESSAGE_ID")
            ],
        )
        assert_df_equality(
            hops.orderBy("n"),
            spark.createDataFrame(
                [(n, f"c{n}", f"d{n}", str(ids[n])) for n in range(CHAIN - 1)],
                "n int, _AMQ_ORIG_ADDRESS string, _AMQ_ORIG_QUEUE string, "
                "_AMQ_ORIG_MESSAGE_ID string",
            ),
            ignore_nullable=True,
        )


SEED_XML = """
<address-settings>
  <address-setting match="B"><dead-letter-address>DLA</dead-letter-address>
    <max-delivery-attempts>1</max-delivery-attempts></address-setting>
</address-settings>
<diverts>
  <divert name="divertAtoB"><address>A</address><forwarding-address>B</forwarding-address>
    <exclusive>true</exclusive></divert>
</diverts>
<addresses>
  <address name="A"><anycast/></address>
  <address name="B"><anycast><queue name="X"/></anycast></address>
  <address name="DLA"><anycast><queue name="DLQ"/></anycast></address>
</addresses>
"""


def test_seed_example_divert_then_dead_letter(spark):
    """SPEC §5.5: 123 sent to A, diverted by divertAtoB to B (456) into X, then
    dead-lettered to DLA (789), all in one micro-batch (``run_batch``)."""
    topology = topology_of(SEED_XML)
    i456 = divert_copy(123, "divertAtoB", "B")
    i789 = copy_id_py(i456, DEAD_LETTER, "X", "DLA", None)
    events = batch_events(
        spark,
        messages=[message(123, "A", properties={"k": "v"})],
        deliveries=[delivery("X", i456, "ROLLBACK", 10)],
    )
    scratch = Scratch()
    try:
        result = run_batch(
            events, no_pending(spark), JobState(), topology, Router(topology), scratch
        )
        in_b = {"k": "v", **orig("A", "divertAtoB", 123)}
        in_dla = {"k": "v", **orig("B", "X", i456), **orig("A", "divertAtoB", 123, 0)}
        assert in_dla == {
            "k": "v",
            "_AMQ_ORIG_ADDRESS": "B",
            "_AMQ_ORIG_QUEUE": "X",
            "_AMQ_ORIG_MESSAGE_ID": str(i456),
            "_AMQ_ORIG_ADDRESS_0": "A",
            "_AMQ_ORIG_QUEUE_0": "divertAtoB",
            "_AMQ_ORIG_MESSAGE_ID_0": "123",
        }

        # the breadcrumbs are typed, a moved one keeping its type (SPEC §3.1)
        crumbs = {"_AMQ_ORIG_ADDRESS": "string", "_AMQ_ORIG_QUEUE": "string"}
        crumbs["_AMQ_ORIG_MESSAGE_ID"] = "long"
        moved = {f"{k}_0": v for k, v in crumbs.items()}

        def row(mid, address, t, props_, types, reason, queue, status, count, status_t):
            return (
                mid,
                address,
                None,
                at(t),
                None,
                None,
                None,
                None,
                props_,
                types,
                None,
                reason,
                None,
                queue,
                status,
                count,
                None,
                at(t),
                at(status_t),
            )

        def copy_row(mid, address, t, props_, types, reason):
            nulls = (None,) * 4  # expiration, priority, durable, user_id
            return (mid, address, None, at(t), *nulls, props_, types, None, reason, None)

        assert_rows_equal(
            result.queue_rows.drop("_file"),
            spark.createDataFrame(
                [
                    row(i456, "B", 0, in_b, crumbs, DIVERT, "X", "DEAD_LETTERED", 1, 10),
                    row(
                        i789,
                        "DLA",
                        10,
                        in_dla,
                        crumbs | moved,
                        DEAD_LETTER,
                        "DLQ",
                        "PENDING",
                        0,
                        10,
                    ),
                ],
                QUEUE_ROWS,
            ),
            order_by=["queue", "message_id"],
            ignore_nullable=True,
        )
        assert_rows_equal(
            result.journal,
            spark.createDataFrame(
                [
                    (at(0), "X", i456, "ROUTED", 0, {"address": "B", "copy_reason": DIVERT}),
                    (
                        at(10),
                        "X",
                        i456,
                        "DEAD_LETTERED",
                        1,
                        {
                            "to_address": "DLA",
                            "copy_id": str(i789),
                            "reason": "MAX_DELIVERY_ATTEMPTS",
                        },
                    ),
                    (
                        at(10),
                        "DLQ",
                        i789,
                        "ROUTED",
                        0,
                        {"address": "DLA", "copy_reason": DEAD_LETTER},
                    ),
                ],
                JOURNAL_ROWS,
            ),
            order_by=["at", "queue"],
            ignore_nullable=True,
        )
        assert_rows_equal(
            result.copies,
            spark.createDataFrame(
                [
                    copy_row(i456, "B", 0, in_b, crumbs, DIVERT),
                    copy_row(i789, "DLA", 10, in_dla, crumbs | moved, DEAD_LETTER),
                ],
                MESSAGE_ROWS,
            ),
            order_by=["message_id"],
            ignore_nullable=True,
        )
        assert result.rejected.isEmpty()
    finally:
        scratch.release()


PLANNED_XML = """
<address-settings>
  <address-setting match="lost">
    <dead-letter-address>DLA</dead-letter-address>
    <send-to-dla-on-no-route>true</send-to-dla-on-no-route>
  </address-setting>
</address-settings>
<diverts>
  <divert name="tap"><address>tapped</address><forwarding-address>plain</forwarding-address></divert>
</diverts>
<addresses>
  <address name="plain"><anycast><queue name="plain.q"/></anycast></address>
  <address name="tapped"><anycast><queue name="tapped.q"/></anycast></address>
  <address name="lost"><anycast/></address>
  <address name="DLA"><anycast><queue name="DLA.q"/></anycast></address>
</addresses>
"""


@pytest.mark.parametrize(
    ("xml", "messages", "deliveries", "known_empty", "copied", "rejected"),
    [
        # no divert, no dead-letter address: no copy can be made
        (Q_XML, [message(1, "q")], [], {"copies", "rejected"}, [], []),
        # a divert and a no-route dead letter make copies; producer rows reject nothing
        (PLANNED_XML, [message(1, "tapped"), message(2, "lost")], [], {"rejected"}, [1, 2], []),
        # no row is where a divert or a no-route dead-letter address is
        (PLANNED_XML, [message(1, "plain")], [], {"copies", "rejected"}, [], []),
        # an event may name no message
        (
            PLANNED_XML,
            [message(1, "plain")],
            [delivery("plain.q", 7, "ACK", 1)],
            {"copies"},
            [],
            [7],
        ),
        # no message: nothing is routed, no producer id taken
        (PLANNED_XML, [], [delivery("plain.q", 7, "ACK", 1)], {"copies", "producer_ids"}, [], [7]),
        # no message routed and no event: nothing to journal either
        (
            PLANNED_XML,
            [message(1, "plain", routing_type="SIDEWAYS")],
            [],
            {"copies", "journal", "producer_ids"},
            [],
            [1],
        ),
    ],
)
def test_a_batch_plans_only_the_outputs_it_can_make(
    spark, xml, messages, deliveries, known_empty, copied, rejected
):
    """The copies, rejected rows, journal rows and producer ids a batch cannot make are
    known as it is planned (no divert or dead-letter edge where its rows are, no event, no
    row refused, no message): their frames are empty, and the job's write leaves them out
    rather than computing them."""
    topology = topology_of(f"<addresses>{xml}</addresses>" if xml is Q_XML else xml)
    scratch = Scratch()
    try:
        result = run_batch(
            batch_events(spark, messages, deliveries),
            no_pending(spark),
            JobState(),
            topology,
            Router(topology),
            scratch,
        )
        parents = result.copies.select(
            F.col("properties")["_AMQ_ORIG_MESSAGE_ID"].cast("long").alias("parent")
        )
        assert result.known_empty == known_empty
        assert sorted(r.parent for r in parents.collect()) == copied
        assert [json.loads(r.row)["message_id"] for r in result.rejected.collect()] == rejected
        assert result.routed.isEmpty() == ("producer_ids" in known_empty)
        assert "journal" not in known_empty or result.journal.isEmpty()
    finally:
        scratch.release()
