"""Shapes: the job on the shapes a real broker has, each against a plain shape beside it.

Three shapes (issue 72), each routed by ``jobs.route --available-now`` as its own process
on a lake whose input tables hold a generated traffic log (``jobs.replay``'s loader), and
each printed as a ratio to a reference shape routed in the same run with the same traffic
mix and the same number of messages:

- **many addresses**: ``S`` services of 20 addresses ``svc.S.A``, an anycast queue each, a
  non-exclusive divert from each (``amount > 500``) to its service's multicast
  ``audit.S``, ``svc.S.#`` settings with a dead-letter address each over a ``#`` default;
  80% of the messages acknowledged, 15% rolled back one to three times (three: dead
  lettered), 5% left PENDING. Against the same traffic over 10 addresses. The job's log
  is searched for code generation that fell back (``Code grows beyond 64 KB``, ``failed
  to compile``).
- **competing consumers**: ``work`` with 4 anycast queues and ``jobs`` with 4, two of them
  filtered (``kind = 'a'``, ``kind = 'b'``), every message acknowledged on the queue its
  turn gave it. Against ``work`` and ``jobs`` with one queue each.
- **marginal throughput**: the many-address shape, its 10 addresses and the anycast-group
  shape are also routed with a tenth of the messages; the job's marginal throughput
  between the two sizes is set against the single-process router's
  (:mod:`bench.single_process`) on the same lakes, and the time a message adds at many
  addresses against the time it adds at 10 (what each run pays once cancelled: the
  tables and files an address has, the tables a first batch creates). The 10 addresses'
  two lakes are also routed warm, in turn by one process (:mod:`bench.warm`), as a
  continuous job or a long replay runs its batches.
- **backlog**: a batch of new messages and their acknowledgements behind ``N`` PENDING
  messages in one queue (routed first, not timed), against the same batch behind as many
  PENDING messages as it has; **draining**: the same, the batch acknowledging the oldest
  of the backlog rather than its own.

Every run must reject nothing: the traffic's acknowledgements name the queue each message
is in (:func:`anycast_turns` follows the broker's round robin).

``python -m bench shapes --scale S`` runs them as ``make bench`` does; ``python -m
bench.shapes --addresses 4000 --messages 500000`` runs one shape at the issue's size, and
``--rounds 3`` runs each of a figure's shapes three times in turn and takes the medians.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from bench import Figure, marginal
from bench.process import Run, run_job
from bench.single_process import written_counts
from jobs.demo import LOG, START
from jobs.replay import load_logs
from routing.broker.properties import LONG
from routing.io.lake import Lake

ADDRESSES = 400
"""Addresses of the many-address shape at scale 1 (the reference has 10)."""
MESSAGES = 100_000
"""Messages of the many-address and competing-consumer shapes at scale 1."""
BACKLOG = 1_000_000
"""PENDING messages the backlog shape's batch comes behind, at scale 1."""
BATCH = 10_000
"""Messages of the backlog shape's timed batch (not scaled)."""
MARGINAL = 10
"""The marginal throughput of a shape is measured from ``messages / MARGINAL`` messages to
``messages`` (100k to 1M at ``--messages 1000000``)."""
PER_SERVICE = 20
"""Addresses per service of the many-address shape (``svc.S.A``)."""
ROUNDS = 1
"""Runs of each shape whose median a figure takes (``--rounds``). A figure's shapes run in
turn, round after round (A, B, A, B), so the machine's drift falls on all of them: on two
shared CPUs single runs of one lake swing by several seconds."""
TARGET_RATIO = 1.3
"""The most a shape may cost per message against its reference (issue 72)."""
FALLBACK = re.compile(r"Code grows beyond 64 KB|failed to compile|[Cc]odegen.*(fall|disabled)")
"""What Spark logs when generated code was too large or did not compile and it fell back."""
SPACING_US = 1_000
"""Microseconds between two messages' ``sent_at``."""


@dataclass(frozen=True)
class Shape:
    """A broker and the traffic its producers and consumers append (a replay log)."""

    name: str
    broker: str
    log: pa.Table


# --------------------------------------------------------------------------------------
# Traffic
# --------------------------------------------------------------------------------------


def _time(micros: int) -> np.datetime64:
    return START + np.timedelta64(micros, "us")


def _send(message_id: int, address: str, properties: dict[str, str]) -> dict:
    typed = {"amount": LONG} if "amount" in properties else None
    return {
        "type": "send",
        "address": address,
        "message_id": message_id,
        "sent_at": _time(message_id * SPACING_US).item(),
        "priority": 4,
        "properties": list(properties.items()),
        "property_types": None if typed is None else list(typed.items()),
        "body": b"{}",
    }


def _delivery(queue: str, message_id: int, outcome: str, after_us: int) -> dict:
    return {
        "type": "delivery",
        "queue": queue,
        "message_id": message_id,
        "outcome": outcome,
        "at": _time(message_id * SPACING_US + after_us).item(),
    }


def _log(records: list[dict]) -> pa.Table:
    """The replay log of ``records``, in event-time order (sends before events at a time)."""
    records.sort(key=lambda r: (r.get("sent_at") or r["at"], r["type"] != "send", r["message_id"]))
    return pa.Table.from_pylist(records, schema=LOG)


def _consumed(rng: np.random.Generator, message_id: int, queue: str, attempts: int) -> list[dict]:
    """A consumer's deliveries of one message: 80% acknowledged, 15% rolled back one to
    three times (acknowledged after fewer than ``attempts``), 5% never received."""
    fate = rng.random()
    if fate < 0.05:
        return []
    rollbacks = int(rng.integers(1, 4)) if fate < 0.20 else 0
    events = [_delivery(queue, message_id, "ROLLBACK", 100_000 * (k + 1)) for k in range(rollbacks)]
    if rollbacks < attempts:
        events.append(_delivery(queue, message_id, "ACK", 100_000 * (rollbacks + 1)))
    return events


# --------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------

ATTEMPTS = 3
"""``max-delivery-attempts`` of the services' addresses."""


def many_addresses(addresses: int, messages: int, seed: int = 3) -> Shape:
    """:data:`PER_SERVICE` addresses a service (fewer when ``addresses`` is smaller), each
    with its queue, a filtered divert to the service's audit address, and the service's
    dead-letter address."""
    per = min(PER_SERVICE, addresses)
    services = max(1, addresses // per)
    names = [(s, f"svc.{s}.{a}") for s in range(services) for a in range(per)]
    declared = [
        f'<address name="{n}"><anycast><queue name="{n}"/></anycast></address>' for _, n in names
    ]
    for s in range(services):
        declared.append(
            f'<address name="audit.{s}"><multicast><queue name="audit.{s}.log"/></multicast>'
            "</address>"
        )
        declared.append(
            f'<address name="dla.{s}"><anycast><queue name="dla.{s}"/></anycast></address>'
        )
    diverts = [
        f'<divert name="audit.{n}"><address>{n}</address><forwarding-address>audit.{s}'
        '</forwarding-address><filter string="amount &gt; 500"/><exclusive>false</exclusive>'
        "</divert>"
        for s, n in names
    ]
    settings = [
        f'<address-setting match="svc.{s}.#"><dead-letter-address>dla.{s}</dead-letter-address>'
        f"<max-delivery-attempts>{ATTEMPTS}</max-delivery-attempts></address-setting>"
        for s in range(services)
    ]
    settings.append(
        '<address-setting match="#"><max-delivery-attempts>10</max-delivery-attempts>'
        "</address-setting>"
    )
    broker = _broker(declared, diverts, settings)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(names), messages)
    amounts = rng.integers(1, 1000, messages)
    records: list[dict] = []
    for i in range(messages):
        message_id, address = i + 1, names[picks[i]][1]
        records.append(_send(message_id, address, {"amount": str(amounts[i])}))
        records += _consumed(rng, message_id, address, ATTEMPTS)
    return Shape(f"{len(names)} addresses", broker, _log(records))


GROUP_FILTERS: dict[str, tuple[str | None, ...]] = {
    "work": (None, None, None, None),
    "jobs": ("kind = 'a'", "kind = 'b'", None, None),
}
"""The competing consumers: each address's anycast queues and their filters."""


def anycast_turns(filters: Sequence[str | None], kinds: Sequence[str]) -> list[int | None]:
    """The queue each message of ``kinds`` (in ``sent_at`` order) takes among anycast
    queues with ``filters`` (``kind = 'x'`` or None): the next one from the group's
    position whose filter matches (Artemis's ``BindingsImpl.getNextBinding``); None when
    none does."""
    position, taken = 0, []
    for kind in kinds:
        chosen = None
        for step in range(len(filters)):
            index = (position + step) % len(filters)
            if filters[index] in (None, f"kind = '{kind}'"):
                chosen = index
                break
        taken.append(chosen)
        if chosen is not None:
            position = (chosen + 1) % len(filters)
    return taken


def competing_consumers(messages: int, grouped: bool, seed: int = 5) -> Shape:
    """``work`` and ``jobs`` with their queues of :data:`GROUP_FILTERS` (``grouped``), or
    one queue each, the same messages acknowledged on the queue each takes."""
    declared = []
    for address, filters in GROUP_FILTERS.items():
        queues = (
            "".join(
                f'<queue name="{address}.{k}">'
                + ("" if f is None else f'<filter string="{f}"/>')
                + "</queue>"
                for k, f in enumerate(filters)
            )
            if grouped
            else f'<queue name="{address}"/>'
        )
        declared.append(f'<address name="{address}"><anycast>{queues}</anycast></address>')
    broker = _broker(declared, [], [])
    rng = np.random.default_rng(seed)
    addresses = rng.choice(np.array(list(GROUP_FILTERS), object), messages)
    kinds = rng.choice(np.array(["a", "b", "c"], object), messages)
    records: list[dict] = []
    for address, filters in GROUP_FILTERS.items():
        mine = np.flatnonzero(addresses == address)
        turns = anycast_turns(filters, [kinds[i] for i in mine])
        for i, turn in zip(mine.tolist(), turns, strict=True):
            message_id = i + 1
            records.append(_send(message_id, address, {"kind": str(kinds[i])}))
            if turn is not None:
                queue = f"{address}.{turn}" if grouped else address
                records.append(_delivery(queue, message_id, "ACK", 200_000))
    name = "anycast groups of 4" if grouped else "single-queue addresses"
    return Shape(name, broker, _log(records))


def backlog(pending: int, batch: int, draining: bool = False) -> tuple[Shape, Shape]:
    """``pending`` messages left PENDING in ``orders``, then ``batch`` new ones acknowledged
    (``draining``: ``batch`` new ones sent and the ``batch`` oldest acknowledged, as a
    consumer working through the backlog does): the two logs, routed one after the other."""
    broker = _broker(
        ['<address name="orders"><anycast><queue name="orders"/></anycast></address>'], [], []
    )
    first = [_send(i, "orders", {}) for i in range(1, pending + 1)]
    second: list[dict] = []
    for i in range(pending + 1, pending + batch + 1):
        ack = _delivery("orders", i, "ACK", 500_000)
        if draining:  # the oldest waiting, acknowledged when the new one would have been
            ack["message_id"] = i - pending
        second += [_send(i, "orders", {}), ack]
    name = f"{batch:,} {'draining' if draining else 'behind'} {pending:,}"
    return (Shape(f"{pending:,} PENDING", broker, _log(first)), Shape(name, broker, _log(second)))


def _broker(addresses: list[str], diverts: list[str], settings: list[str]) -> str:
    return (
        '<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">'
        f"<addresses>{''.join(addresses)}</addresses>"
        f"<diverts>{''.join(diverts)}</diverts>"
        f"<address-settings>{''.join(settings)}</address-settings>"
        "</core></configuration>"
    )


# --------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routed:
    """One ``jobs.route --available-now`` run over a shape's lake, and the single-process
    router's (:mod:`bench.single_process`) over the same inputs when it ran."""

    run: Run | None
    """None: the job failed (:attr:`error`)."""
    rejected: int
    fallbacks: int
    error: str | None = None
    single: Run | None = None
    agrees: bool | None = None
    """The job's ``queue_messages`` holds as many messages by queue and status as the
    single process's."""


def route(
    spark: SparkSession, work: Path, shapes: Sequence[Shape], single: bool = False
) -> list[Routed]:
    """Load each of ``shapes``' logs into one new lake and route it, in turn (they share
    the first's broker): each run as its own process; with ``single``, the single-process
    router first, on the same inputs."""
    lake = work / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    conf = work / "broker.xml"
    conf.write_text(shapes[0].broker, encoding="utf-8")
    routed = []
    for k, shape in enumerate(shapes):
        log = work / f"log{k}.parquet"
        pq.write_table(shape.log, log)
        load_logs(spark, Lake.at(lake), [str(log)])
        where = ["--conf", str(conf), "--lake", str(lake)]
        reference = (
            run_job([sys.executable, "-m", "bench.single_process", *where]) if single else None
        )
        try:
            run = run_job([sys.executable, "-m", "jobs.route", *where, "--available-now"])
        except RuntimeError as failed:  # said as a figure; the next shapes still run
            error = str(failed).strip().splitlines()[-1]
            routed.append(Routed(None, 0, _fallbacks(lake), error, reference))
            break
        agrees = None if reference is None else _queue_counts(spark, lake) == written_counts(lake)
        routed.append(Routed(run, _rejected(run.output), _fallbacks(lake), None, reference, agrees))
    shutil.rmtree(lake, ignore_errors=True)
    return routed


def in_turn(
    spark: SparkSession,
    work: Path,
    shapes: Sequence[Sequence[Shape]],
    *,
    single: bool = False,
    rounds: int = ROUNDS,
) -> list[Routed]:
    """Route each of ``shapes`` (:func:`route`'s shapes: the last one's run is timed)
    ``rounds`` times, one after the other in each round; each one's median run, with the
    median of its single-process runs."""
    runs: list[list[Routed]] = [[] for _ in shapes]
    for _ in range(rounds):
        for routed, shape in zip(runs, shapes, strict=True):
            routed.append(route(spark, work, shape, single=single)[-1])
    return [_median(routed) for routed in runs]


def _median(routed: list[Routed]) -> Routed:
    """The run of median time among ``routed`` (a failed one if any failed), with the
    single-process run of median time, and agreeing when every run agreed."""
    failed = [r for r in routed if r.run is None]
    if failed:
        return failed[0]
    middle = sorted(routed, key=lambda r: r.run.seconds if r.run else 0)[len(routed) // 2]
    singles = sorted((r.single for r in routed if r.single), key=lambda s: s.seconds)
    return dataclasses.replace(
        middle,
        single=singles[len(singles) // 2] if singles else None,
        agrees=None if middle.agrees is None else all(r.agrees for r in routed),
    )


def _queue_counts(spark: SparkSession, lake: Path) -> dict[tuple[str, str], int]:
    """Messages by queue and status in the job's ``queue_messages``."""
    rows = spark.read.format("delta").load(Lake.at(lake).queue_messages).groupBy("queue", "status")
    return {(r.queue, r.status): r["count"] for r in rows.count().collect()}


def _rejected(output: str) -> int:
    return sum(int(n) for n in re.findall(r", rejected (\d+),", output))


def _fallbacks(lake: Path) -> int:
    """Lines of the lake's job logs that say generated code fell back."""
    logs = (lake / "_logs").glob("route-*.log")
    return sum(len(FALLBACK.findall(log.read_text(errors="replace"))) for log in logs)


def _ratio(name: str, shape: Routed, reference: Routed) -> list[Figure]:
    if shape.run is None or reference.run is None:
        failed = shape if shape.run is None else reference
        which = "shape" if shape.run is None else "reference shape"
        return [Figure(f"{name}: the {which} FAILED ({failed.error})", float("nan"), "", "", False)]
    ratio = shape.run.seconds / reference.run.seconds
    figures = [
        Figure(name, shape.run.seconds, "s"),
        Figure("  the reference shape", reference.run.seconds, "s"),
        Figure(
            "  time per message against the reference shape",
            ratio,
            "x",
            f"<= {TARGET_RATIO}",
            ratio <= TARGET_RATIO,
        ),
    ]
    if shape.single is not None and reference.single is not None:
        # what the shape costs a plain process that writes the same tables: the part of
        # the ratio the lake's layout sets (a Delta table an address, SPEC §3)
        figures.append(
            Figure(
                "  the single process, shape against reference shape",
                shape.single.seconds / reference.single.seconds,
                "x",
            )
        )
    for which, routed in (("shape", shape), ("reference shape", reference)):
        if routed.single is not None and routed.run is not None:
            figures += [
                Figure(
                    f"  the {which}: job against the single process",
                    routed.run.seconds / routed.single.seconds,
                    "x",
                ),
                Figure(
                    f"  the {which}: queues as the single process's",
                    float(bool(routed.agrees)),
                    "",
                    "1",
                    bool(routed.agrees),
                ),
            ]
    return figures


def run(spark: SparkSession, scale: float) -> list[Figure]:
    messages = max(1_000, int(MESSAGES * scale))
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as folder:
        work = Path(folder)
        figures += many_address_figures(spark, work, ADDRESSES, messages)
        figures += competing_figures(spark, work, messages)
        pending = max(BATCH, int(BACKLOG * scale))
        figures += backlog_figures(spark, work, pending, BATCH)
        figures += backlog_figures(spark, work, pending, BATCH, draining=True)
    return figures


def _marginal(name: str, routed: dict[int, Routed]) -> list[Figure]:
    """The job's marginal throughput between the two sizes of ``routed`` (messages: run)
    against the single process's on the same lakes."""
    small, large = sorted(routed)
    title = f"marginal throughput ({large:,} - {small:,}), {name}"
    single = _single_marginal(routed)
    if single is None or any(r.run is None for r in routed.values()):
        return [Figure(f"{title}: a run FAILED", float("nan"), "", "", False)]
    job = marginal({n: r.run.seconds for n, r in routed.items() if r.run})
    job_cpu = marginal({n: r.run.cpu_seconds for n, r in routed.items() if r.run})
    single_cpu = marginal({n: r.single.cpu_seconds for n, r in routed.items() if r.single})
    return [
        Figure(title, job, "msg/s"),
        _against_single(job, single),
        # messages a CPU-second adds (the CPU time of each process tree): what the
        # throughputs would be on one CPU each
        Figure(
            "  messages a CPU-second adds, job against single process", job_cpu / single_cpu, "x"
        ),
    ]


def _against_single(job: float, single: float) -> Figure:
    """A marginal throughput of the job against the single process's (target: 3x)."""
    return Figure("  against the single process's", job / single, "x", ">= 3x", job / single >= 3)


def _single_marginal(routed: dict[int, Routed]) -> float | None:
    """The single process's marginal throughput between the sizes of ``routed`` (None: a
    size has no single-process run)."""
    singles = {n: r.single.seconds for n, r in routed.items() if r.single is not None}
    return marginal(singles) if len(singles) == len(routed) else None


def _marginal_ratio(shape: dict[int, Routed], reference: dict[int, Routed]) -> list[Figure]:
    """The time a message adds to a shape's run against the time it adds to its reference's
    (:func:`marginal` of both): the cost per message with what each run pays once (the
    session, one table and one file an address at least, the tables a first batch creates)
    cancelled."""
    runs = [r.run for r in (*shape.values(), *reference.values())]
    if any(r is None for r in runs):
        return []  # a failed run is said by the other figures
    ratio = marginal({n: r.run.seconds for n, r in reference.items() if r.run}) / marginal(
        {n: r.run.seconds for n, r in shape.items() if r.run}
    )
    return [
        Figure(
            "  time a message adds, against the reference shape",
            ratio,
            "x",
            f"<= {TARGET_RATIO}",
            0 < ratio <= TARGET_RATIO,  # not above 0: the sizes are too close to tell
        )
    ]


def warm_marginal(
    spark: SparkSession,
    work: Path,
    name: str,
    shapes: dict[int, Shape],
    single: float | None,
    rounds: int = ROUNDS,
) -> list[Figure]:
    """The job's marginal throughput between the two sizes of ``shapes`` (messages: shape)
    routed warm: their lakes in turn by one process (:mod:`bench.warm`), ``rounds`` rounds
    after a first one left out (its code ran cold), the median round's; against ``single``,
    the single process's marginal on the same traffic (None: not known)."""
    small, large = sorted(shapes)
    title = f"warm marginal throughput ({large:,} - {small:,}), {name}"
    conf = work / "warm-broker.xml"
    conf.write_text(shapes[small].broker, encoding="utf-8")
    lakes: dict[str, int] = {}  # lake -> its messages
    for size in (small, large):
        lake, log = work / f"warm-lake-{size}", work / f"warm-log-{size}.parquet"
        shutil.rmtree(lake, ignore_errors=True)
        pq.write_table(shapes[size].log, log)
        load_logs(spark, Lake.at(lake), [str(log)])
        lakes[str(lake)] = size
    command = [sys.executable, "-m", "bench.warm", "--conf", str(conf), *lakes]
    try:
        run = run_job([*command, "--rounds", str(rounds + 1)])
    except RuntimeError as failed:
        error = str(failed).strip().splitlines()[-1]
        return [Figure(f"{title}: FAILED ({error})", float("nan"), "", "", False)]
    finally:
        for lake in lakes:
            shutil.rmtree(lake, ignore_errors=True)
    seconds: dict[int, dict[int, float]] = {}  # round -> size -> seconds
    for line in run.output.splitlines():
        if line.startswith("{"):
            timed = json.loads(line)
            seconds.setdefault(timed["round"], {})[lakes[timed["lake"]]] = timed["seconds"]
    throughputs = sorted(marginal(seconds[r]) for r in sorted(seconds)[1:])
    job = throughputs[len(throughputs) // 2]
    figures = [Figure(title, job, "msg/s")]
    if single is not None:
        figures.append(_against_single(job, single))
    return figures


def many_address_figures(
    spark: SparkSession, work: Path, addresses: int, messages: int, rounds: int = ROUNDS
) -> list[Figure]:
    small = messages // MARGINAL
    tens = {m: many_addresses(10, m) for m in (messages, small)}
    reference, reference_smaller, shape, smaller = in_turn(
        spark,
        work,
        [[tens[messages]], [tens[small]]]
        + [[many_addresses(addresses, m)] for m in (messages, small)],
        single=True,
        rounds=rounds,
    )
    shapes = {small: smaller, messages: shape}
    references = {small: reference_smaller, messages: reference}
    return [
        *_ratio(f"{messages:,} messages, {addresses:,} addresses against 10", shape, reference),
        *_marginal_ratio(shapes, references),
        *_marginal(f"{addresses:,} addresses", shapes),
        *_marginal("10 addresses", references),
        *warm_marginal(
            spark,
            work,
            "10 addresses",
            tens,
            _single_marginal(references),
            rounds,
        ),
        Figure(
            f"  code generation fallbacks at {addresses:,} addresses",
            shape.fallbacks,
            "lines",
            "0",
            shape.fallbacks == 0,
        ),
        _none_rejected(shape, reference),
    ]


def competing_figures(
    spark: SparkSession, work: Path, messages: int, rounds: int = ROUNDS
) -> list[Figure]:
    small = messages // MARGINAL
    reference, shape, smaller = in_turn(
        spark,
        work,
        [
            [competing_consumers(messages, grouped=False)],
            [competing_consumers(messages, grouped=True)],
            [competing_consumers(small, grouped=True)],
        ],
        single=True,
        rounds=rounds,
    )
    return [
        *_ratio(f"{messages:,} messages, anycast groups of 4 against 1", shape, reference),
        *_marginal("anycast groups of 4", {small: smaller, messages: shape}),
        _none_rejected(shape, reference),
    ]


def backlog_figures(
    spark: SparkSession,
    work: Path,
    pending: int,
    batch: int,
    rounds: int = ROUNDS,
    draining: bool = False,
) -> list[Figure]:
    shapes = [backlog(batch, batch, draining), backlog(pending, batch, draining)]
    reference, shape = in_turn(spark, work, shapes, rounds=rounds)
    if draining:
        name = f"{batch:,} messages, the {batch:,} oldest of {pending:,} PENDING acknowledged"
    else:
        name = f"{batch:,} messages behind {pending:,} PENDING"
    return [
        *_ratio(f"{name} against {batch:,}", shape, reference),
        _none_rejected(shape, reference),
    ]


def _none_rejected(*runs: Routed) -> Figure:
    rejected = sum(r.rejected for r in runs)
    return Figure("  rows rejected (the traffic is valid)", rejected, "rows", "0", rejected == 0)


SHAPES: dict[str, Callable[[SparkSession, Path, argparse.Namespace], list[Figure]]] = {
    "many": lambda spark, work, a: many_address_figures(
        spark, work, a.addresses, a.messages, a.rounds
    ),
    "competing": lambda spark, work, a: competing_figures(spark, work, a.messages, a.rounds),
    "backlog": lambda spark, work, a: backlog_figures(spark, work, a.pending, a.batch, a.rounds),
    "draining": lambda spark, work, a: backlog_figures(
        spark, work, a.pending, a.batch, a.rounds, draining=True
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.shapes", description=__doc__.strip().splitlines()[0]
    )
    parser.add_argument("shapes", nargs="*", default=list(SHAPES), help=f"any of {list(SHAPES)}")
    parser.add_argument("--addresses", type=int, default=ADDRESSES)
    parser.add_argument("--messages", type=int, default=MESSAGES)
    parser.add_argument("--pending", type=int, default=BACKLOG)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help="runs of each shape, in turn; figures take the median",
    )
    args = parser.parse_args(argv)
    from routing.io.session import build_session

    spark = build_session("routing-bench-shapes")
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-shapes-") as folder:
        for name in args.shapes:
            for figure in SHAPES[name](spark, Path(folder), args):
                print(figure.line(), flush=True)
                failed |= figure.ok is False
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
