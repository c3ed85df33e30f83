"""Where messages can go: queues (declared and auto-created), diverts, settings per address.

The queues an auto-create setting can make (SPEC §5.4) are the closure of the
configuration, computed once: as in Artemis (``QueueImpl.createResources``), a queue
on address A whose settings auto-create resources can get ``<prefix>A<suffix>`` on
A's dead-letter (expiry) address, a MULTICAST queue with the filter
``_AMQ_ORIG_ADDRESS = 'A'``, also when A is the dead-letter address itself (an expiry
queue not: a queue on its own expiry address expires nothing, :attr:`Topology.expiry_disabled`),
and not when a queue of that name already exists.

Such a queue exists only from the moment Artemis creates it: the first dead letter
(expiry) of a message of A (``QueueImpl.sendToDeadLetterAddress`` and
``QueueImpl.expire`` create the resources, then look up the bindings). A moment is
an event time and, within that instant, the SPEC §5.4 order of what happens then
(:data:`RANKS`): a queue created by a delivery at t exists for the deliveries and
management rows at t, not for the message rows or expiries at t. The creation
moments are the job's state (``created``: queue name -> (epoch µs, rank), see
:class:`routing.broker.state.JobState`); every question about bindings here takes them.
A queue declared in broker.xml exists from the start.

Example::

    topology = Topology(load_config("conf/broker.xml"))
    topology.queues["DLQ.orders"].address    # the dead-letter address of 'orders'
    topology.creates(DEAD_LETTER, "orders")  # 'DLQ.orders': what its dead letters create
    topology.bound_since("DLA", created)     # when DLA got its first auto-created queue
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from routing.broker.config import ANYCAST, MULTICAST, BrokerConfig, DivertConfig
from routing.broker.ids import DEAD_LETTER, EXPIRY
from routing.broker.settings import AddressSettings

ADDRESS = "ADDRESS"
"""The kind of a queue created for an address (``Queue.auto_created``), beside the
dead-letter and expiry resources (:data:`routing.broker.ids.DEAD_LETTER`, ``EXPIRY``)."""

MESSAGE_RANK, EXPIRY_RANK, DELIVERY_RANK, MANAGEMENT_RANK = 0, 1, 2, 3
RANKS = 4
"""What happens at one instant applies in this order (SPEC §5.4): message rows (and the
copies routing makes of them), expiries, deliveries, management rows. A copy made by an
event has its rank. The ranks of events are :mod:`routing.plan.deliveries`' kinds."""

Created = Mapping[str, tuple[int, int]]
"""Auto-created queue -> the moment it was created: (epoch µs, rank)."""
CreatedHere = tuple[tuple[str, tuple[int, int]], ...]
"""The moments of :data:`Created` a topology's queues have, in name order (a key)."""


def moment_of(created: tuple[int, int]) -> int:
    """A moment as one comparable number (what :func:`routing.plan.facts.moment` computes
    for rows)."""
    micros, rank = created
    return micros * RANKS + rank


@dataclass(frozen=True)
class Queue:
    """A queue bound to an address; ``auto_created`` names the resource kind if it is one,
    ``created_by`` the address whose dead letters (expiries) create it."""

    name: str
    address: str
    routing_type: str
    filter: str | None = None
    auto_created: str | None = None  # "DEAD_LETTER" | "EXPIRY" | "ADDRESS" | None
    created_by: str | None = None


def quote(value: str) -> str:
    """A filter string literal (``'`` doubled), so any address name is safe in a filter."""
    return "'" + value.replace("'", "''") + "'"


class Topology:
    """The queues, diverts and settings of a broker configuration, and the queues Artemis
    would create for the addresses in play.

    :param addresses: addresses beside the configuration's that messages are sent to
        (the lake's address tables): each may get a queue named after it (:data:`ADDRESS`).
    """

    def __init__(self, config: BrokerConfig, addresses: Iterable[str] = ()) -> None:
        self.config = config
        self.extra_addresses = frozenset(addresses)
        queues = {
            q.name: Queue(q.name, q.address, q.routing_type, q.filter)
            for q in config.queues.values()
        }
        for queue in self._address_queues(queues):
            queues[queue.name] = queue
        frontier = sorted({q.address for q in queues.values()})
        seen: set[str] = set()
        while frontier:
            address = frontier.pop(0)
            if address in seen:
                continue
            seen.add(address)
            for queue in self._resources(address):
                if queue.name not in queues:
                    queues[queue.name] = queue
                    frontier.append(queue.address)
        self.queues: Mapping[str, Queue] = dict(sorted(queues.items()))

    def _address_queues(self, declared: Mapping[str, Queue]) -> Iterable[Queue]:
        """The queue Artemis creates for an ANYCAST message sent to an address without a
        queue (``ServerSessionImpl.checkAutoCreate``, SPEC §4): named after the address,
        ANYCAST, no filter, for each address a producer's message or a divert copy of one
        can be sent to (the configuration's and :attr:`extra_addresses`) that has no
        declared queue, whose settings auto-create queues (and the address, if
        ``broker.xml`` does not declare it), and whose name no declared queue has."""
        bound = {q.address for q in declared.values()}
        candidates = set(self.config.addresses) | set(self.extra_addresses)
        for divert in self.config.diverts:
            candidates.add(divert.address)
            candidates.update(divert.forwarding_addresses)
        for address in sorted(candidates - bound):
            settings = self.settings(address)
            declared_address = address in self.config.addresses
            if (
                settings.auto_create_queues
                and (declared_address or settings.auto_create_addresses)
                and address not in declared
            ):
                yield Queue(address, address, ANYCAST, None, ADDRESS, address)

    def _resources(self, address: str) -> Iterable[Queue]:
        settings = self.settings(address)
        # also on the dead-letter address itself (Artemis 2.44's createDeadLetterResources
        # does: a dead letter of a DLA's own queue creates DLQ.<DLA> there)
        if settings.auto_create_dead_letter_resources and settings.dead_letter_address:
            yield Queue(
                settings.dead_letter_queue_prefix + address + settings.dead_letter_queue_suffix,
                settings.dead_letter_address,
                MULTICAST,
                f"_AMQ_ORIG_ADDRESS = {quote(address)}",
                DEAD_LETTER,
                address,
            )
        if settings.auto_create_expiry_resources and settings.expiry_address not in (None, address):
            yield Queue(
                settings.expiry_queue_prefix + address + settings.expiry_queue_suffix,
                settings.expiry_address,
                MULTICAST,
                f"_AMQ_ORIG_ADDRESS = {quote(address)}",
                EXPIRY,
                address,
            )

    def settings(self, address: str) -> AddressSettings:
        """Merged address settings (SPEC §4); the repository caches them per address."""
        return self.config.settings_for(address)

    @cached_property
    def _queues_by_address(self) -> dict[str, tuple[Queue, ...]]:
        out: dict[str, list[Queue]] = {}
        for queue in self.queues.values():
            out.setdefault(queue.address, []).append(queue)
        # declaration order for declared queues, auto-created ones after them
        declared = list(self.config.queues)
        rank = {name: i for i, name in enumerate(declared)}
        return {
            a: tuple(
                sorted(qs, key=lambda q: (q.auto_created is not None, rank.get(q.name, 0), q.name))
            )
            for a, qs in out.items()
        }

    @cached_property
    def _diverts_by_address(self) -> dict[str, tuple[DivertConfig, ...]]:
        out: dict[str, list[DivertConfig]] = {}
        for divert in self.config.diverts:
            out.setdefault(divert.address, []).append(divert)
        return {a: tuple(ds) for a, ds in out.items()}

    def queues_on(self, address: str) -> tuple[Queue, ...]:
        return self._queues_by_address.get(address, ())

    def diverts_on(self, address: str) -> tuple[DivertConfig, ...]:
        return self._diverts_by_address.get(address, ())

    @cached_property
    def auto_queues(self) -> tuple[Queue, ...]:
        """The queues an auto-create setting can make, by name."""
        return tuple(q for q in self.queues.values() if q.auto_created is not None)

    @cached_property
    def _created_by(self) -> dict[tuple[str, str], str]:
        return {
            (q.auto_created, q.created_by): q.name
            for q in self.auto_queues
            if q.auto_created is not None and q.created_by is not None  # both set when auto
        }

    def creates(self, kind: str, address: str) -> str | None:
        """The queue a dead letter (``kind`` DEAD_LETTER) or an expiry (EXPIRY) of a message
        of ``address`` creates, if it does not exist yet (Artemis ``createResources``)."""
        return self._created_by.get((kind, address))

    def creations(self, kind: str) -> dict[str, str]:
        """Address -> the queue its dead letters (expiries) create."""
        return {a: name for (k, a), name in sorted(self._created_by.items()) if k == kind}

    @cached_property
    def expiry_disabled(self) -> tuple[str, ...]:
        """The queues that expire no message: their address is its own expiry address.
        Artemis's expiry scanner skips them (``QueueImpl.isExpiryDisabled``: expiring into
        the same address is redundant); a copy entering such an address with an
        ``expiry-delay`` would otherwise expire into it again and again."""
        return tuple(
            q.name
            for q in self.queues.values()
            if self.settings(q.address).expiry_address == q.address
        )

    def declared_bindings(self, address: str | None) -> bool:
        """The address has a binding from the start: a declared queue or a divert (Artemis
        counts both as an address's bindings)."""
        if address is None:
            return False
        declared = any(q.auto_created is None for q in self.queues_on(address))
        return declared or bool(self.diverts_on(address))

    def created_here(self, created: Created) -> CreatedHere:
        """The moments ``created`` gives this topology's queues, in name order: all a frame
        built from ``created`` depends on, as a key to keep it by."""
        return tuple(sorted((n, created[n]) for n in created if n in self.queues))

    def bound_since(self, address: str | None, created: Created) -> int | None:
        """The moment (:func:`moment_of`) ``address`` got its first auto-created queue,
        None if none yet."""
        moments = [
            moment_of(created[q.name])
            for q in self.queues_on(address or "")
            if q.auto_created is not None and q.name in created
        ]
        return min(moments, default=None)

    @cached_property
    def routed_addresses(self) -> tuple[str, ...]:
        """Addresses with a queue or a divert: the only ones routing has to look at."""
        return tuple(sorted(set(self._queues_by_address) | set(self._diverts_by_address)))

    @cached_property
    def addresses(self) -> frozenset[str]:
        """Every address a copy can be sent to, plus the configured ones."""
        names = set(self.config.addresses) | set(self.routed_addresses) | self.extra_addresses
        for divert in self.config.diverts:
            names.update(divert.forwarding_addresses)
        for address in list(names):
            settings = self.settings(address)
            names.update(a for a in (settings.dead_letter_address, settings.expiry_address) if a)
        return frozenset(names)

    def queue_fact_rows(self, created: Created) -> list[tuple[object, ...]]:
        """One row per queue (:data:`routing.plan.facts.QUEUE_FACTS`): what the delivery
        fold needs, for a broadcast join (:func:`routing.plan.facts.queue_facts`).

        ``dla_has_bindings``: the dead-letter address has a binding whenever a message of
        this queue is dead-lettered: a declared one, or the queue the dead letter itself
        creates (Artemis creates the resources, then looks up the bindings);
        ``dla_bound_since``: from when it has one anyway, through another address's
        auto-created queue (the moment, :func:`moment_of`). The same for the expiry address.
        """
        rows: list[tuple[object, ...]] = []
        for queue in self.queues.values():
            s = self.settings(queue.address)
            rows.append(
                (
                    queue.name,
                    queue.address,
                    s.max_delivery_attempts,
                    s.redelivery_delay,
                    float(s.redelivery_delay_multiplier),
                    s.max_redelivery_delay,
                    s.dead_letter_address,
                    self.declared_bindings(s.dead_letter_address)
                    or self.creates(DEAD_LETTER, queue.address) is not None,
                    self.bound_since(s.dead_letter_address, created),
                    s.expiry_address,
                    self.declared_bindings(s.expiry_address)
                    or self.creates(EXPIRY, queue.address) is not None,
                    self.bound_since(s.expiry_address, created),
                )
            )
        return rows
