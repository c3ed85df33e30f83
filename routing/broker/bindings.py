"""Each address's bindings laid out in slots: the topology as data (issue 72, DESIGN).

Artemis routes a message by walking the bindings of its address (``BindingsImpl.route``):
its diverts, then its queues. Routing here does the same with one row per address,
joined to the message rows: slot ``j`` of an address holds its ``j``-th binding (its
diverts in ``broker.xml`` order, then its queues in :meth:`Topology.queues_on` order),
and every address has as many slots as the address with the most bindings. A row then
evaluates the filters of its own address's bindings only, whatever the number of
addresses, and each distinct filter text is compiled once (:attr:`BindingLayout.filters`).

Turn groups (the anycast queues of an address, or its non-exclusive diverts sharing a
routing-name) are laid out the same way: group slot ``s`` of an address holds its
``s``-th group, whose members are binding slots.

Example::

    layout = BindingLayout(Topology(load_config("conf/broker.xml")))
    layout.slots["orders"][0].name       # the first binding of 'orders'
    layout.filters                       # every distinct filter text, by id
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from routing.broker.config import ANYCAST, MULTICAST, DivertConfig
from routing.broker.topology import Created, Queue, Topology, moment_of

EXCLUSIVE_DIVERT, NON_EXCLUSIVE_DIVERT, MULTICAST_QUEUE, ANYCAST_QUEUE = "X", "D", "M", "A"
"""The kinds of binding a slot holds."""


@dataclass(frozen=True)
class TurnGroup:
    """Bindings of one address taking turns: the anycast queues, or diverts sharing a name."""

    key: str
    address: str
    members: tuple[str, ...]
    filters: tuple[str | None, ...]
    anycast: bool


@dataclass(frozen=True)
class Binding:
    """One binding in its address's slot: a divert or a queue.

    ``filter``: the id of its filter text in :attr:`BindingLayout.filters` (None: no
    filter); ``group``: its turn group's slot at the address, and ``member`` its index in
    that group (None: it takes no turn); ``auto``: an auto-created queue, bound only from
    its creation.
    """

    kind: str
    name: str
    filter: int | None
    group: int | None
    member: int | None
    auto: bool
    divert: DivertConfig | None


@dataclass(frozen=True)
class GroupSlot:
    """A turn group in its address's group slot: ``members`` are binding slots, in turn order."""

    group: TurnGroup
    members: tuple[int, ...]


def turn_groups(topology: Topology) -> list[TurnGroup]:
    """The turn groups of a topology: an address's anycast queues when it has two or more,
    and its non-exclusive diverts sharing a routing-name, two or more."""
    groups = []
    for address in topology.routed_addresses:
        anycast = [q for q in topology.queues_on(address) if q.routing_type == ANYCAST]
        if len(anycast) >= 2:
            groups.append(_group(f"anycast:{address}", address, anycast, anycast=True))
        named: dict[str, list[DivertConfig]] = {}
        for divert in topology.diverts_on(address):
            if not divert.exclusive and divert.routing_name is not None:
                named.setdefault(divert.routing_name, []).append(divert)
        for name, diverts in named.items():
            if len(diverts) >= 2:
                groups.append(_group(f"divert:{address}:{name}", address, diverts, anycast=False))
    return groups


def _group(
    key: str, address: str, members: Sequence[Queue | DivertConfig], *, anycast: bool
) -> TurnGroup:
    names = tuple(m.name for m in members)
    return TurnGroup(key, address, names, tuple(m.filter for m in members), anycast)


class BindingLayout:
    """Every address's bindings and turn groups in slots, and the distinct filter texts.

    :param addresses: every address a row can be at (the configuration's and the lake's).
    """

    def __init__(self, topology: Topology, addresses: Iterable[str] = ()) -> None:
        self.topology = topology
        self.addresses = sorted(set(addresses) | set(topology.addresses))
        self.groups = turn_groups(topology)
        texts = sorted(
            {d.filter for d in topology.config.diverts if d.filter is not None}
            | {q.filter for q in topology.queues.values() if q.filter is not None}
        )
        self.filters: tuple[str, ...] = tuple(texts)
        self._filter_ids = {text: i for i, text in enumerate(texts)}

    @cached_property
    def group_slots(self) -> dict[str, list[GroupSlot]]:
        """Address -> its turn groups, in slots."""
        out: dict[str, list[GroupSlot]] = {}
        for group in self.groups:
            wanted = ANYCAST_QUEUE if group.anycast else NON_EXCLUSIVE_DIVERT
            slot_of = {
                b.name: j
                for j, b in enumerate(self._bindings_of(group.address))
                if b.kind == wanted
            }
            members = tuple(slot_of[m] for m in group.members)
            out.setdefault(group.address, []).append(GroupSlot(group, members))
        return out

    @cached_property
    def slots(self) -> dict[str, tuple[Binding, ...]]:
        """Address -> its bindings, in slots (only addresses with a binding)."""
        groups = self.group_slots
        out = {}
        for address in self.topology.routed_addresses:
            turns = {
                member: (s, i)
                for s, slot in enumerate(groups.get(address, ()))
                for i, member in enumerate(slot.members)
            }
            out[address] = tuple(
                replace(b, group=turns[j][0], member=turns[j][1]) if j in turns else b
                for j, b in enumerate(self._bindings_of(address))
            )
        return out

    def _bindings_of(self, address: str) -> list[Binding]:
        """``address``'s bindings in slot order, before their turn groups are known."""
        out = []
        for divert in self.topology.diverts_on(address):
            kind = EXCLUSIVE_DIVERT if divert.exclusive else NON_EXCLUSIVE_DIVERT
            out.append(
                Binding(kind, divert.name, self._id(divert.filter), None, None, False, divert)
            )
        for queue in self.topology.queues_on(address):
            kind = MULTICAST_QUEUE if queue.routing_type == MULTICAST else ANYCAST_QUEUE
            auto = queue.auto_created is not None
            out.append(Binding(kind, queue.name, self._id(queue.filter), None, None, auto, None))
        return out

    def _id(self, text: str | None) -> int | None:
        return None if text is None else self._filter_ids[text]

    @cached_property
    def width(self) -> int:
        """Binding slots every address has: the most bindings an address has."""
        return max((len(b) for b in self.slots.values()), default=0)

    @cached_property
    def group_width(self) -> int:
        """Group slots every address has: the most turn groups an address has."""
        return max((len(g) for g in self.group_slots.values()), default=0)

    @cached_property
    def members_width(self) -> int:
        """Members every group slot has room for: the most members a turn group has."""
        return max((len(g.members) for g in self.groups), default=0)

    def kinds_at(self, slot: int) -> frozenset[str]:
        """The kinds of binding some address holds in ``slot``."""
        return frozenset(b[slot].kind for b in self.slots.values() if len(b) > slot)

    def filters_at(self, slot: int) -> list[int]:
        """The filter ids some address's binding in ``slot`` has."""
        return sorted(
            {f for b in self.slots.values() if len(b) > slot and (f := b[slot].filter) is not None}
        )

    def group_slots_at(self, slot: int) -> list[int]:
        """The group slots a binding in ``slot`` takes turns in, at some address."""
        return sorted(
            {g for b in self.slots.values() if len(b) > slot and (g := b[slot].group) is not None}
        )

    @cached_property
    def no_route_dlas(self) -> dict[str, str]:
        """Each address whose rows with no route go to a dead-letter address, and that
        address: send-to-dla-on-no-route with a dead-letter address set, on an address
        with no declared binding (Artemis's ``PostOfficeImpl.route`` sends to the DLA only
        when the address has no binding at all; an auto-created queue binds it from its
        creation)."""
        dlas = {}
        for address in self.addresses:
            settings = self.topology.settings(address)
            if (
                settings.send_to_dla_on_no_route
                and settings.dead_letter_address
                and not self.topology.declared_bindings(address)
            ):
                dlas[address] = settings.dead_letter_address
        return dlas

    @cached_property
    def auto_addresses(self) -> frozenset[str]:
        """The addresses with an auto-created queue."""
        return frozenset(a for a, bs in self.slots.items() if any(b.auto for b in bs))

    def since(self, binding: Binding, created: Created) -> int | None:
        """When ``binding`` (an auto-created queue) was created (:func:`moment_of`; None:
        not yet, or not an auto-created queue)."""
        if not binding.auto or binding.name not in created:
            return None
        return moment_of(created[binding.name])
