"""The binding table: every address's bindings, turn groups and settings as one row of a
small frame that each routing pass joins to its rows (broadcast).

The plan's expressions then have the size of one address's bindings (the most any has,
:attr:`BindingLayout.width`) and of the distinct filters, not of the broker: a
thousand addresses with a divert each plan as one does. Each slot's filter is a ``CASE``
on the filter id the row's binding has there, so a row evaluates only its own address's
filters, in generated code. The table holds the moments the auto-created queues were
created (``_b{j}_since``): it is a frame of the batch, not a literal of the plan.

Columns (``j`` a binding slot, ``s`` a group slot, ``i`` a member):

- ``_a_source``: the address's table; ``_a_no_expiry``, ``_a_expiry_delay``,
  ``_a_min_expiry_delay``, ``_a_max_expiry_delay``: its expiry settings;
- ``_a_no_route_dla``: where its rows with no route go (null: dropped);
  ``_a_refuses_all`` / ``_a_refuses_anycast``: a producer's row there is refused
  (the address, or its queue, may not be created); ``_a_creates``: the queue its first
  ANYCAST row creates; ``_a_queues``: the queues bound to it;
- ``_b{j}_kind`` (:data:`routing.broker.bindings.EXCLUSIVE_DIVERT` ...), ``_b{j}_name``,
  ``_b{j}_filter``, ``_b{j}_group``, ``_b{j}_member``, ``_b{j}_auto``, ``_b{j}_since``,
  ``_b{j}_divert`` (name, routing_type, forwarding);
- ``_g{s}_key``, ``_g{s}_width``, ``_g{s}_member{i}`` (the member's binding slot).
"""

from __future__ import annotations

from functools import cached_property

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from routing.broker.bindings import BindingLayout
from routing.broker.layout import ADDRESSES, address_source
from routing.broker.topology import ADDRESS, Created, CreatedHere
from routing.plan._columns import local_frame
from routing.plan.filters import matches

SOURCE = "_a_source"
NO_EXPIRY, EXPIRY_DELAY = "_a_no_expiry", "_a_expiry_delay"
MIN_EXPIRY_DELAY, MAX_EXPIRY_DELAY = "_a_min_expiry_delay", "_a_max_expiry_delay"
NO_ROUTE_DLA = "_a_no_route_dla"
REFUSES_ALL, REFUSES_ANYCAST = "_a_refuses_all", "_a_refuses_anycast"
CREATES = "_a_creates"
QUEUES = "_a_queues"

DIVERT_TYPE = StructType(
    [
        StructField("name", StringType()),
        StructField("routing_type", StringType()),
        StructField("forwarding", ArrayType(StringType())),
    ]
)


def source_of(address: Column) -> Column:
    """The table (``addresses/<dir>``) of the address in ``address``, computed per row:
    :func:`routing.broker.layout.address_dir` as Spark expressions (a map of every
    address would be a literal as large as the broker, searched row by row).

    ``url_encode`` keeps the bytes ``dir`` keeps and writes the others ``%XX``, but for
    ``*`` (kept) and the space (``+``): both are written as ``dir`` writes them, and a
    leading ``.`` as ``=2E``.
    """
    encoded = F.replace(F.url_encode(address), F.lit("%"), F.lit("="))
    encoded = F.replace(F.replace(encoded, F.lit("*"), F.lit("=2A")), F.lit("+"), F.lit("=20"))
    encoded = F.regexp_replace(encoded, r"^\.", "=2E")
    return F.concat(F.lit(f"{ADDRESSES}/"), encoded)


def binding(slot: int, part: str) -> Column:
    """Column ``part`` of the row's binding in ``slot`` (``kind``, ``name``, ``filter``...)."""
    return F.col(f"_b{slot}_{part}")


def matched(slot: int) -> Column:
    """The row matches the filter of its binding in ``slot`` (:meth:`BindingTable.matched`)."""
    return F.col(f"_m{slot}")


def group(slot: int, part: str) -> Column:
    """Column ``part`` of the row's turn group in group ``slot`` (``key``, ``width``, ``member0``...)."""
    return F.col(f"_g{slot}_{part}")


class BindingTable:
    """A :class:`BindingLayout` as frames, one per set of creation moments."""

    def __init__(self, layout: BindingLayout) -> None:
        self.layout = layout
        self._frames: dict[CreatedHere, DataFrame] = {}

    @cached_property
    def schema(self) -> StructType:
        fields = [
            StructField("address", StringType()),
            StructField(SOURCE, StringType()),
            StructField(NO_EXPIRY, BooleanType()),
            StructField(EXPIRY_DELAY, LongType()),
            StructField(MIN_EXPIRY_DELAY, LongType()),
            StructField(MAX_EXPIRY_DELAY, LongType()),
            StructField(NO_ROUTE_DLA, StringType()),
            StructField(REFUSES_ALL, BooleanType()),
            StructField(REFUSES_ANYCAST, BooleanType()),
            StructField(CREATES, StringType()),
            StructField(QUEUES, ArrayType(StringType())),
        ]
        for j in range(self.layout.width):
            fields += [
                StructField(f"_b{j}_kind", StringType()),
                StructField(f"_b{j}_name", StringType()),
                StructField(f"_b{j}_filter", IntegerType()),
                StructField(f"_b{j}_group", IntegerType()),
                StructField(f"_b{j}_member", IntegerType()),
                StructField(f"_b{j}_auto", BooleanType()),
                StructField(f"_b{j}_since", LongType()),
                StructField(f"_b{j}_divert", DIVERT_TYPE),
            ]
        for s in range(self.layout.group_width):
            fields += [
                StructField(f"_g{s}_key", StringType()),
                StructField(f"_g{s}_width", IntegerType()),
            ]
            fields += [
                StructField(f"_g{s}_member{i}", IntegerType())
                for i in range(self.layout.members_width)
            ]
        return StructType(fields)

    def rows(self, created: Created) -> list[tuple[object, ...]]:
        """The table's rows, the auto-created queues created as ``created`` says."""
        layout, topology = self.layout, self.layout.topology
        creates = topology.creations(ADDRESS)
        rows = []
        for address in layout.addresses:
            settings = topology.settings(address)
            row: list[object] = [
                address,
                address_source(address),
                settings.no_expiry,
                settings.expiry_delay,
                settings.min_expiry_delay,
                settings.max_expiry_delay,
                layout.no_route_dlas.get(address),
                address not in topology.config.addresses and not settings.auto_create_addresses,
                not settings.auto_create_queues,
                creates.get(address),
                [q.name for q in topology.queues_on(address)],
            ]
            bindings = layout.slots.get(address, ())
            for j in range(layout.width):
                if j >= len(bindings):
                    row += [None] * 8
                    continue
                b = bindings[j]
                divert = (
                    None
                    if b.divert is None
                    else (b.divert.name, b.divert.routing_type, list(b.divert.forwarding_addresses))
                )
                since = layout.since(b, created)
                row += [b.kind, b.name, b.filter, b.group, b.member, b.auto, since, divert]
            groups = layout.group_slots.get(address, [])
            for s in range(layout.group_width):
                if s >= len(groups):
                    row += [None] * (2 + layout.members_width)
                    continue
                members = list(groups[s].members)
                row += [groups[s].group.key, len(members)]
                row += members + [None] * (layout.members_width - len(members))
            rows.append(tuple(row))
        return rows

    def frame(self, spark: SparkSession, created: Created) -> DataFrame:
        """The table, the auto-created queues created as ``created`` says (kept per set of
        moments: they change a few times in a job's life)."""
        key = self.layout.topology.created_here(created)
        if key not in self._frames:
            self._frames[key] = local_frame(spark, self.rows(created), self.schema)
        return self._frames[key]

    def matched(self) -> dict[str, Column]:
        """``_m{j}``: the row matches the filter of its binding in slot ``j``: a ``CASE`` on
        the filter id over the filters some address has in that slot (no filter: true)."""
        out = {}
        for j in range(self.layout.width):
            expression = None
            for i in self.layout.filters_at(j):
                condition = binding(j, "filter") == F.lit(i)
                value = matches(self.layout.filters[i])
                expression = (
                    F.when(condition, value)
                    if expression is None
                    else expression.when(condition, value)
                )
            out[f"_m{j}"] = F.lit(True) if expression is None else expression.otherwise(True)
        return out
