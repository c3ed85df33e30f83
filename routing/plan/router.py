"""Routing message rows: diverts, then the queues bound to the address (SPEC §5.2).

For each row entering an address (Artemis ``BindingsImpl.route``):

1. its expiry settings apply (:mod:`routing.plan.expiry`);
2. every matching exclusive divert fires; if any did, the row goes nowhere else;
3. otherwise every matching non-exclusive divert fires (diverts sharing a
   routing-name take turns, :mod:`routing.plan.turns`), and the row goes to every
   matching MULTICAST queue and to one ANYCAST queue (turns again), each only if
   the queue's filter matches and its kind matches the row's routing type (null
   matches both);
4. a MOVE copy (``to_queue`` set) goes to that queue only; a RETRY copy with
   ``to_queue`` meets its address's exclusive diverts first, then goes to that queue
   if it is one of its address's (Artemis routes to the queue's id: one of another
   address takes nothing); a RETRY copy without ``to_queue`` is routed like any row;
5. a row that reached no queue and fired no divert is dropped (``NO_ROUTE``) or,
   on an address with no binding at all and ``send-to-dla-on-no-route``, sent on to
   the dead-letter address once: the message itself, same id (a row that finds no
   route there is dropped: Artemis's ``sendToDLAHint``).

Divert and dead-letter copies are routed in further passes until none is left; a
copy that would be the 65th divert hop is not made and the row is rejected.

An auto-created queue is a binding only from its creation (``created``, SPEC §5.4 and
docs/DESIGN.md): a row whose moment (``sent_at``, then ``_rank``: producer rows and
the copies routing makes of them first, then the copies of expiries, deliveries,
management rows) is earlier does not enter it, and does not count it as a route.

Internal columns carried with the rows: ``_hops`` (divert hops so far),
``_dla_hint`` (a send-to-dla-on-no-route copy), ``_source`` (the table the row is
in, for ``rejected``), ``_session`` (a producer's row or a divert copy of one, routed
with the producer's session in Artemis: it creates addresses and queues), and with
auto-created queues ``_rank`` (the row's rank at its instant).

An ANYCAST row of a producer's session at an address without any queue creates a queue
named after the address (SPEC §4, ``auto-create-queues``): the queue exists from the
moment of the first such row (:meth:`Router.creators` finds it); a row without the
session creates nothing, and with the settings false the row has no route.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.broker.bindings import (
    ANYCAST_QUEUE,
    EXCLUSIVE_DIVERT,
    MULTICAST_QUEUE,
    NON_EXCLUSIVE_DIVERT,
    BindingLayout,
)
from routing.broker.config import ANYCAST, MULTICAST
from routing.broker.ids import DEAD_LETTER, DIVERT, EXPIRY, MOVE, RETRY
from routing.broker.topology import ADDRESS, MESSAGE_RANK, Created, Topology
from routing.plan import bindings, journal, schemas
from routing.plan._columns import (
    case_of,
    chosen_values,
    empty_array,
    literal_map,
    union_all,
    union_of,
)
from routing.plan.bindings import BindingTable
from routing.plan.copies import make_copies
from routing.plan.expiry import expiration_entering, has_expiry_settings
from routing.plan.facts import QueueFacts, moment
from routing.plan.scratch import Scratch
from routing.plan.turns import take_turns

MAX_HOPS = 64
CHUNK = 8  # passes routed lazily between emptiness checks when the copy graph has a cycle
QUEUE_ROW = schemas.QUEUE_MESSAGE.names

HOPS, DLA_HINT, SOURCE, RANK, SESSION = "_hops", "_dla_hint", "_source", "_rank", "_session"
MOVES = (DEAD_LETTER, EXPIRY, MOVE, RETRY)
"""The copies Artemis makes by moving a message out of a queue (``QueueImpl.move``)."""
INTERNAL = (HOPS, DLA_HINT, SOURCE, SESSION)
"""What a row entering routing carries beside its message columns (and :data:`RANK`, with
auto-created queues): see the module's docstring. :func:`entering` makes them."""

# a pass's own columns (none leaves this module)
_EXCLUSIVE = "_exclusive"  # the row fires an exclusive divert
_FIRED = "_fired"  # the diverts it fires
_QUEUES = "_queues"  # the queues it enters
_DLA = "_dla"  # its no-route dead-letter address
_MADE_EXPIRATION = "_made_expiration"  # a copy's expiration as made, before its address's settings


def entering(source: Column, rank: Column | None = None, *, producer: bool) -> list[Column]:
    """The :data:`INTERNAL` columns (and :data:`RANK`) of a row that enters routing from
    outside it, a producer's row or an event's copy: no divert hop yet, no dead-letter hint.

    :param source: the table the row is in.
    :param rank: its rank at its instant (None: leave :data:`RANK` out, a producer row).
    :param producer: a producer's row (its divert copies inherit it): Artemis routes it with
        the producer's session, which creates addresses and queues; a copy of an event, moved
        out of a queue, is routed without one.
    """
    columns = [
        F.lit(0).alias(HOPS),
        F.lit(False).alias(DLA_HINT),
        source.alias(SOURCE),
        F.lit(producer).alias(SESSION),
    ]
    return columns if rank is None else [*columns, rank.alias(RANK)]


@dataclass(frozen=True)
class Decided:
    """A pass's rows with its decisions made (with auto-created queues in the topology)."""

    rows: DataFrame
    at: frozenset[str] | None  # the addresses the rows can be at (None: any)
    created: Created  # the creation moments the pass saw


@dataclass
class Routed:
    """What routing some rows produced (all passes)."""

    positions: DataFrame  # round-robin positions after these rows (turns.POSITIONS)
    entries: list[DataFrame] = field(default_factory=list)  # new queue rows (QUEUE_ROW, RANK)
    journal: list[DataFrame] = field(default_factory=list)
    rejected: list[DataFrame] = field(default_factory=list)
    copies: list[DataFrame] = field(default_factory=list)  # rows to append to address tables
    decided: list[Decided] = field(default_factory=list)  # each pass's, with auto-created queues
    # the turns the rows take, each pass's that plans turns: (group, sent_at, message_id,
    # mask) and the groups it may take them in
    requests: list[DataFrame] = field(default_factory=list)
    turn_groups: list[frozenset[str]] = field(default_factory=list)
    # turns decided before routing (turns.TURNS): a request takes its ``chosen`` there, and
    # the positions are not moved (the batch's are those after the turns foreseen)
    foreseen: DataFrame | None = None


class Router:
    """Routing compiled for one topology and the addresses in play (config + lake tables)."""

    def __init__(self, topology: Topology, addresses: Iterable[str] = ()) -> None:
        self.topology = topology
        self.layout = BindingLayout(topology, addresses)
        self.table = BindingTable(self.layout)
        # the delivery fold's facts, compiled for the same topology and kept as the table is
        self.fold_facts = QueueFacts(topology)
        self.addresses = self.layout.addresses
        self.groups = self.layout.groups
        self.passes = self._passes_needed()
        self.may_set_expiration = any(map(self._sets_expiration, self.addresses))

    # ---- static structure -----------------------------------------------------------

    @cached_property
    def _slots(self) -> dict[str, int]:
        """Each turn group's slot: its index among the groups of its address. A row is at
        one address and takes at most one turn a group, so its turns fit in the columns
        :attr:`_turn_columns` (one per slot), not a map by group."""
        return {
            g.group.key: s
            for groups in self.layout.group_slots.values()
            for s, g in enumerate(groups)
        }

    @cached_property
    def _turn_columns(self) -> list[str]:
        return [f"_turn_{slot}" for slot in range(max(self._slots.values(), default=-1) + 1)]

    def _turn_of(self, slot: int) -> Column:
        """The member of its turn group the row's binding in ``slot`` got (null: no turn
        taken there)."""
        if len(self._turn_columns) == 1:
            return F.col(self._turn_columns[0])
        return case_of(
            bindings.binding(slot, "group").cast("string"),
            {str(s): F.col(c) for s, c in enumerate(self._turn_columns)},
            F.lit(None).cast("int"),
        )

    @cached_property
    def _copy_edges(self) -> dict[str, set[str]]:
        """The addresses a row at an address can be copied to in one pass: divert
        forwarding addresses and the no-route dead-letter address."""
        edges: dict[str, set[str]] = {}
        for divert in self.topology.config.diverts:
            edges.setdefault(divert.address, set()).update(divert.forwarding_addresses)
        for address, dla in self._no_route_dlas.items():
            edges.setdefault(address, set()).add(dla)
        return edges

    @property
    def _no_route_dlas(self) -> dict[str, str]:
        return self.layout.no_route_dlas

    @cached_property
    def _auto_slots(self) -> list[int]:
        """The binding slots where some address has an auto-created queue."""
        return [
            j
            for j in range(self.layout.width)
            if any(len(b) > j and b[j].auto for b in self.layout.slots.values())
        ]

    def _auto_bound(
        self, since: Callable[[int], Column], other_than: Column | None = None
    ) -> Column:
        """The row's address has an auto-created queue by the row's moment (other than
        ``other_than``), the queues created as ``since`` says (the moment column of a slot)."""
        bound = []
        for j in self._auto_slots:
            here = bindings.binding(j, "auto") & self._created_by_then(since(j))
            if other_than is not None:
                here = here & (bindings.binding(j, "name") != other_than)
            bound.append(F.coalesce(here, F.lit(False)))
        return reduce(operator.or_, bound) if bound else F.lit(False)

    def _sets_expiration(self, address: str) -> bool:
        """Entering ``address`` may give a row an expiration or move it (``no-expiry`` only
        clears one)."""
        settings = self.topology.settings(address)
        return has_expiry_settings(settings) and not settings.no_expiry

    def may_set_expiration_from(self, addresses: Iterable[str]) -> bool:
        """Whether rows entering ``addresses``, or a copy routing makes of them (divert and
        no-route dead-letter edges, followed to the end), can get an expiration they did not
        carry: some address on the way has expiry settings."""
        reached: frozenset[str] = frozenset()
        frontier = frozenset(addresses)
        while frontier:
            reached |= frontier
            frontier = self._next_addresses(frontier) - reached
        return any(map(self._sets_expiration, reached))

    def _next_addresses(self, addresses: frozenset[str] | None) -> frozenset[str]:
        """Where the copies made from rows at ``addresses`` (None: any address) are."""
        sources = self._copy_edges if addresses is None else addresses
        return frozenset(t for a in sources for t in self._copy_edges.get(a, ()))

    def _passes_needed(self) -> int | None:
        """Passes that route every copy routing can make, when the graph of divert and
        no-route dead-letter edges between addresses has no cycle (else None)."""
        edges = self._copy_edges
        depth: dict[str, int] = {}
        visiting: set[str] = set()

        def longest(node: str) -> int | None:
            if node in depth:
                return depth[node]
            if node in visiting:
                return None
            visiting.add(node)
            best = 0
            for target in edges.get(node, ()):
                below = longest(target)
                if below is None:
                    return None
                best = max(best, below + 1)
            visiting.discard(node)
            depth[node] = best
            return best

        deepest = 0
        for node in edges:
            found = longest(node)
            if found is None:
                return None
            deepest = max(deepest, found)
        return deepest + 1

    @cached_property
    def _group_widths(self) -> dict[str, int | None]:
        """Turn groups for :func:`routing.plan.turns.take_turns`: the number of bindings of a
        group whose bindings have no filter (a plain rotation), else None."""
        return {
            g.key: len(g.members) if all(f is None for f in g.filters) else None
            for g in self.groups
        }

    # ---- columns ------------------------------------------------------------------------
    # Built once per router and reused by every pass of every batch: a topology's columns
    # take thousands of py4j calls to build (Column objects are immutable, so sharing is safe).

    @staticmethod
    def _takes(kind: str) -> Column:
        """The row may enter a queue of ``kind``: its routing type allows it (null matches
        both), or it is a dead-letter, expiry, MOVE or RETRY copy, which Artemis routes
        with no routing type (``QueueImpl.move``: a ``RoutingContextImpl`` without one;
        ``LocalQueueBinding.isMatchRoutingType`` then takes every queue)."""
        return (
            F.col("routing_type").isNull()
            | (F.col("routing_type") == F.lit(kind))
            | F.col("copy_reason").isin(*MOVES)
        )

    def _slots_holding(self, *kinds: str) -> list[int]:
        """The binding slots where some address has a binding of one of ``kinds``."""
        return [j for j in range(self.layout.width) if self.layout.kinds_at(j) & set(kinds)]

    @cached_property
    def _matched(self) -> dict[str, Column]:
        return self.table.matched()

    @cached_property
    def _exclusive(self) -> Column:
        """The row fires an exclusive divert (and so goes nowhere else on its address)."""
        fired = [
            (bindings.binding(j, "kind") == EXCLUSIVE_DIVERT) & bindings.matched(j)
            for j in self._slots_holding(EXCLUSIVE_DIVERT)
        ]
        if not fired:
            return F.lit(False)
        return self._meets_diverts & F.coalesce(reduce(operator.or_, fired), F.lit(False))

    @cached_property
    def _meets_diverts(self) -> Column:
        """The row meets its address's exclusive diverts: all but MOVE copies (a RETRY
        copy with ``to_queue`` too, Artemis's ``BindingsImpl.route`` tries the exclusive
        bindings before the ids a message is routed to)."""
        return F.col("to_queue").isNull() | (F.col("copy_reason") == F.lit(RETRY))

    @cached_property
    def _to_queue(self) -> Column:
        """The queue a MOVE or RETRY copy goes to (``to_queue``) as an array: empty when
        it is not one of the row's address's (a RETRY to a queue bound elsewhere)."""
        here = F.array_contains(F.col(bindings.QUEUES), F.col("to_queue"))
        return F.when(F.coalesce(here, F.lit(False)), F.array(F.col("to_queue"))).otherwise(
            empty_array("string")
        )

    def _takes_turn(self, slot: int, kind: str) -> Column:
        """The row's binding in ``slot`` is of ``kind``, in a turn group, and the row's turn
        there went to it."""
        member = bindings.binding(slot, "member")
        return (
            (bindings.binding(slot, "kind") == kind)
            & member.isNotNull()
            & (self._turn_of(slot) == member)
        )

    @cached_property
    def _fired(self) -> Column:
        """The diverts a row fires: array of (name, routing_type, forwarding), from the
        bindings of its address (:mod:`routing.plan.bindings`)."""
        choices = []
        for j in self._slots_holding(EXCLUSIVE_DIVERT, NON_EXCLUSIVE_DIVERT):
            kind, member = bindings.binding(j, "kind"), bindings.binding(j, "member")
            cond = (kind == EXCLUSIVE_DIVERT) & bindings.matched(j)
            if NON_EXCLUSIVE_DIVERT in self.layout.kinds_at(j):
                plain = (
                    (kind == NON_EXCLUSIVE_DIVERT)
                    & member.isNull()
                    & F.col("to_queue").isNull()
                    & bindings.matched(j)
                )
                if self.layout.group_slots_at(j):  # a copy with to_queue takes no turn
                    plain = plain | self._takes_turn(j, NON_EXCLUSIVE_DIVERT)
                cond = cond | (~F.col(_EXCLUSIVE) & plain)
            choices.append((cond, bindings.binding(j, "divert")))
        divert = "struct<name:string,routing_type:string,forwarding:array<string>>"
        empty = empty_array(divert)
        return F.when(~self._meets_diverts, empty).otherwise(chosen_values(choices, divert))

    @cached_property
    def _queues(self) -> Column:
        """The queues a row enters, from the bindings of its address."""
        choices = []
        for j in self._slots_holding(MULTICAST_QUEUE, ANYCAST_QUEUE):
            kind, member = bindings.binding(j, "kind"), bindings.binding(j, "member")
            # an auto-created queue is a binding once created
            exists = ~bindings.binding(j, "auto") | self._created_by_then(
                bindings.binding(j, "since")
            )
            offered = (
                (kind == MULTICAST_QUEUE) & self._takes(MULTICAST)
                | (kind == ANYCAST_QUEUE) & member.isNull() & self._takes(ANYCAST)
            ) & bindings.matched(j)
            cond = offered & exists
            if self.layout.group_slots_at(j):
                # a row of another kind uses its turn up (BindingsImpl.getNextBinding)
                cond = cond | self._takes_turn(j, ANYCAST_QUEUE) & self._takes(ANYCAST)
            choices.append((cond, bindings.binding(j, "name")))
        empty = empty_array("string")
        return (
            F.when(F.col(_EXCLUSIVE), empty)
            .when(F.col("to_queue").isNotNull(), self._to_queue)
            .otherwise(chosen_values(choices, "string"))
        )

    def may_see_differently(self, at: Collection[str] | None = None) -> bool:
        """Whether rows at ``at`` (None: anywhere) can be routed differently under other
        creation moments: some address there has an auto-created queue."""
        auto = self.layout.auto_addresses
        return bool(auto) and (at is None or not auto.isdisjoint(at))

    def routes_seen_differently(self, decided: Decided, final: Created) -> DataFrame | None:
        """The rows of a pass (:attr:`Routed.decided`) that would enter an auto-created
        queue or not differently had it been created at the moment ``final`` says (not
        at all: not in it): the rows whose routing those moments would change. None: no
        row can, as none is at an address with an auto-created queue."""
        if not self.may_see_differently(decided.at):
            return None
        spark = decided.rows.sparkSession
        would = self.table.frame(spark, final).select(
            "address", *[F.col(f"_b{j}_since").alias(f"_would_{j}") for j in self._auto_slots]
        )
        rows = self._joined(decided.rows, self.table.frame(spark, decided.created)).join(
            F.broadcast(would), "address", "left"
        )
        changes = []
        for j in self._auto_slots:
            kind = bindings.binding(j, "kind")
            saw = F.coalesce(self._created_by_then(bindings.binding(j, "since")), F.lit(False))
            then = F.coalesce(self._created_by_then(F.col(f"_would_{j}")), F.lit(False))
            offered = (
                (kind == MULTICAST_QUEUE) & self._takes(MULTICAST)
                | (kind == ANYCAST_QUEUE) & self._takes(ANYCAST)
            ) & bindings.matched(j)
            changed = (
                bindings.binding(j, "auto")
                & F.col("to_queue").isNull()
                & ~F.col(_EXCLUSIVE)
                & offered
                & (saw != then)
            )
            changes.append(F.coalesce(changed, F.lit(False)))
        # a row with no route goes to the dead-letter address only while unbound
        bound = self._auto_bound(lambda j: bindings.binding(j, "since"))
        final_bound = self._auto_bound(lambda j: F.col(f"_would_{j}"))
        changes.append(
            F.col(bindings.NO_ROUTE_DLA).isNotNull() & self._meets_diverts & (bound != final_bound)
        )
        return rows.where(reduce(operator.or_, changes))

    @cached_property
    def address_queues(self) -> dict[str, str]:
        """The queues an address's first ANYCAST row of a producer's session creates:
        address -> queue (:data:`routing.broker.topology.ADDRESS`)."""
        return self.topology.creations(ADDRESS)

    def may_create(self, at: Collection[str] | None) -> bool:
        """Whether rows at ``at`` (None: anywhere), or the divert copies routing makes of
        them, can be at an address whose queue they would create."""
        if not self.address_queues or at is None:
            return bool(self.address_queues)
        reached: frozenset[str] = frozenset()
        frontier = frozenset(at)
        while frontier:
            reached |= frontier
            frontier = self._next_addresses(frontier) - reached
        return not reached.isdisjoint(self.address_queues)

    def creators(self, decided: Iterable[Decided]) -> list[tuple[str, tuple[int, int]]]:
        """The address queues the routing passes ``decided`` created, each with the moment
        of the first row that did (one action): an ANYCAST row of a producer's session at
        an address with no queue bound by then (``ServerSessionImpl.checkAutoCreate``)."""
        frames = []
        for d in decided:
            if d.at is not None and d.at.isdisjoint(self.address_queues):
                continue
            rows = self._joined(d.rows, self.table.frame(d.rows.sparkSession, d.created))
            queue = F.col(bindings.CREATES)
            creating = (
                F.col(SESSION)
                & (F.col("routing_type") == F.lit(ANYCAST))
                & queue.isNotNull()
                & ~self._auto_bound(lambda j: bindings.binding(j, "since"), other_than=queue)
            )
            frames.append(
                rows.where(creating).select(
                    queue.alias("queue"), F.unix_micros("sent_at").alias("at"), F.col(RANK)
                )
            )
        found = union_all(frames)
        if found is None:
            return []
        first = found.groupBy("queue").agg(F.min(F.struct("at", RANK)).alias("first"))
        return [(r.queue, (r.first["at"], r.first[RANK])) for r in first.collect()]

    @staticmethod
    def _created_by_then(since: Column) -> Column:
        """An auto-created queue created at moment ``since`` exists for the row (null: not
        created)."""
        return moment(F.col("sent_at"), F.col(RANK)) >= since

    @cached_property
    def _turn_requests(self) -> Column:
        """Per row, the turns it takes: array of (group, mask), a mask of the filters of
        the group's members (every row takes an anycast turn, whatever its routing type:
        SPEC §5.2 step 2)."""
        found = F.array(*[bindings.matched(j) for j in range(self.layout.width)])
        requests = []
        for s in range(self.layout.group_width):
            members = [
                F.get(found, bindings.group(s, f"member{i}"))
                for i in range(self.layout.members_width)
            ]
            mask = F.slice(F.array(*members), F.lit(1), bindings.group(s, "width"))
            key = bindings.group(s, "key")
            requests.append((key.isNotNull(), F.struct(key.alias("group"), mask.alias("mask"))))
        kind = "struct<group:string,mask:array<boolean>>"
        empty = empty_array(kind)
        return F.when(F.col("to_queue").isNotNull() | F.col(_EXCLUSIVE), empty).otherwise(
            chosen_values(requests, kind)
        )

    @cached_property
    def _no_route_dla(self) -> Column:
        """Dead-letter address of rows with no route, where send-to-dla-on-no-route applies:
        the address has no binding at all when the row enters it, and a producer's row
        there is not refused (``checkAutoCreate`` is NOT_FOUND: the producer gets an error
        and no dead-letter address is tried)."""
        bound = self._auto_bound(lambda j: bindings.binding(j, "since"))
        refuses = F.col(bindings.REFUSES_ALL) | (
            F.col(bindings.REFUSES_ANYCAST) & (F.col("routing_type") == F.lit(ANYCAST))
        )
        refused = F.col(SESSION) & F.coalesce(refuses, F.lit(False))
        return F.when(~bound & ~refused, F.col(bindings.NO_ROUTE_DLA))

    @cached_property
    def _expiration(self) -> Column:
        return expiration_entering(
            F.col(bindings.NO_EXPIRY),
            F.col(bindings.EXPIRY_DELAY),
            F.col(bindings.MIN_EXPIRY_DELAY),
            F.col(bindings.MAX_EXPIRY_DELAY),
        )

    def _joined(
        self, rows: DataFrame, table: DataFrame, columns: Mapping[str, Column] | None = None
    ) -> DataFrame:
        """``rows`` with their address's row of the binding table (a copy made by the
        previous pass takes its table, ``_source``, from there), and ``columns`` computed
        from them in the same projection."""
        joined = rows.join(F.broadcast(table), "address", "left")
        source = F.coalesce(F.col(SOURCE), F.col(bindings.SOURCE))
        return joined.withColumns({SOURCE: source, **(columns or {})})

    def _without_table(self, rows: DataFrame) -> DataFrame:
        return rows.drop(*[c for c in self.table.schema.names if c != "address"])

    @staticmethod
    def source_of(address: Column) -> Column:
        """The table (``addresses/<dir>``) of a copy's address."""
        return bindings.source_of(address)

    # ---- passes -------------------------------------------------------------------------

    def foresee(
        self, requests: DataFrame, positions: DataFrame, scratch: Scratch
    ) -> tuple[DataFrame, DataFrame]:
        """The turns of ``requests`` (:attr:`Routed.requests` of every pass of a batch) taken
        from ``positions`` in one order, ``(sent_at, message_id)`` per group: those of a plan
        that knew every request from the start (turns.TURNS), and the positions after them."""
        return take_turns(requests, positions, scratch.keep, self._group_widths)

    def route(
        self,
        rows: DataFrame,
        positions: DataFrame,
        scratch: Scratch,
        created: Created | None = None,
        *,
        fresh: bool = False,
        at: Collection[str] | None = None,
        foreseen: DataFrame | None = None,
    ) -> Routed:
        """Route ``rows`` (message columns + :data:`INTERNAL`) and every copy they lead to.

        Lazy: with no cycle in the copy graph exactly the passes needed are planned; with
        one, passes are planned :data:`CHUNK` at a time until no copy is left (the hop
        cut guarantees an end).

        :param created: auto-created queue -> the moment it was created; one not in it
            does not exist yet. Rows carry ``_rank`` (their rank at their instant,
            :data:`routing.broker.topology.RANKS`); rows without are producer rows (rank 0).
        :param fresh: the rows enter routing here (:func:`entering`: no divert hop yet), so
            the passes before :data:`MAX_HOPS` cut no divert chain.
        :param at: the addresses the rows can be at (None: any), when the caller knows them
            (a batch's facts do for its messages, the action that ends a round for the
            copies it made): the passes then plan no turns, copies or passes that no row
            can need, and none at all for no address.
        :param foreseen: turns decided before routing, in the order of every request the
            batch makes (:attr:`Routed.foreseen`; ``engine.run_batch``).
        """
        result = Routed(positions=positions, foreseen=foreseen)
        # where this pass's rows can be (None: anywhere)
        at = None if at is None else frozenset(at)
        if at is not None and not at:
            return result  # no row to route
        current = rows
        created = dict(created or {})
        table = self.table.frame(rows.sparkSession, created)
        if RANK not in current.columns:
            current = current.withColumn(RANK, F.lit(MESSAGE_RANK))
        number = 0
        while True:
            for _ in range(CHUNK if self.passes is None else self.passes):
                cuts = not fresh or number >= MAX_HOPS
                made = self._pass(current, result, scratch, number, at, table, created, cuts=cuts)
                if made is None:
                    return result  # no row of this pass can make a copy
                current = made
                number += 1
                at = self._next_addresses(at)
            if self.passes is not None:
                # (empty: the last pass's rows are at addresses with no copy edge)
                result.copies.append(current.select(*schemas.MESSAGE.names))
                return result
            if current.isEmpty():
                return result

    def _pass(
        self,
        rows: DataFrame,
        result: Routed,
        scratch: Scratch,
        number: int,
        at: frozenset[str] | None,
        table: DataFrame,
        created: Created,
        *,
        cuts: bool = True,
    ) -> DataFrame | None:
        """Route generation ``number`` of rows (0: the rows given, then the copies of the
        previous pass, which this pass computes once and adds to :attr:`Routed.copies`);
        return the copies they made (the next generation), not yet computed, or None when
        none of the rows can make one.

        ``at``: the addresses the rows can be at (None: any), so a pass of copies at
        addresses without turn groups skips the turns, and a pass at addresses without
        diverts or a no-route dead-letter address plans no copies (the last pass of a copy
        graph without cycles). ``table``: the binding table (:mod:`routing.plan.bindings`),
        the auto-created queues created as ``created`` says. ``cuts``: a row may have made
        :data:`MAX_HOPS` divert hops already (False: none has, :meth:`route`'s ``fresh``).

        A pass's copies are computed by the next pass's first checkpoint, not by one of
        their own: a pass without turns keeps one frame, the rows with their decisions.
        """
        copies = number > 0
        entered = {_MADE_EXPIRATION: F.col("expiration")} if copies else {}
        # one projection: each column computed from the rows as they came
        entered |= {"expiration": self._expiration}
        rows = (
            self._joined(rows, table, entered)
            .withColumns(self._matched)
            .withColumn(_EXCLUSIVE, self._exclusive)
        )
        kept = None  # the rows computed before the turns, which read them too
        turn_groups = frozenset(g.key for g in self.groups if at is None or g.address in at)
        if turn_groups:
            result.turn_groups.append(turn_groups)
            rows = self._without_table(rows.withColumn("_requests", self._turn_requests))
            if copies:  # computed once, not by the turns and again by the decisions
                rows = kept = scratch.keep(rows)
            rows = self._joined(self._with_turns(rows, result, scratch), table)
        else:
            rows = rows.withColumns({c: F.lit(None).cast("int") for c in self._turn_columns})
        decisions = {_FIRED: self._fired, _QUEUES: self._queues, _DLA: self._no_route_dla}
        decided = scratch.keep(self._without_table(rows.withColumns(decisions)))
        if copies:
            result.copies.append((decided if kept is None else kept).select(*self._made))
        if self.topology.auto_queues:
            result.decided.append(Decided(decided, at, created))

        entries = decided.where(F.size(_QUEUES) > 0).select(*self._entry)
        result.entries.append(entries)
        result.journal.append(entries.select(*self._journal[journal.ROUTED]))

        internal = [*INTERNAL, RANK]  # copies keep their row's rank
        made: list[DataFrame] = []
        if self._may_copy(at, self._diverting):
            diverting = decided.where(F.size(_FIRED) > 0)
            if cuts:
                cut = diverting.where(F.col(HOPS) >= MAX_HOPS)
                result.rejected.append(journal.rejected_rows(cut, **self._hop_cut))
            divert_copies = (
                diverting.where(F.col(HOPS) < MAX_HOPS)
                .select("*", F.explode(_FIRED).alias("_divert"))
                .select("*", F.explode("_divert.forwarding").alias("_target"))
                .transform(self._divert_copies)
                .withColumns({HOPS: F.col(HOPS) + 1, DLA_HINT: F.lit(False)})
            )
            made.append(divert_copies.select(*schemas.MESSAGE.names, *internal))

        no_route = decided.where(
            self._meets_diverts
            & ~F.col(_EXCLUSIVE)
            & (F.size(_FIRED) == 0)
            & (F.size(_QUEUES) == 0)
        )
        if self._may_copy(at, self._no_route_dlas):
            to_dla = no_route.where(F.col(_DLA).isNotNull() & ~F.col(DLA_HINT))
            dla_copies = to_dla.transform(self._dead_letter_copies).withColumns(
                # routed on without the producer's session (PostOfficeImpl.maybeSendToDLA)
                {HOPS: F.col(HOPS) + 1, DLA_HINT: F.lit(True), SESSION: F.lit(False)}
            )
            result.journal.append(to_dla.select(*self._journal[journal.DEAD_LETTERED]))
            made.append(dla_copies.select(*schemas.MESSAGE.names, *internal))
        dropped = no_route.where(F.col(_DLA).isNull() | F.col(DLA_HINT))
        result.journal.append(dropped.select(*self._journal[journal.DROPPED]))

        if not made:
            return None
        # their table is their address's, which the next pass joins
        return union_of(made).withColumn(SOURCE, F.lit(None).cast("string"))

    @staticmethod
    def _may_copy(at: frozenset[str] | None, sources: Collection[str]) -> bool:
        """Whether a row at one of ``at`` (None: any address) may be at one of ``sources``."""
        return bool(sources) and (at is None or not at.isdisjoint(sources))

    @cached_property
    def _diverting(self) -> frozenset[str]:
        """The addresses with a divert."""
        return frozenset(d.address for d in self.topology.config.diverts)

    # ---- outputs: built once, selected by every pass of every batch ----------------------

    @cached_property
    def _made(self) -> list[Column]:
        """A copy of the previous pass as it was made (``_made_expiration``), from this pass's
        rows (:meth:`_pass`): what its address table gets."""
        return [
            F.col(_MADE_EXPIRATION).alias(c) if c == "expiration" else F.col(c)
            for c in schemas.MESSAGE.names
        ]

    @cached_property
    def _entry(self) -> list[Column]:
        """The PENDING queue row (QUEUE_ROW) of a row and each of the ``_queues`` it enters
        (one projection, the queues exploded in it), and its :data:`RANK` (at which rank of
        its instant it entered)."""
        return [
            *map(F.col, schemas.MESSAGE.names),
            F.explode(_QUEUES).alias("queue"),
            F.lit(schemas.PENDING).alias("status"),
            F.lit(0).alias("delivery_count"),
            F.lit(None).cast("timestamp").alias("redeliver_at"),
            F.col("sent_at").alias("routed_at"),
            F.col("sent_at").alias("status_at"),
            F.col(RANK),
        ]

    @cached_property
    def _journal(self) -> dict[str, list[Column]]:
        """The journal row of a queue entry (ROUTED) and of a row with no route: copied to
        the dead-letter address in ``_dla`` (DEAD_LETTERED) or DROPPED."""
        no_route = {
            "at": F.col("sent_at"),
            "queue": F.lit(None),
            "delivery_count": F.lit(0),
        }
        return {
            journal.ROUTED: journal.routed_columns(),
            journal.DEAD_LETTERED: journal.journal_columns(
                **no_route,
                event=journal.DEAD_LETTERED,
                details={
                    "reason": F.lit(journal.NO_ROUTE),
                    "to_address": F.col(_DLA),
                    # the message itself goes on: the row in the dead-letter address has its id
                    "copy_id": F.col("message_id").cast("string"),
                },
            ),
            journal.DROPPED: journal.journal_columns(
                **no_route,
                event=journal.DROPPED,
                details={"reason": F.lit(journal.NO_ROUTE), "address": F.col("address")},
            ),
        }

    @cached_property
    def _hop_cut(self) -> dict[str, Column]:
        """The ``rejected`` row of a row that would make a copy past :data:`MAX_HOPS`."""
        return {
            "source": F.col(SOURCE),
            "row": journal.message_json(),
            "reason": F.concat(
                F.lit(f"divert chain longer than {MAX_HOPS} hops: not diverted from "),
                F.col("address"),
            ),
            "at": F.col("sent_at"),
        }

    @cached_property
    def _divert_copies(self) -> Callable[[DataFrame], DataFrame]:
        """Rows with ``_divert`` (a fired divert) and ``_target`` (one of its addresses)
        replaced by their copies."""
        return make_copies(
            F.lit(DIVERT),
            F.col("_divert.name"),
            F.col("_target"),
            F.col("sent_at"),
            routing_type=self._divert_routing_type,
            keep_expiration=True,
        )

    @cached_property
    def _dead_letter_copies(self) -> Callable[[DataFrame], DataFrame]:
        """Rows with no route sent on to the dead-letter address ``_dla``: the message itself
        (same ``message_id``), with breadcrumbs but no ``_AMQ_ORIG_QUEUE``, its routing type
        moved to ``_AMQ_ORIG_ROUTING_TYPE`` (Artemis's ``maybeSendToDLA`` sets none) and its
        expiration cleared (``Message.referenceOriginalMessage``)."""
        return make_copies(
            F.lit(DEAD_LETTER),
            F.lit(None).cast("string"),
            F.col(_DLA),
            F.col("sent_at"),
            routing_type=F.lit(None).cast("string"),
            keep_id=True,
        )

    @cached_property
    def _divert_routing_type(self) -> Column:
        kind = F.col("_divert.routing_type")
        return (
            F.when(kind == F.lit("PASS"), F.col("routing_type"))
            .when(kind.isin(ANYCAST, MULTICAST), kind)
            .otherwise(F.lit(None).cast("string"))
        )

    def _with_turns(self, rows: DataFrame, result: Routed, scratch: Scratch) -> DataFrame:
        requests = (
            rows.where(F.size("_requests") > 0)
            .select("sent_at", "message_id", F.explode("_requests").alias("_r"))
            .select("_r.group", "sent_at", "message_id", "_r.mask")
        )
        result.requests.append(requests)
        if result.foreseen is None:
            turns, result.positions = take_turns(
                requests, result.positions, scratch.keep, self._group_widths
            )
        else:  # a request not foreseen makes the plan one that does not hold: it takes the
            # first binding it matches, so that its row still enters a queue if the plan is kept
            key = ["group", "message_id"]
            first = F.array_position("mask", True).cast("int")
            turns = requests.join(result.foreseen.select(*key, "chosen"), key, "left").select(
                *key, F.coalesce("chosen", F.when(first > 0, first - 1)).alias("chosen")
            )
        taken = turns.where(F.col("chosen").isNotNull())
        if len(self._turn_columns) == 1:  # one group an address: a row takes one turn at most
            chosen = taken.select("message_id", F.col("chosen").alias(self._turn_columns[0]))
        else:  # a cheap aggregate (no map): a group's chosen index in its slot's column
            slot = literal_map(self._slots, "int")[F.col("group")]
            chosen = taken.groupBy("message_id").agg(
                *[
                    F.max(F.when(slot == s, F.col("chosen"))).alias(c)
                    for s, c in enumerate(self._turn_columns)
                ]
            )
        return rows.drop("_requests").join(chosen, "message_id", "left")
