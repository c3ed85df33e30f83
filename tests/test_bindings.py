"""The binding layout (routing/broker/bindings.py): each address's bindings in the order
Artemis walks them, turn groups by slot, and each distinct filter once, however many
addresses share it."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql import functions as F

from jobs import route
from routing.broker.bindings import (
    ANYCAST_QUEUE,
    EXCLUSIVE_DIVERT,
    MULTICAST_QUEUE,
    NON_EXCLUSIVE_DIVERT,
    BindingLayout,
)
from routing.broker.layout import address_source
from routing.io.lake import Lake
from routing.plan.bindings import source_of
from tests.lakeio import rows
from tests.test_routing_rules import broker, topology_of

ORDERS = """
<addresses>
  <address name="orders"><anycast>
    <queue name="o1"/><queue name="o2"><filter string="kind = 'b'"/></queue>
  </anycast><multicast><queue name="tap"><filter string="amount &gt; 5"/></queue></multicast></address>
  <address name="audit"><multicast><queue name="all"/></multicast></address>
</addresses>
<diverts>
  <divert name="first"><address>orders</address><forwarding-address>audit</forwarding-address>
    <routing-name>r</routing-name></divert>
  <divert name="big"><address>orders</address><forwarding-address>audit</forwarding-address>
    <filter string="amount &gt; 5"/><exclusive>true</exclusive></divert>
  <divert name="second"><address>orders</address><forwarding-address>audit</forwarding-address>
    <routing-name>r</routing-name></divert>
</diverts>
"""


def test_an_address_holds_its_diverts_then_its_queues_in_declaration_order():
    layout = BindingLayout(topology_of(ORDERS))
    orders = layout.slots["orders"]
    assert [(b.kind, b.name) for b in orders] == [
        (NON_EXCLUSIVE_DIVERT, "first"),
        (EXCLUSIVE_DIVERT, "big"),
        (NON_EXCLUSIVE_DIVERT, "second"),
        (ANYCAST_QUEUE, "o1"),
        (ANYCAST_QUEUE, "o2"),
        (MULTICAST_QUEUE, "tap"),
    ]
    assert layout.width == 6
    assert [(b.kind, b.name) for b in layout.slots["audit"]] == [(MULTICAST_QUEUE, "all")]


def test_turn_groups_name_their_members_by_slot():
    layout = BindingLayout(topology_of(ORDERS))
    groups = {g.group.key: g.members for g in layout.group_slots["orders"]}
    assert groups == {"anycast:orders": (3, 4), "divert:orders:r": (0, 2)}
    orders = layout.slots["orders"]
    taking = {b.name: (b.group, b.member) for b in orders if b.group is not None}
    anycast = [g.group.key for g in layout.group_slots["orders"]].index("anycast:orders")
    assert taking["o1"] == (anycast, 0) and taking["o2"] == (anycast, 1)
    assert taking["first"][1] == 0 and taking["second"][1] == 1
    assert orders[1].group is None  # an exclusive divert takes no turn


def test_a_filter_shared_by_bindings_is_one_filter_however_many_addresses():
    addresses = "".join(
        f'<address name="a{i}"><anycast><queue name="q{i}">'
        "<filter string=\"kind = 'x'\"/></queue></anycast></address>"
        for i in range(500)
    )
    diverts = "".join(
        f'<divert name="d{i}"><address>a{i}</address><forwarding-address>audit</forwarding-address>'
        '<filter string="amount &gt; 5"/></divert>'
        for i in range(500)
    )
    layout = BindingLayout(
        topology_of(f"<addresses>{addresses}</addresses><diverts>{diverts}</diverts>")
    )
    assert layout.filters == ("amount > 5", "kind = 'x'")
    assert layout.width == 2  # a divert and a queue, whatever the number of addresses
    assert layout.filters_at(0) == [0] and layout.filters_at(1) == [1]


def test_a_copy_s_table_is_the_folder_its_address_names(spark):
    """The table of an address computed in Spark is the folder ``dir(address)`` names
    (SPEC §3): every byte but ``A-Z a-z 0-9 . _ -`` escaped, a leading ``.`` too."""
    names = ["orders", "a/b", ".hidden", "..", "zürich", "注文", "a b*c+d~e=f%g", "x.y_z-1"]
    frame = spark.createDataFrame([(n,) for n in names], "address string")
    found = [r.source for r in frame.select(source_of(F.col("address")).alias("source")).collect()]
    assert found == [address_source(n) for n in names]


def test_a_broker_of_fifty_thousand_addresses_routes_its_messages(spark, tmp_path):
    """The plan does not grow with the broker: 50,000 addresses, each with its queue, plan
    as a few do (it once planned for minutes and ran out of memory)."""
    addresses = "".join(
        f'<address name="a{i}"><anycast><queue name="q{i}"/></anycast></address>'
        for i in range(50_000)
    )
    conf = tmp_path / "broker.xml"
    conf.write_text(broker(f"<addresses>{addresses}</addresses>"), encoding="utf-8")
    lake = Lake.at(tmp_path / "lake")
    for message_id, address in ((1, "a7"), (2, "a49999")):
        sent = pa.array([datetime(2026, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
        table = pa.table({"message_id": [message_id], "address": [address], "sent_at": sent})
        write_deltalake(lake.table(address_source(address)), table)
    argv = ["--conf", str(conf), "--lake", lake.root, "--available-now"]
    assert route.main(argv, spark=spark, out=io.StringIO()) == 0
    queued = sorted((r["queue"], r["message_id"], r["status"]) for r in rows(lake.queue_messages))
    assert queued == [("q49999", 2, "PENDING"), ("q7", 1, "PENDING")]
