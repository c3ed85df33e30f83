"""The demo of ``make run``: generate a shop's traffic, replay it, print what happened.

    python -m jobs.demo --lake ./lake --conf conf/broker.xml [--messages 20000] [--seed 7] [--fresh]

The traffic fits ``conf/broker.xml``: orders (EU orders diverted exclusively to
``orders.eu``, the others copied to the ``audit`` trail), payments whose
consumers roll back (retried with a growing delay, dead-lettered after three
attempts, later retried from ``DLQ.payments`` by an operator), notifications
that expire when nobody reads them, and a few consumers that acknowledge twice
(rejected). :func:`traffic` is seeded and vectorised, so the benchmarks use it
for a million messages too.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from jobs._logging import StopSignal, interrupted, take_lake
from jobs._session import job_session
from routing.broker.ids import copy_id_py
from routing.broker.layout import WRITER_LOCK
from routing.broker.properties import LONG
from routing.io.lake import Lake

HELP = """\
What `make run` does: generate a shop's traffic for conf/broker.xml, replay it into a
lake and print how many messages ended in each queue and status.

Orders are diverted to a regional queue and copied to an audit trail; payments are
rolled back, redelivered with a growing delay, dead-lettered after three attempts and
retried by an operator; notifications expire when nobody reads them."""

START = np.datetime64("2026-01-01T00:00:00", "us")
SPACING_US = 1_000  # one message per millisecond of event time

LOG = pa.schema(
    [
        ("type", pa.string()),
        ("address", pa.string()),
        ("message_id", pa.int64()),
        ("sent_at", pa.timestamp("us", tz="UTC")),
        ("priority", pa.int32()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("property_types", pa.map_(pa.string(), pa.string())),
        ("body", pa.binary()),
        ("queue", pa.string()),
        ("outcome", pa.string()),
        ("op", pa.string()),
        ("filter", pa.string()),
        ("to_queue", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)
"""The Parquet form of the replay log (docs/REPLAY.md); columns a record does not use are null."""


def _seconds(rng: np.random.Generator, low: float, high: float, n: int) -> np.ndarray:
    return (rng.uniform(low, high, n) * 1e6).astype("timedelta64[us]")


def _copy_ids(
    parents: np.ndarray, reason: str, left: str, address: str, queue: str | None = None
) -> np.ndarray:
    return np.array(
        [copy_id_py(int(p), reason, left, address, queue) for p in parents], dtype=np.int64
    )


def _deliveries(queue: str, ids: np.ndarray, outcome: str, at: np.ndarray) -> dict[str, np.ndarray]:
    n = len(ids)
    return {
        "type": np.full(n, "delivery", object),
        "queue": np.full(n, queue, object),
        "message_id": ids,
        "outcome": np.full(n, outcome, object),
        "at": at,
    }


def traffic(messages: int, seed: int = 7) -> pa.Table:
    """A replay log of ``messages`` sends and their consumers' deliveries, in event-time order."""
    rng = np.random.default_rng(seed)
    ids = np.arange(1, messages + 1, dtype=np.int64)
    sent = START + ids.astype("timedelta64[us]") * SPACING_US
    address = rng.choice(
        np.array(["orders", "payments", "notifications"], object), messages, p=[0.4, 0.3, 0.3]
    )
    region = rng.choice(np.array(["EU", "US", "APAC"], object), messages, p=[0.3, 0.5, 0.2])
    amount = rng.integers(1, 1000, messages)
    channel = rng.choice(np.array(["email", "sms"], object), messages, p=[0.6, 0.4])
    fate = rng.random(messages)  # what the consumers will do with the message
    orders, payments, notes = (
        (address == "orders"),
        (address == "payments"),
        (address == "notifications"),
    )

    properties = [
        [("region", r), ("amount", str(a)), ("customer", f"c{i % 997}")]
        if kind == "orders"
        else [("amount", str(a)), ("currency", "EUR")]
        if kind == "payments"
        else [("channel", c)]
        for i, kind, r, a, c in zip(
            ids.tolist(), address, region, amount.tolist(), channel, strict=True
        )
    ]
    sends = {
        "type": np.full(messages, "send", object),
        "address": address,
        "message_id": ids,
        "sent_at": sent,
        "priority": np.where(orders & (amount > 900), 9, 4).astype(np.int32),
        "properties": properties,
        # the producers type their numbers, as an Artemis client does (putLongProperty)
        "property_types": [
            [("amount", LONG)] if kind != "notifications" else None for kind in address
        ],
        "body": [f'{{"n":{i}}}'.encode() for i in ids.tolist()],
    }
    events: list[dict[str, np.ndarray]] = []

    # orders: EU ones sit in orders.eu (an exclusive divert's copy), the others in
    # orders with an audit copy; consumers leave a few pending
    eu = orders & (region == "EU")
    shared = orders & ~eu
    acked = fate < 0.97
    events.append(
        _deliveries(
            "orders.eu",
            _copy_ids(ids[eu & acked], "DIVERT", "orders-eu", "orders.eu"),
            "ACK",
            sent[eu & acked] + _seconds(rng, 0.1, 5, int((eu & acked).sum())),
        )
    )
    events.append(
        _deliveries(
            "orders",
            ids[shared & acked],
            "ACK",
            sent[shared & acked] + _seconds(rng, 0.1, 5, int((shared & acked).sum())),
        )
    )
    audit = _copy_ids(ids[shared], "DIVERT", "orders-audit", "audit")
    events.append(
        _deliveries("audit.archive", audit, "ACK", sent[shared] + _seconds(rng, 0.5, 2, len(audit)))
    )
    large = amount[shared] > 500
    large_acked = large & (fate[shared] < 0.5)
    events.append(
        _deliveries(
            "audit.large",
            audit[large_acked],
            "ACK",
            sent[shared][large_acked] + _seconds(rng, 1, 10, int(large_acked.sum())),
        )
    )

    # payments: most are acknowledged, some roll back once, a few three times (dead letter)
    once = payments & (fate >= 0.85) & (fate < 0.95)
    dead = payments & (fate >= 0.95)
    fine = payments & (fate < 0.85)
    events.append(
        _deliveries(
            "payments", ids[fine], "ACK", sent[fine] + _seconds(rng, 0.05, 0.5, int(fine.sum()))
        )
    )
    events.append(
        _deliveries("payments", ids[once], "ROLLBACK", sent[once] + np.timedelta64(200_000, "us"))
    )
    events.append(
        _deliveries("payments", ids[once], "ACK", sent[once] + np.timedelta64(1_500_000, "us"))
    )
    for offset in (200_000, 1_500_000, 4_000_000):
        events.append(
            _deliveries(
                "payments", ids[dead], "ROLLBACK", sent[dead] + np.timedelta64(offset, "us")
            )
        )

    # notifications: every email is read; a fifth of the SMS are never read and expire after 30 s
    events.append(
        _deliveries(
            "notifications.email",
            ids[notes],
            "ACK",
            sent[notes] + _seconds(rng, 0.1, 20, int(notes.sum())),
        )
    )
    sms_read = notes & (channel == "sms") & (fate < 0.8)
    events.append(
        _deliveries(
            "notifications.sms",
            ids[sms_read],
            "ACK",
            sent[sms_read] + _seconds(rng, 0.1, 20, int(sms_read.sum())),
        )
    )

    # a few consumers acknowledge twice: the second ACK is rejected
    twice = fine & (rng.random(messages) < 0.002)
    events.append(
        _deliveries("payments", ids[twice], "ACK", sent[twice] + np.timedelta64(3_000_000, "us"))
    )

    # an operator retries the dead-lettered payments once the traffic is over, then they are paid
    end = sent[-1] if messages else START
    retry_at = end + np.timedelta64(60, "s")
    dead_letters = _copy_ids(ids[dead], "DEAD_LETTER", "payments", "payments.DLA")
    # payments is its address's own name: the copy is routed at the address (no to_queue)
    retried = _copy_ids(dead_letters, "RETRY", "DLQ.payments", "payments")
    management = {
        "type": np.array(["management", "management"], object),
        "op": np.array(["RETRY", "MOVE"], object),
        "queue": np.array(["DLQ.payments", "orders"], object),
        "filter": np.array([None, "region = 'APAC' AND amount > 900"], object),
        "to_queue": np.array([None, "audit.large"], object),
        "at": np.array([retry_at, retry_at + np.timedelta64(1, "s")]),
    }
    events.append(management)
    events.append(
        _deliveries(
            "payments", retried, "ACK", np.full(len(retried), retry_at + np.timedelta64(5, "s"))
        )
    )

    table = pa.concat_tables([_table(sends)] + [_table(e) for e in events if len(e["type"])])
    time = pc.coalesce(table["sent_at"], table["at"])
    order = pc.sort_indices(
        pa.table(
            {"time": time, "kind": pc.not_equal(table["type"], "send"), "id": table["message_id"]}
        ),
        [("time", "ascending"), ("kind", "ascending"), ("id", "ascending")],
    )
    return table.take(order)


def _table(columns: Mapping[str, Any]) -> pa.Table:
    n = len(columns["type"])
    arrays = []
    for field in LOG:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, np.ndarray) and value.dtype.kind == "M":
            arrays.append(
                pa.array(value.astype("datetime64[us]"), pa.timestamp("us")).cast(field.type)
            )
        else:
            arrays.append(pa.array(value, field.type))
    return pa.Table.from_arrays(arrays, schema=LOG)


def write_log(path: str | Path, messages: int, seed: int = 7) -> Path:
    """Write :func:`traffic` as a Parquet log."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(traffic(messages, seed), path, row_group_size=128 * 1024)
    return path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.demo",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=HELP,
        epilog="example:\n  python -m jobs.demo --lake ./lake --messages 100000 --fresh",
    )
    parser.add_argument("--lake", default="./lake", help="lake root (default ./lake)")
    parser.add_argument("--conf", default="conf/broker.xml", help="the demo broker.xml")
    parser.add_argument(
        "--messages", type=int, default=20_000, help="messages to send (default 20000)"
    )
    parser.add_argument("--seed", type=int, default=7, help="the traffic's seed (default 7)")
    parser.add_argument("--fresh", action="store_true", help="delete the lake first")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Spark's own log and errors' tracebacks on the console, not in LAKE/_logs",
    )
    return parser.parse_args(argv)


def report(spark: SparkSession, lake_root: str) -> str:
    """Messages per queue and status in ``queue_messages``, as a text table."""
    rows = (
        spark.read.format("delta")
        .load(Lake.at(lake_root).queue_messages)
        .groupBy("queue")
        .pivot("status")
        .count()
        .na.fill(0)
        .orderBy("queue")
        .collect()
    )
    if not rows:
        return "  (no queue messages)"
    statuses = [c for c in rows[0].asDict() if c != "queue"]
    width = max(len("queue"), *(len(r.queue) for r in rows))
    lines = [f"  {'queue':<{width}}" + "".join(f"  {s:>13}" for s in statuses)]
    lines += [f"  {r.queue:<{width}}" + "".join(f"  {r[s]:>13,}" for s in statuses) for r in rows]
    return "\n".join(lines)


def main(
    argv: Sequence[str] | None = None,
    *,
    spark: SparkSession | None = None,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    args = parse_args(argv)
    lake = Path(args.lake)
    # held before --fresh empties the lake: another job may be writing it
    writer = take_lake(Lake.at(lake), "jobs.demo", sys.stderr)
    if writer is None:
        return 1
    with writer:
        if args.fresh:
            empty(lake)
        return _demo(args, lake, spark, out)


def empty(lake: Path) -> None:
    """Remove everything in ``lake`` but the writer lock this job holds."""
    keep = Path(lake, WRITER_LOCK)
    found = list(lake.iterdir()) if lake.is_dir() else []
    while found:
        path = found.pop()
        if path == keep.parent:
            found += [inner for inner in path.iterdir() if inner != keep]
        elif path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def _demo(args: argparse.Namespace, lake: Path, spark: SparkSession | None, out: TextIO) -> int:
    """Write the traffic log and replay it into ``lake`` (held)."""
    log = write_log(
        lake / "_logs" / f"demo-{args.messages}-{args.seed}.parquet", args.messages, args.seed
    )
    print(
        f"generated {args.messages:,} messages and their consumers' traffic: {log}",
        file=out,
        flush=True,
    )

    from jobs import replay

    stop = StopSignal()
    try:
        with job_session(
            spark, Lake.at(lake), "demo", verbose=args.verbose, err=sys.stderr, stop=stop
        ) as (session, log_file):
            job = ["--log", str(log), "--lake", str(lake), "--conf", args.conf]
            status = replay.main(
                job + ["--verbose"] * args.verbose,
                spark=session,
                out=out,
                log_file=log_file,
                stop=stop,
            )
            if status == 0:
                print(
                    "queue_messages by queue and status:\n" + report(session, str(lake)),
                    file=out,
                    flush=True,
                )
            return status
    except KeyboardInterrupt as stopped:  # Ctrl-C or SIGTERM as the session started
        return interrupted(sys.stderr, stopped)


if __name__ == "__main__":
    sys.exit(main())
