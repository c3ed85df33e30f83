"""Where messages can go: queues (declared and auto-created), diverts, settings per address.

Auto-created dead-letter and expiry queues (SPEC §5.4) exist from the start: they
are the closure of the configuration, computed once, so routing never depends on
when one was first needed (docs/DESIGN.md). As in Artemis
(``QueueImpl.createResources``), a queue on address A whose settings auto-create
resources gets ``<prefix>A<suffix>`` on A's dead-letter (expiry) address, a
MULTICAST queue with the filter ``_AMQ_ORIG_ADDRESS = 'A'``; not when A is that
address itself, and not when a queue of that name already exists.

Example::

    topology = Topology(load_config("conf/broker.xml"))
    topology.queues["DLQ.orders"].address    # the dead-letter address of 'orders'
    topology.has_bindings("DLA")
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from routing.config import BrokerConfig, DivertConfig
from routing.settings import AddressSettings

ANYCAST = "ANYCAST"
MULTICAST = "MULTICAST"


@dataclass(frozen=True)
class Queue:
    """A queue bound to an address; ``auto_created`` names the resource kind if it is one."""

    name: str
    address: str
    routing_type: str
    filter: str | None = None
    auto_created: str | None = None  # "DEAD_LETTER" | "EXPIRY" | None


def quote(value: str) -> str:
    """A filter string literal (``'`` doubled), so any address name is safe in a filter."""
    return "'" + value.replace("'", "''") + "'"


class Topology:
    """The queues, diverts and settings of a broker configuration."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        queues = {
            q.name: Queue(q.name, q.address, q.routing_type, q.filter)
            for q in config.queues.values()
        }
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

    def _resources(self, address: str) -> Iterable[Queue]:
        settings = self.settings(address)
        if settings.auto_create_dead_letter_resources and settings.dead_letter_address not in (
            None,
            address,
        ):
            yield Queue(
                settings.dead_letter_queue_prefix + address + settings.dead_letter_queue_suffix,
                settings.dead_letter_address,
                MULTICAST,
                f"_AMQ_ORIG_ADDRESS = {quote(address)}",
                "DEAD_LETTER",
            )
        if settings.auto_create_expiry_resources and settings.expiry_address not in (None, address):
            yield Queue(
                settings.expiry_queue_prefix + address + settings.expiry_queue_suffix,
                settings.expiry_address,
                MULTICAST,
                f"_AMQ_ORIG_ADDRESS = {quote(address)}",
                "EXPIRY",
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

    def has_bindings(self, address: str | None) -> bool:
        """Artemis counts queues and diverts as an address's bindings."""
        return address is not None and bool(self.queues_on(address) or self.diverts_on(address))

    @cached_property
    def routed_addresses(self) -> tuple[str, ...]:
        """Addresses with a queue or a divert: the only ones routing has to look at."""
        return tuple(sorted(set(self._queues_by_address) | set(self._diverts_by_address)))

    @cached_property
    def addresses(self) -> frozenset[str]:
        """Every address a copy can be sent to, plus the configured ones."""
        names = set(self.config.addresses) | set(self.routed_addresses)
        for divert in self.config.diverts:
            names.update(divert.forwarding_addresses)
        for address in list(names):
            settings = self.settings(address)
            names.update(a for a in (settings.dead_letter_address, settings.expiry_address) if a)
        return frozenset(names)

    def queue_facts(self, spark: SparkSession) -> DataFrame:
        """One row per queue: what the delivery fold needs, for a broadcast join."""
        rows = []
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
                    self.has_bindings(s.dead_letter_address),
                    s.expiry_address,
                    self.has_bindings(s.expiry_address),
                )
            )
        return spark.createDataFrame(rows, QUEUE_FACTS)


QUEUE_FACTS = StructType(
    [
        StructField("queue", StringType(), False),
        StructField("queue_address", StringType(), False),
        StructField("max_delivery_attempts", IntegerType(), False),
        StructField("redelivery_delay", LongType(), False),
        StructField("redelivery_delay_multiplier", DoubleType(), False),
        StructField("max_redelivery_delay", LongType(), False),
        StructField("dead_letter_address", StringType(), True),
        StructField("dla_has_bindings", BooleanType(), False),
        StructField("expiry_address", StringType(), True),
        StructField("expiry_has_bindings", BooleanType(), False),
    ]
)
