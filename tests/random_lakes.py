"""Random lakes: a broker.xml and a few dozen input rows drawn from a seed, routed by the
job in one micro-batch, in small ones, and in two runs with the rows after some instant
appended between them (a restart); the lakes must hold the same tables (SPEC §5.6) and
each must keep the SPEC's rules on its rows (:func:`check_lake`).

The fixed cases of ``tests/test_delivery_rules.py`` and ``tests/test_auto_created_queues.py``
hold one workload each; these combine what they test at random: queue filters, anycast
turns, diverts (exclusive, filtered, sharing a routing-name, with routing types, composite
forwarding addresses), dead letters, expiries with every setting and ``--as-of``,
auto-created queues, consumers' events on dead-letter and expiry copies, management rows
by filter. ``tests/test_random_lakes.py`` runs a few seeds in ``make
test``; more, on their own::

    python -m tests.random_lakes 0 40
"""

from __future__ import annotations

import random
import shutil
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from routing.broker.ids import DEAD_LETTER, EXPIRY, copy_id_py
from routing.broker.layout import address_of_source
from routing.io.lake import Lake
from tests.lakeio import at, rows
from tests.test_delivery_rules import assert_same_tables, route_events
from tests.test_routing_rules import delivery, message

FILTERS = [
    None,
    None,
    "color = 'red'",
    "n > 5",
    "color IS NULL",
    "NOT (color = 'blue')",
    "AMQPriority >= 5",
]
"""Queue and divert filters: none (twice as likely), on properties, on a header field."""
ADDRESSES = ["a0", "a1", "a2", "a.b", "x/y"]
"""Addresses producers send to (a dot for the settings' wildcards, a slash for dir())."""
STATUS_AFTER = {
    "ROUTED": "PENDING",
    "REDELIVERY_SCHEDULED": "PENDING",
    "ACKED": "ACKED",
    "DEAD_LETTERED": "DEAD_LETTERED",
    "EXPIRED": "EXPIRED",
    "MOVED": "MOVED",
    "RETRIED": "MOVED",
    "DROPPED": "DROPPED",
}
"""The status a queue row has after each journal event (SPEC §3.4, §3.5)."""


@dataclass(frozen=True)
class Case:
    """A seed's broker.xml (the children of ``<core>``), its input rows in the order they
    are appended (one commit each), the rate limit of its small batches, its ``--as-of``
    (ms, or None) and how many rows the restarted lake's first run routes."""

    seed: int
    xml: str
    events: list[tuple[str, dict[str, Any]]]
    per_batch: int
    as_of: int | None
    restart_after: int

    def options(self) -> tuple[str, ...]:
        return () if self.as_of is None else ("--as-of", at(self.as_of).isoformat())


def case(seed: int) -> Case:
    r = random.Random(seed)
    addresses = ADDRESSES[: r.randint(2, len(ADDRESSES))]
    queues = {a: _queues(r, a) for a in addresses}
    xml = (
        f"<address-settings>{_settings(r, addresses)}</address-settings>"
        f"{_diverts(r, addresses)}"
        f"<addresses>{_addresses(r, queues)}</addresses>"
    )
    events = _events(r, queues)
    per_batch = r.choice([2, 3, 4, 6])
    # drawn after them, so that a seed keeps the topology and rows earlier versions drew
    as_of = r.choice([None, None, 700, 1500])  # amid the rows, or after them all
    events = _in_time([*events, *_copy_deliveries(r, events)])
    times = [_time(row) for _, row in events]
    instants = [i for i in range(1, len(events)) if times[i - 1] < times[i]]
    return Case(seed, xml, events, per_batch, as_of, r.choice(instants or [len(events)]))


def _time(row: dict[str, Any]) -> Any:
    return row["sent_at"] if "sent_at" in row else row["at"]


def _in_time(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    # stable: rows of one instant keep their order (a message before its own deliveries)
    return sorted(events, key=lambda event: _time(event[1]))


def _copy_deliveries(
    r: random.Random, events: list[tuple[str, dict[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """Consumers' ROLLBACKs and ACKs of the dead-letter and expiry copies a message rolled
    back in a queue may have become (ids are known: SPEC §5.6), in the queues they may be
    in; rejected when it did not."""
    rolled_back = {  # the last ROLLBACK's time, ms after at(0)
        (row["queue"], row["message_id"]): (row["at"] - at(0)) // timedelta(milliseconds=1)
        for table, row in events
        if table == "deliveries" and row["outcome"] == "ROLLBACK"
    }
    out = []
    for (queue, message_id), last in sorted(rolled_back.items(), key=lambda item: item[0]):
        if r.random() < 0.6:
            continue
        address = queue.rsplit(".", 1)[0]
        if r.random() < 0.6:
            copy = copy_id_py(message_id, DEAD_LETTER, queue, "DLA", None)
            into = r.choice(["DLQ0", "DLQ1", f"DLQ.{address}"])
        else:
            copy = copy_id_py(message_id, EXPIRY, queue, "EXP", None)
            into = r.choice(["EXPQ", "EXPQ2", f"EXP.{address}"])
        t = last
        for outcome in r.choice([["ROLLBACK"], ["ROLLBACK", "ROLLBACK"], ["ACK"]]):
            t += r.choice([0, 10, 100, 400])
            out.append(("deliveries", delivery(into, copy, outcome, t)))
    return out


def _queues(r: random.Random, address: str) -> tuple[list[str], list[str]]:
    """An address's anycast and multicast queues (none at all: an empty ``<anycast/>``)."""
    anycast = [f"{address}.q{i}" for i in range(r.choice([0, 1, 1, 2, 3]))]
    multicast = [f"{address}.m{i}" for i in range(r.choice([0, 0, 1, 2]))]
    return anycast, multicast


def _addresses(r: random.Random, queues: dict[str, tuple[list[str], list[str]]]) -> str:
    def declared(names: list[str]) -> str:
        out = ""
        for name in names:
            text = r.choice(FILTERS)
            out += f'<queue name="{name}">'
            out += f'<filter string="{text}"/></queue>' if text else "</queue>"
        return out

    xml = ""
    for address, (anycast, multicast) in queues.items():
        kinds = f"<anycast>{declared(anycast)}</anycast>" if anycast or not multicast else ""
        kinds += f"<multicast>{declared(multicast)}</multicast>" if multicast else ""
        xml += f'<address name="{address}">{kinds}</address>'
    dead_letter_queues = "".join(f'<queue name="DLQ{i}"/>' for i in range(r.choice([0, 1, 2])))
    xml += f'<address name="DLA"><anycast>{dead_letter_queues}</anycast></address>'
    if r.random() < 0.6:
        kind = r.choice(["anycast", "multicast"])
        second = '<queue name="EXPQ2"/>' if r.random() < 0.5 else ""
        xml += f'<address name="EXP"><{kind}><queue name="EXPQ"/>{second}</{kind}></address>'
    return xml


def _settings(r: random.Random, addresses: list[str]) -> str:
    def setting(match: str) -> str:
        fields = ""
        if r.random() < 0.7:
            fields += "<dead-letter-address>DLA</dead-letter-address>"
        if r.random() < 0.6:
            fields += f"<max-delivery-attempts>{r.choice([0, 1, 2, 3])}</max-delivery-attempts>"
        if r.random() < 0.5:
            fields += f"<redelivery-delay>{r.choice([0, 50, 100])}</redelivery-delay>"
            if r.random() < 0.5:
                fields += "<redelivery-delay-multiplier>2</redelivery-delay-multiplier>"
                fields += "<max-redelivery-delay>250</max-redelivery-delay>"
        if r.random() < 0.5:
            fields += "<expiry-address>EXP</expiry-address>"
        if r.random() < 0.3:
            fields += f"<expiry-delay>{r.choice([100, 300])}</expiry-delay>"
        if r.random() < 0.2:
            fields += (
                "<min-expiry-delay>50</min-expiry-delay><max-expiry-delay>400</max-expiry-delay>"
            )
        for flag, chance in (
            ("auto-create-dead-letter-resources", 0.3),
            ("auto-create-expiry-resources", 0.3),
            ("send-to-dla-on-no-route", 0.2),
        ):
            if r.random() < chance:
                fields += f"<{flag}>true</{flag}>"
        return f'<address-setting match="{match}">{fields}</address-setting>'

    matches = ["#"]
    matches += [r.choice(addresses)] if r.random() < 0.5 else []
    matches += ["a*"] if r.random() < 0.4 else []
    matches += ["a.#"] if r.random() < 0.3 else []
    return "".join(setting(m) for m in matches)


def _diverts(r: random.Random, addresses: list[str]) -> str:
    """Diverts from an address to later ones only: no cycle (a cycle's 64 hops are a case of
    their own, ``test_routing_rules``)."""
    xml = ""
    for i in range(r.choice([0, 1, 2, 3])):
        source = r.randrange(len(addresses) - 1)
        later = addresses[source + 1 :]
        targets = r.sample(later, k=min(len(later), r.choice([1, 1, 2])))
        xml += f'<divert name="d{i}"><address>{addresses[source]}</address>'
        xml += f"<forwarding-address>{','.join(targets)}</forwarding-address>"
        text = r.choice(FILTERS)
        xml += f'<filter string="{text}"/>' if text else ""
        if r.random() < 0.3:
            xml += f"<routing-name>rn{r.choice([0, 1])}</routing-name>"
        if r.random() < 0.5:
            kind = r.choice(["ANYCAST", "MULTICAST", "PASS", "STRIP"])
            xml += f"<routing-type>{kind}</routing-type>"
        xml += "<exclusive>true</exclusive>" if r.random() < 0.4 else ""
        xml += "</divert>"
    return f"<diverts>{xml}</diverts>" if xml else ""


def _events(
    r: random.Random, queues: dict[str, tuple[list[str], list[str]]]
) -> list[tuple[str, dict[str, Any]]]:
    """Messages at random times (several at one instant, some expiring), consumers' ROLLBACKs
    and ACKs of them (in a queue they may not be in: rejected), operators' rows; in event-time
    order."""
    timed: list[tuple[int, tuple[str, dict[str, Any]]]] = []
    sent = []
    for message_id in range(1, r.randint(8, 20) + 1):
        address = r.choice(list(queues))
        t = r.randrange(0, 600, 10)
        properties = {}
        if r.random() < 0.6:
            properties["color"] = r.choice(["red", "blue"])
        if r.random() < 0.5:
            properties["n"] = str(r.randint(0, 10))
        row = message(
            message_id,
            address,
            t,
            properties=properties,
            routing_type=r.choice([None, None, "ANYCAST", "MULTICAST"]),
            expiration=t + r.choice([30, 100, 400]) if r.random() < 0.3 else None,
            priority=r.choice([None, 2, 7]),
        )
        sent.append((message_id, address, t))
        timed.append((t, (address, row)))
    for message_id, address, t in sent:
        bound = queues[address][0] + queues[address][1]
        if not bound or r.random() < 0.3:
            continue
        queue = r.choice(bound)
        for _ in range(r.randint(1, 4)):
            t += r.choice([0, 10, 20, 60, 120])
            timed.append((t, ("deliveries", delivery(queue, message_id, "ROLLBACK", t))))
        if r.random() < 0.5:
            t += r.choice([10, 200])
            timed.append((t, ("deliveries", delivery(queue, message_id, "ACK", t))))
    declared = [q for anycast, multicast in queues.values() for q in anycast + multicast]
    for _ in range(r.randint(0, 3)):
        t = r.randrange(200, 900, 10)
        op = r.choice(["RETRY", "MOVE", "SEND_TO_DLA"])
        row = {
            "op": op,
            "queue": r.choice([*declared, "DLQ0", "EXPQ"]),
            "message_id": r.choice(sent)[0] if op == "SEND_TO_DLA" and r.random() < 0.5 else None,
            "filter": r.choice([None, "color = 'red'"]),
            "to_queue": r.choice([*declared, "DLQ0"]) if op == "MOVE" else None,
            "at": at(t),
        }
        timed.append((t, ("management", row)))
    timed.sort(key=lambda event: event[0])  # stable: a message before its own deliveries
    return [event for _, event in timed]


def _in_order(entry: dict[str, Any]) -> tuple:
    """A journal row's place in its message's history: by time, and at one instant the
    entry first, redeliveries by count, an ending last (the table's rows have no order)."""
    rank = {"ROUTED": 0, "REDELIVERY_SCHEDULED": 1}.get(entry["event"], 2)
    return entry["at"], rank, entry["delivery_count"] or 0


def check_lake(lake: Lake) -> None:
    """The SPEC's rules on one lake's rows: one queue row per (queue, message_id), whose
    status and delivery count are those its last journal row leaves (SPEC §3.4, §3.5)."""
    queue_rows = rows(lake.queue_messages)
    keys = [(r["queue"], r["message_id"]) for r in queue_rows]
    assert len(keys) == len(set(keys)), "a (queue, message_id) with two rows"
    history = defaultdict(list)
    for entry in sorted(rows(lake.journal), key=_in_order):
        history[entry["queue"], entry["message_id"]].append(entry)
    for row in queue_rows:
        key = row["queue"], row["message_id"]
        assert history[key], f"{key}: no journal row"
        last = history[key][-1]
        events = [(j["event"], j["delivery_count"]) for j in history[key]]
        assert STATUS_AFTER[last["event"]] == row["status"], (key, row["status"], events)
        assert last["delivery_count"] == row["delivery_count"], (key, row["delivery_count"], events)


def run_case(spark, seed: int, workdir: Path) -> tuple[int, int]:
    """The seed's lake routed in one batch, in small ones and in two runs (the rows up to
    an instant, then the others: the second run restarts from the first's checkpoint and
    state), checked and compared; returns the number of input rows and of small batches.
    The restarted lake's first run has no ``--as-of``: rows after it would come late."""
    drawn = case(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "core.xml").write_text(drawn.xml)  # to read when a seed fails
    options = drawn.options()
    whole, one = route_events(workdir / "whole", spark, drawn.xml, drawn.events, *options)
    rate = ("--max-events-per-trigger", str(drawn.per_batch))
    cut, small = route_events(workdir / "cut", spark, drawn.xml, drawn.events, *options, *rate)
    first, rest = drawn.events[: drawn.restart_after], drawn.events[drawn.restart_after :]
    route_events(workdir / "restarted", spark, drawn.xml, first)
    restarted, _ = route_events(workdir / "restarted", spark, drawn.xml, rest, *options)
    assert one == 1, one
    addresses = {address_of_source(s) for s in whole.address_sources()}
    for lake in (whole, cut, restarted):
        check_lake(lake)
    for lake in (cut, restarted):
        assert_same_tables(spark, lake, whole, addresses)
    return len(drawn.events), small


def main(argv: list[str], out: TextIO = sys.stdout) -> int:
    """``python -m tests.random_lakes FIRST END [WORKDIR]``: seeds FIRST to END - 1; a seed's
    lakes are left in WORKDIR (default ``random-lakes``) when it fails."""
    from routing.io.session import build_session

    first, end = int(argv[0]), int(argv[1])
    base = Path(argv[2] if len(argv) > 2 else "random-lakes")
    spark = build_session("random-lakes", conf={"spark.sql.shuffle.partitions": "2"})
    failed = 0
    for seed in range(first, end):
        start = time.monotonic()
        try:
            events, batches = run_case(spark, seed, base / f"seed-{seed}")
        except Exception as error:  # report the seed and go on
            failed += 1
            print(f"seed {seed}: FAILED {type(error).__name__}: {str(error)[:2000]}", file=out)
            continue
        shutil.rmtree(base / f"seed-{seed}")
        took = time.monotonic() - start
        print(f"seed {seed}: ok, {events} rows, {batches} small batches, {took:.0f} s", file=out)
        out.flush()
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
