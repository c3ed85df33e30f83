"""A single-process router, timed beside the job: a plain Python loop over the SPEC, as a
user without Spark would write one (stdlib, pyarrow, delta-rs), for the features of the
shapes in :mod:`bench.shapes`.

It reads the lake's input tables with delta-rs, routes every row in event-time order
(SPEC §5.2 to §5.5 for what the shapes use: non-exclusive and exclusive diverts with
filters, multicast queues, anycast queues taking turns, ACK and ROLLBACK, dead letters)
and writes ``queue_messages``, ``journal`` and the copies with delta-rs. Its filters are
the plain-Python evaluator of the tests (``tests/filter_oracle.py``), a port of Artemis's.
Expiry, management rows, auto-created resources and bad rows are not handled: the shapes
have none. :func:`queue_counts` of its ``queue_messages`` equal the job's on every shape
(``bench.shapes`` checks them).

    python -m bench.single_process --conf broker.xml --lake lake
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from routing.broker.config import ANYCAST, MULTICAST, load_config
from routing.broker.filters import Expression, parse_filter
from routing.broker.ids import DEAD_LETTER, DIVERT, copy_id_py
from routing.broker.layout import address_dir
from routing.broker.topology import Topology
from tests.filter_oracle import matches

ORIG = ("_AMQ_ORIG_ADDRESS", "_AMQ_ORIG_QUEUE", "_AMQ_ORIG_MESSAGE_ID")
OUTPUT = "single-process"
"""The folder of the lake the router writes its tables to (the job's are left alone)."""


@dataclass
class Entry:
    """A message in a queue."""

    message: dict[str, Any]
    queue: str
    status: str = "PENDING"
    delivery_count: int = 0


@dataclass
class Router:
    """The broker's state while the events are played."""

    topology: Topology
    filters: dict[str, Expression | None] = field(default_factory=dict)
    positions: Counter[str] = field(default_factory=Counter)
    queues: dict[tuple[str, int], Entry] = field(default_factory=dict)
    journal: list[dict[str, Any]] = field(default_factory=list)
    copies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def _matches(self, text: str | None, message: dict[str, Any]) -> bool:
        if text is None:
            return True
        if text not in self.filters:
            self.filters[text] = parse_filter(text)
        expression = self.filters[text]
        return expression is None or matches(expression, message)

    def send(self, message: dict[str, Any], at: Any) -> None:
        """Route ``message`` at its address (SPEC §5.2): diverts, then queues."""
        address = message["address"]
        diverts = self.topology.diverts_on(address)
        exclusive = [d for d in diverts if d.exclusive and self._matches(d.filter, message)]
        fired = exclusive or [
            d for d in diverts if not d.exclusive and self._matches(d.filter, message)
        ]
        for divert in fired:
            for target in divert.forwarding_addresses:
                copy = self._copy(message, DIVERT, divert.name, target)
                copy["routing_type"] = None  # STRIP, the default
                self.send(copy, at)
        if exclusive:
            return
        moved = message.get("copy_reason") == DEAD_LETTER
        kind = message.get("routing_type")
        queues = self.topology.queues_on(address)
        for queue in queues:
            takes = moved or kind in (None, queue.routing_type)
            if queue.routing_type == MULTICAST and takes and self._matches(queue.filter, message):
                self._enter(message, queue.name, at)
        anycast = [q for q in queues if q.routing_type == ANYCAST]
        position = self.positions[address]
        for step in range(len(anycast)):
            queue = anycast[(position + step) % len(anycast)]
            if self._matches(queue.filter, message):
                self.positions[address] = (position + step + 1) % len(anycast)
                if moved or kind in (None, ANYCAST):
                    self._enter(message, queue.name, at)
                break

    def deliver(self, row: dict[str, Any]) -> None:
        """An ACK or a ROLLBACK of a PENDING message (SPEC §5.3)."""
        entry = self.queues.get((row["queue"], row["message_id"]))
        if entry is None or entry.status != "PENDING":
            return
        if row["outcome"] == "ACK":
            entry.status = "ACKED"
            self._journal(row["at"], entry, "ACKED")
            return
        entry.delivery_count += 1
        settings = self.topology.settings(entry.message["address"])
        attempts = settings.max_delivery_attempts
        if attempts <= 0 or entry.delivery_count < attempts:
            self._journal(row["at"], entry, "REDELIVERY_SCHEDULED")
            return
        entry.status = "DEAD_LETTERED"
        self._journal(row["at"], entry, "DEAD_LETTERED")
        dla = settings.dead_letter_address
        if dla:
            copy = self._copy(entry.message, DEAD_LETTER, entry.queue, dla)
            copy["routing_type"] = (entry.message.get("properties") or {}).get(
                "_AMQ_ORIG_ROUTING_TYPE"
            )
            self.send(copy, row["at"])

    def _enter(self, message: dict[str, Any], queue: str, at: Any) -> None:
        entry = Entry(message, queue)
        self.queues[(queue, message["message_id"])] = entry
        self._journal(at, entry, "ROUTED")

    def _journal(self, at: Any, entry: Entry, event: str) -> None:
        self.journal.append(
            {
                "at": at,
                "queue": entry.queue,
                "message_id": entry.message["message_id"],
                "event": event,
                "delivery_count": entry.delivery_count,
            }
        )

    def _copy(self, message: dict[str, Any], reason: str, left: str, target: str) -> dict:
        """A copy of ``message`` sent to ``target`` with its breadcrumbs (SPEC §5.5)."""
        properties = dict(message.get("properties") or {})
        for name in ORIG:
            if name in properties:
                n = 0
                while f"{name}_{n}" in properties:
                    n += 1
                properties[f"{name}_{n}"] = properties[name]
        properties.update(
            {
                "_AMQ_ORIG_ADDRESS": message["address"],
                "_AMQ_ORIG_QUEUE": left,
                "_AMQ_ORIG_MESSAGE_ID": str(message["message_id"]),
            }
        )
        if message.get("routing_type"):
            properties["_AMQ_ORIG_ROUTING_TYPE"] = message["routing_type"]
        copy = {
            **message,
            "message_id": copy_id_py(message["message_id"], reason, left, target, None),
            "address": target,
            "properties": properties,
            "copy_reason": reason,
        }
        self.copies.setdefault(target, []).append(copy)
        return copy


def _rows(location: Path) -> list[dict[str, Any]]:
    if not (location / "_delta_log").is_dir():
        return []
    rows = DeltaTable(str(location)).to_pyarrow_table().to_pylist()
    for row in rows:
        for name in ("properties", "property_types"):
            if isinstance(row.get(name), list):
                row[name] = dict(row[name])
    return rows


def route_lake(conf: Path, lake: Path) -> Router:
    """Read the lake's inputs, play them, write the outputs under ``lake/single-process``."""
    router = Router(Topology(load_config(conf)))
    events: list[tuple[Any, int, int, dict[str, Any]]] = []
    for table in sorted((lake / "addresses").iterdir()):
        events += [(r["sent_at"], 0, r["message_id"], r) for r in _rows(table)]
    events += [(r["at"], 1, r["message_id"], r) for r in _rows(lake / "deliveries")]
    events.sort(key=lambda e: e[:3])
    for at, rank, _, row in events:
        if rank == 0:
            router.send(row, at)
        else:
            router.deliver(row)
    out = lake / OUTPUT
    write_deltalake(str(out / "journal"), pa.Table.from_pylist(router.journal), mode="append")
    queue_rows = [
        {
            "queue": e.queue,
            "message_id": e.message["message_id"],
            "status": e.status,
            "delivery_count": e.delivery_count,
            "body": e.message.get("body"),
            "properties": list((e.message.get("properties") or {}).items()),
        }
        for e in router.queues.values()
    ]
    if queue_rows:
        write_deltalake(
            str(out / "queue_messages"), pa.Table.from_pylist(queue_rows), mode="append"
        )
    for address, copies in router.copies.items():
        rows = [
            {
                "message_id": c["message_id"],
                "address": address,
                "properties": list(c["properties"].items()),
                "body": c.get("body"),
            }
            for c in copies
        ]
        location = out / "addresses" / address_dir(address)
        write_deltalake(str(location), pa.Table.from_pylist(rows), mode="append")
    return router


def queue_counts(rows: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """``(queue, status)`` -> messages."""
    return dict(Counter(rows))


def written_counts(lake: Path) -> dict[tuple[str, str], int]:
    """:func:`queue_counts` of what :func:`route_lake` wrote into ``lake``."""
    rows = DeltaTable(str(lake / OUTPUT / "queue_messages")).to_pyarrow_table(
        columns=["queue", "status"]
    )
    return queue_counts(
        list(zip(rows["queue"].to_pylist(), rows["status"].to_pylist(), strict=True))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.single_process", description=__doc__)
    parser.add_argument("--conf", required=True)
    parser.add_argument("--lake", required=True)
    args = parser.parse_args(argv)
    router = route_lake(Path(args.conf), Path(args.lake))
    print(f"queue rows {len(router.queues)}, journal rows {len(router.journal)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
