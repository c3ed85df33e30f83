"""A single-process router, timed beside the job: a plain Python loop over the SPEC, as a
user without Spark would write one (stdlib, pyarrow, delta-rs), for the features of the
demo's traffic (:mod:`jobs.demo`) and of the shapes in :mod:`bench.shapes`.

It reads the lake's input tables with delta-rs (or a replay log in Parquet, docs/REPLAY.md),
plays every row in event-time order (SPEC §5.2 to §5.5: exclusive and non-exclusive
diverts with filters, multicast queues, anycast queues taking turns, expiry settings and
expiries, ACK and ROLLBACK with redelivery delays, dead letters and their auto-created
queues, MOVE, RETRY and SEND_TO_DLA) and writes ``queue_messages``, ``journal``,
``rejected`` and the copies with delta-rs. Its filters are the plain-Python evaluator of the
tests (``tests/filter_oracle.py``), a port of Artemis's. Not handled, as neither the demo
nor the shapes have them: queues auto-created for an address (``auto-create-queues``),
send-to-dla-on-no-route, producers' ``to_queue``, ``--as-of``, and bad message rows.
:func:`queue_counts` of its ``queue_messages`` equal the job's on the demo and every shape
(``tests/test_shapes.py``; ``bench.shapes`` checks them on the shapes).

    python -m bench.single_process --conf broker.xml (--lake LAKE | --log LOG ...) [--out DIR]
"""

from __future__ import annotations

import argparse
import heapq
import json
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

from bench.process import Run, run_job
from routing.broker.config import ANYCAST, MULTICAST, load_config
from routing.broker.filters import Expression, parse_filter
from routing.broker.ids import DEAD_LETTER, DIVERT, EXPIRY, MOVE, RETRY, copy_id_py
from routing.broker.layout import address_dir
from routing.broker.topology import Queue, Topology
from tests.filter_oracle import matches

ORIG = ("_AMQ_ORIG_ADDRESS", "_AMQ_ORIG_QUEUE", "_AMQ_ORIG_MESSAGE_ID")
OUTPUT = "single-process"
"""The folder of the lake the router writes its tables to by default (the job's are left
alone)."""
SEND, EXPIRE, DELIVERY, MANAGEMENT = range(4)
"""What happens first at one event time (SPEC §5.4): message rows, expiries, deliveries,
management rows."""


@dataclass
class Entry:
    """A message in a queue."""

    message: dict[str, Any]
    queue: str
    routed_at: datetime
    status: str = "PENDING"
    delivery_count: int = 0
    redeliver_at: datetime | None = None


@dataclass
class Event:
    """An input row of the table ``source``."""

    at: datetime
    rank: int
    seq: int
    source: str
    row: dict[str, Any]

    def order(self) -> tuple[datetime, int, int, int]:
        """The order the SPEC plays the rows in (§5.4): by event time, then rank, then
        message id."""
        return self.at, self.rank, self.row.get("message_id") or 0, self.seq


@dataclass
class Router:
    """The broker's state while the events are played."""

    topology: Topology
    filters: dict[str, Expression | None] = field(default_factory=dict)
    positions: Counter[str] = field(default_factory=Counter)
    queues: dict[tuple[str, int], Entry] = field(default_factory=dict)
    created: set[str] = field(default_factory=set)
    """Auto-created queues (dead-letter and expiry resources) that exist by now."""
    expiries: list[tuple[datetime, int, tuple[str, int]]] = field(default_factory=list)
    """A heap of the PENDING entries that expire: (when, tie-break, key)."""
    journal: list[dict[str, Any]] = field(default_factory=list)
    copies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    # ---- events -----------------------------------------------------------------------

    def play(self, events: Iterable[Event]) -> None:
        """Apply ``events`` in event-time order, expiring messages as the clock passes
        them; at the end the clock is the latest event time."""
        clock = None
        for event in sorted(events, key=Event.order):
            self._expire_until(event.at, inclusive=event.rank > EXPIRE)
            clock = event.at
            if event.rank == SEND:
                self.send(event.row, event.at)
            elif event.rank == DELIVERY:
                self.deliver(event.source, event.row)
            else:
                self.manage(event.source, event.row)
        if clock is not None:
            self._expire_until(clock, inclusive=True)

    def send(self, message: dict[str, Any], at: datetime) -> None:
        """Route ``message`` at its address (SPEC §5.2): diverts, then queues."""
        address = message["address"]
        self._apply_expiry_settings(message, address, at)
        to_queue = message.get("to_queue")
        if to_queue and message.get("copy_reason") == MOVE:  # that queue only
            self._enter(message, to_queue, at)
            return
        diverts = self.topology.diverts_on(address)
        exclusive = [d for d in diverts if d.exclusive and self._matches(d.filter, message)]
        if to_queue and not exclusive:  # a RETRY copy meets the exclusive diverts first
            self._enter(message, to_queue, at)
            return
        fired = exclusive or [
            d for d in diverts if not d.exclusive and self._matches(d.filter, message)
        ]
        for divert in fired:
            for target in divert.forwarding_addresses:
                copy = self._copy(message, DIVERT, divert.name, target)
                copy["expiration"] = message.get("expiration")
                if divert.routing_type in (ANYCAST, MULTICAST):
                    copy["routing_type"] = divert.routing_type
                elif divert.routing_type != "PASS":
                    copy["routing_type"] = None  # STRIP, the default
                self.send(copy, at)
        if exclusive:
            return
        # a dead letter or an expiry enters every queue whose filter matches (QueueImpl.move)
        moved = message.get("copy_reason") in (DEAD_LETTER, EXPIRY)
        kind = message.get("routing_type")
        queues = self._queues_on(address)
        entered = 0
        for queue in queues:
            takes = moved or kind in (None, queue.routing_type)
            if queue.routing_type == MULTICAST and takes and self._matches(queue.filter, message):
                self._enter(message, queue.name, at)
                entered += 1
        anycast = [q for q in queues if q.routing_type == ANYCAST]
        position = self.positions[address]
        for step in range(len(anycast)):
            queue = anycast[(position + step) % len(anycast)]
            if self._matches(queue.filter, message):
                self.positions[address] = (position + step + 1) % len(anycast)
                if moved or kind in (None, ANYCAST):
                    self._enter(message, queue.name, at)
                    entered += 1
                break
        if not entered and not fired:
            self._journal_row(at, None, message, "DROPPED", 0, {"reason": "NO_ROUTE"})

    def deliver(self, source: str, row: dict[str, Any]) -> None:
        """An ACK or a ROLLBACK of a PENDING message (SPEC §5.3)."""
        entry = self.queues.get((row["queue"], row["message_id"]))
        at = row["at"]
        if entry is None or entry.status != "PENDING":
            self._reject(source, row, f"no PENDING message {row['message_id']} in queue")
            return
        if entry.redeliver_at is not None and at < entry.redeliver_at:
            self._reject(source, row, "the message is waiting for its redelivery")
            return
        entry.delivery_count += 1
        if row["outcome"] == "ACK":
            self._end(entry, at, "ACKED", "ACKED")
            return
        settings = self.topology.settings(entry.message["address"])
        attempts = settings.max_delivery_attempts
        if attempts > 0 and entry.delivery_count >= attempts:
            self.dead_letter(entry, at)
            return
        delay = settings.redelivery_delay
        if delay > 0:
            longest = settings.max_redelivery_delay
            longest = 10 * delay if longest is None else longest
            factor = settings.redelivery_delay_multiplier ** (entry.delivery_count - 1)
            entry.redeliver_at = at + timedelta(milliseconds=min(longest, delay * factor))
        self._journal(at, entry, "REDELIVERY_SCHEDULED")

    def manage(self, source: str, row: dict[str, Any]) -> None:
        """A MOVE, RETRY or SEND_TO_DLA on one message or on every PENDING one that
        matches the filter (SPEC §3.3)."""
        at, queue, by_id = row["at"], row["queue"], row.get("message_id")
        if by_id is not None:
            entry = self.queues.get((queue, by_id))
            if entry is None or entry.status != "PENDING":
                self._reject(source, row, f"no PENDING message {by_id} in queue")
                return
            scheduled = entry.redeliver_at is not None and at < entry.redeliver_at
            if scheduled and row["op"] != "RETRY":
                self._reject(source, row, "the message is waiting for its redelivery")
                return
            entries = [entry]
        else:
            expression = parse_filter(row["filter"]) if row.get("filter") else None
            entries = [
                e
                for (q, _), e in self.queues.items()
                if q == queue
                and e.status == "PENDING"
                and (expression is None or matches(expression, e.message))
            ]
        for entry in entries:
            if row["op"] == "MOVE":
                self._move(source, row, entry, at)
            elif row["op"] == "RETRY":
                self._retry(source, row, entry, at)
            else:
                self.dead_letter(entry, at)

    # ---- endings ------------------------------------------------------------------------

    def dead_letter(self, entry: Entry, at: datetime) -> None:
        """Send ``entry`` to its address's dead-letter address (SPEC §5.4)."""
        self._send_away(entry, at, DEAD_LETTER)

    def _send_away(self, entry: Entry, at: datetime, reason: str) -> None:
        """A dead letter (``reason`` DEAD_LETTER) or an expiry (EXPIRY): to the address its
        settings name, creating the queue they auto-create, or dropped (SPEC §5.4)."""
        address = entry.message["address"]
        settings = self.topology.settings(address)
        dead = reason == DEAD_LETTER
        target = settings.dead_letter_address if dead else settings.expiry_address
        created = self.topology.creates(reason, address)
        if created is not None:
            self.created.add(created)
        if not target:
            why = "NO_DLA" if dead else "NO_EXPIRY_ADDRESS"
            self._end(entry, at, "DROPPED", "DROPPED", {"reason": why})
        elif not self._bound(target):
            why = "DLA_NO_BINDINGS" if dead else "EXPIRY_NO_BINDINGS"
            self._end(entry, at, "DROPPED", "DROPPED", {"reason": why})
        else:
            status = "DEAD_LETTERED" if dead else "EXPIRED"
            self._end_with_copy(entry, at, reason, target, status, status)

    def _move(self, source: str, row: dict[str, Any], entry: Entry, at: datetime) -> None:
        target = self.topology.queues.get(row.get("to_queue") or "")
        if target is None or not self._exists(target):
            self._reject(source, row, f"MOVE: no queue {row.get('to_queue')}")
            return
        self._end_with_copy(entry, at, MOVE, target.address, "MOVED", "MOVED", target.name)

    def _retry(self, source: str, row: dict[str, Any], entry: Entry, at: datetime) -> None:
        properties = entry.message.get("properties") or {}
        address, name = properties.get("_AMQ_ORIG_ADDRESS"), properties.get("_AMQ_ORIG_QUEUE")
        queue = self.topology.queues.get(name or "")
        is_divert = any(d.name == name for d in self.topology.config.diverts)
        if address is None or not (is_divert or (queue is not None and self._exists(queue))):
            self._reject(source, row, "RETRY: no queue or divert named by _AMQ_ORIG_QUEUE")
            return
        # a divert's name, the address's own, or another address's queue: routed at the
        # address like a new message
        on_address = queue is not None and queue.address == address and name != address
        to_queue = name if on_address else None
        self._end_with_copy(entry, at, RETRY, address, "MOVED", "RETRIED", to_queue)

    def _end_with_copy(
        self,
        entry: Entry,
        at: datetime,
        reason: str,
        address: str,
        status: str,
        event: str,
        to_queue: str | None = None,
    ) -> None:
        copy = self._copy(entry.message, reason, entry.queue, address, to_queue)
        copy["routing_type"] = (entry.message.get("properties") or {}).get("_AMQ_ORIG_ROUTING_TYPE")
        copy["sent_at"] = at
        if reason == EXPIRY:
            copy["properties"]["_AMQ_ACTUAL_EXPIRY"] = str(int(at.timestamp() * 1000))
        self._end(entry, at, status, event, {"to_address": address})
        self.send(copy, at)

    def _end(
        self, entry: Entry, at: datetime, status: str, event: str, detail: dict | None = None
    ) -> None:
        entry.status = status
        self._journal(at, entry, event, detail)

    def _expire_until(self, clock: datetime, inclusive: bool) -> None:
        while self.expiries and (
            self.expiries[0][0] < clock or (inclusive and self.expiries[0][0] == clock)
        ):
            when, _, key = heapq.heappop(self.expiries)
            entry = self.queues[key]
            if entry.status == "PENDING":
                self._send_away(entry, when, EXPIRY)

    # ---- the broker's parts -------------------------------------------------------------

    def _queues_on(self, address: str) -> list[Queue]:
        return [q for q in self.topology.queues_on(address) if self._exists(q)]

    def _exists(self, queue: Queue) -> bool:
        return queue.auto_created is None or queue.name in self.created

    def _bound(self, address: str) -> bool:
        return bool(self._queues_on(address) or self.topology.diverts_on(address))

    def _matches(self, text: str | None, message: dict[str, Any]) -> bool:
        if text is None:
            return True
        if text not in self.filters:
            self.filters[text] = parse_filter(text)
        expression = self.filters[text]
        return expression is None or matches(expression, message)

    def _apply_expiry_settings(self, message: dict[str, Any], address: str, at: datetime) -> None:
        """SPEC §5.2 step 5."""
        settings = self.topology.settings(address)
        expiration = message.get("expiration")
        if settings.no_expiry:
            expiration = None
        elif settings.expiry_delay >= 0:
            if expiration is None:
                expiration = at + timedelta(milliseconds=settings.expiry_delay)
        elif expiration is None:
            longest = settings.max_expiry_delay
            delay = longest if longest >= 0 else settings.min_expiry_delay
            if delay >= 0:
                expiration = at + timedelta(milliseconds=delay)
        else:
            if settings.min_expiry_delay >= 0:
                expiration = max(expiration, at + timedelta(milliseconds=settings.min_expiry_delay))
            if settings.max_expiry_delay >= 0:
                expiration = min(expiration, at + timedelta(milliseconds=settings.max_expiry_delay))
        message["expiration"] = expiration

    def _enter(self, message: dict[str, Any], queue: str, at: datetime) -> None:
        entry = Entry(message, queue, at)
        key = (queue, message["message_id"])
        self.queues[key] = entry
        self._journal(at, entry, "ROUTED")
        expiration = message.get("expiration")
        if expiration is not None and queue not in self.topology.expiry_disabled:
            heapq.heappush(self.expiries, (max(expiration, at), len(self.journal), key))

    def _journal(
        self, at: datetime, entry: Entry, event: str, detail: dict[str, str] | None = None
    ) -> None:
        self._journal_row(at, entry.queue, entry.message, event, entry.delivery_count, detail)

    def _journal_row(
        self,
        at: datetime,
        queue: str | None,
        message: dict[str, Any],
        event: str,
        delivery_count: int,
        detail: dict[str, str] | None,
    ) -> None:
        self.journal.append(
            {
                "at": at,
                "queue": queue,
                "message_id": message["message_id"],
                "event": event,
                "delivery_count": delivery_count,
                "detail": list((detail or {}).items()),
            }
        )

    def _reject(self, source: str, row: dict[str, Any], reason: str) -> None:
        self.rejected.append(
            {
                "source": source,
                "row": json.dumps(row, default=str),
                "reason": reason,
                "at": row["at"],
            }
        )

    def _copy(
        self,
        message: dict[str, Any],
        reason: str,
        left: str,
        target: str,
        to_queue: str | None = None,
    ) -> dict[str, Any]:
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
            "message_id": copy_id_py(message["message_id"], reason, left, target, to_queue),
            "address": target,
            "properties": properties,
            "expiration": None,
            "copy_reason": reason,
            "to_queue": to_queue,
        }
        self.copies.setdefault(target, []).append(copy)
        return copy


# ---- reading and writing ----------------------------------------------------------------


def _dicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arrow's maps (lists of pairs) as dicts."""
    for row in rows:
        for name in ("properties", "property_types"):
            if isinstance(row.get(name), list):
                row[name] = dict(row[name])
    return rows


def _table_rows(location: Path) -> list[dict[str, Any]]:
    if not (location / "_delta_log").is_dir():
        return []
    return _dicts(DeltaTable(str(location)).to_pyarrow_table().to_pylist())


def _event(rank: int, seq: int, source: str, row: dict[str, Any]) -> Event:
    at = row["sent_at"] if rank == SEND else row["at"]
    return Event(at, rank, seq, source, row)


def lake_events(lake: Path) -> list[Event]:
    """The producers' rows of the lake's address tables, its deliveries and management rows."""
    rows: list[tuple[int, str, dict[str, Any]]] = []
    for table in sorted((lake / "addresses").iterdir()):
        source = f"addresses/{table.name}"
        rows += [(SEND, source, r) for r in _table_rows(table) if r.get("copy_reason") is None]
    for rank, source in ((DELIVERY, "deliveries"), (MANAGEMENT, "management")):
        rows += [(rank, source, r) for r in _table_rows(lake / source)]
    return [_event(rank, k, source, row) for k, (rank, source, row) in enumerate(rows)]


def log_events(logs: Iterable[Path]) -> list[Event]:
    """The records of replay logs in Parquet (docs/REPLAY.md)."""
    kinds = {"send": SEND, "delivery": DELIVERY, "management": MANAGEMENT}
    sources = {SEND: "", DELIVERY: "deliveries", MANAGEMENT: "management"}
    events = []
    for log in logs:
        for row in _dicts(pq.read_table(log).to_pylist()):
            rank = kinds[row.pop("type")]
            source = sources[rank] or f"addresses/{address_dir(row['address'])}"
            events.append(_event(rank, len(events), source, row))
    return events


def route(conf: Path, events: list[Event], out: Path) -> Router:
    """Play ``events`` on the broker of ``conf`` and write the tables under ``out``."""
    router = Router(Topology(load_config(conf)))
    router.play(events)
    _write(out / "journal", router.journal)
    _write(out / "rejected", router.rejected)
    _write(
        out / "queue_messages",
        [
            {
                "queue": e.queue,
                "message_id": e.message["message_id"],
                "status": e.status,
                "delivery_count": e.delivery_count,
                "redeliver_at": e.redeliver_at,
                "routed_at": e.routed_at,
                "body": e.message.get("body"),
                "properties": list((e.message.get("properties") or {}).items()),
            }
            for e in router.queues.values()
        ],
    )
    for address, copies in router.copies.items():
        rows = [
            {
                "message_id": c["message_id"],
                "address": address,
                "sent_at": c["sent_at"],
                "properties": list(c["properties"].items()),
                "body": c.get("body"),
                "copy_reason": c["copy_reason"],
            }
            for c in copies
        ]
        _write(out / "addresses" / address_dir(address), rows)
    return router


def _write(location: Path, rows: list[dict[str, Any]]) -> None:
    if rows:
        write_deltalake(str(location), pa.Table.from_pylist(rows), mode="append")


def route_lake(conf: Path, lake: Path) -> Router:
    """Read the lake's inputs, play them, write the outputs under ``lake/single-process``."""
    return route(conf, lake_events(lake), lake / OUTPUT)


def queue_counts(rows: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """``(queue, status)`` -> messages."""
    return dict(Counter(rows))


def written_counts(out: Path) -> dict[tuple[str, str], int]:
    """:func:`queue_counts` of what :func:`route` wrote under ``out`` (a lake: under its
    :data:`OUTPUT` folder)."""
    if (out / OUTPUT).is_dir():
        out = out / OUTPUT
    rows = DeltaTable(str(out / "queue_messages")).to_pyarrow_table(columns=["queue", "status"])
    return queue_counts(
        list(zip(rows["queue"].to_pylist(), rows["status"].to_pylist(), strict=True))
    )


def timed(conf: Path, inputs: Sequence[str], workdir: Path) -> Run:
    """One run of this router as its own process, as a user runs it, over ``inputs``
    (``--lake L`` or ``--log F``); its tables go to a folder of ``workdir``, removed after."""
    out = workdir / OUTPUT
    where = ["--conf", str(conf), *inputs, "--out", str(out)]
    try:
        return run_job([sys.executable, "-m", "bench.single_process", *where])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.single_process", description=__doc__)
    parser.add_argument("--conf", required=True)
    parser.add_argument("--lake", help="read the lake's input tables")
    parser.add_argument("--log", action="append", default=[], help="read a Parquet replay log")
    parser.add_argument("--out", help=f"where to write the tables (default LAKE/{OUTPUT})")
    args = parser.parse_args(argv)
    if bool(args.lake) == bool(args.log):
        parser.error("give --lake or --log")
    if args.lake:
        events = lake_events(Path(args.lake))
    else:
        events = log_events(Path(log) for log in args.log)
    out = Path(args.out) if args.out else Path(args.lake) / OUTPUT
    router = route(Path(args.conf), events, out)
    print(
        f"queue rows {len(router.queues)}, journal rows {len(router.journal)}, "
        f"rejected {len(router.rejected)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
