"""Soak: the continuous job under a steady producer load; throughput, latency, memory.

``python -m jobs.route --trigger "1 second"`` runs as a separate process (its own
driver and JVM, as in production) for a few minutes (180 s after its warm-up by
default; ``--scale`` or ``SOAK_SECONDS`` change it) while a producer appends a batch
of orders every 0.5 s with delta-rs, and consumers acknowledge them (the orders and
their audit copies) about a second later, so the PENDING state stays small and steady.

- throughput: the job's input rows per second (its progress lines), produced rows/s;
- end-to-end latency: from the moment a producer's append returned to the moment a
  ``queue_messages`` commit holding the message is visible (new commits are read as
  they land: ``routed_at`` is event time, so it cannot tell);
- memory: resident set of the job process and all its children (the JVM, Python
  workers), sampled every 2 s and printed over time. The run lasts its duration AFTER
  a warm-up (4 micro-batches and at least 60 s: Python workers of each kind start in
  the first batches); then the median of the last fifth of the samples must be within
  10% of the median of the first fifth: printed with PASS/FAIL. The JVM runs with
  its heap committed and touched from the start (``-Xms`` = ``-Xmx``,
  ``-XX:+AlwaysPreTouch``): otherwise its resident set creeps up for minutes while it
  first fills the heap, which is warm-up, not a leak (seen: 0.4 to 1.5 GiB over 4.5
  minutes with a 1 GiB heap, flat afterwards).

Standalone: ``python -m bench.soak --seconds 600``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pyarrow as pa
from deltalake import write_deltalake

from bench import CONF, ROOT, Figure
from bench.watch import QueueWatcher
from routing.broker.ids import copy_id_py
from routing.io.lake import Lake
from routing.plan import schemas

DEFAULT_SECONDS = 180.0
TICK = 0.5  # seconds between producer appends
BATCH = 20  # orders per append (40 messages/s, 80 with their audit copies)
ACK_AFTER = 1.0  # seconds before consumers acknowledge
MAX_GROWTH = 0.10
HEAP = "1g"  # the job's driver heap (ROUTING_DRIVER_MEMORY)
WARM_UP = 60.0  # seconds at least: Python workers start, code is compiled, caches fill
WARM_BATCHES = 4  # ... and this many micro-batches (each kind of Python worker has started)
MAX_WARM_UP = 900.0
JOB = [sys.executable, "-m", "jobs.route"]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


@dataclass(frozen=True)
class Sample:
    """Resident memory of the job process tree at one moment (bytes)."""

    at: float
    driver: int  # the Python driver
    jvm: int  # its JVM
    workers: int  # Python workers and daemons forked by the JVM
    processes: int

    @property
    def total(self) -> int:
        return self.driver + self.jvm + self.workers


def sample_rss(process: psutil.Process) -> Sample:
    """Resident bytes of the job process and all its descendants, by kind."""
    driver = jvm = workers = count = 0
    with contextlib.suppress(psutil.Error):
        members = [process, *process.children(recursive=True)]
        for member in members:
            with contextlib.suppress(psutil.Error):
                resident = member.memory_info().rss
                count += 1
                if member.pid == process.pid:
                    driver += resident
                elif "java" in member.name():
                    jvm += resident
                else:
                    workers += resident
    return Sample(time.monotonic(), driver, jvm, workers, count)


@dataclass
class Producer:
    """Appends orders every tick and acknowledges earlier ones (one commit per table)."""

    lake: Lake
    appended: dict[int, float] = field(default_factory=dict)  # id -> wall time visible
    rows: int = 0
    _next_id: int = 1
    _unacked: list[tuple[float, list[int]]] = field(default_factory=list)

    def tick(self) -> None:
        now = datetime.now(UTC)
        ids = list(range(self._next_id, self._next_id + BATCH))
        self._next_id += BATCH
        orders = pa.table(
            {
                "message_id": pa.array(ids, pa.int64()),
                "address": ["orders"] * BATCH,
                "sent_at": pa.array([now] * BATCH, schemas.TIMESTAMP),
                # never EU (no exclusive divert) and amount <= 500: one audit copy each,
                # in audit.archive only
                "properties": pa.array(
                    [[("region", "US"), ("amount", str(i % 500))] for i in ids],
                    schemas.STRING_MAP,
                ),
                "body": pa.array([b'{"soak":%d}' % i for i in ids], pa.binary()),
            }
        )
        write_deltalake(self.lake.address_table("orders"), orders, mode="append")
        visible = time.time()
        self.appended.update(dict.fromkeys(ids, visible))
        self.rows += BATCH
        self._unacked.append((time.monotonic(), ids))
        due = [batch for t, batch in self._unacked if time.monotonic() - t >= ACK_AFTER]
        self._unacked = [(t, b) for t, b in self._unacked if time.monotonic() - t < ACK_AFTER]
        acked = [i for batch in due for i in batch]
        if acked:
            audit = [copy_id_py(i, "DIVERT", "orders-audit", "audit", None) for i in acked]
            at = now + timedelta(milliseconds=1)
            deliveries = pa.table(
                {
                    "queue": ["orders"] * len(acked) + ["audit.archive"] * len(audit),
                    "message_id": pa.array(acked + audit, pa.int64()),
                    "outcome": ["ACK"] * (2 * len(acked)),
                    "at": pa.array([at] * (2 * len(acked)), schemas.TIMESTAMP),
                },
                schema=schemas.DELIVERY,
            )
            write_deltalake(self.lake.deliveries, deliveries, mode="append")
            self.rows += len(deliveries)


def _job_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYSPARK_GATEWAY") and k != "SPARK_TESTING"
    }
    env.update(
        ROUTING_DRIVER_MEMORY=HEAP,
        ROUTING_SHUFFLE_PARTITIONS="2",
        PYTHONUNBUFFERED="1",
        # the whole heap committed and touched at start: a JVM otherwise grows its resident
        # set for minutes as it first fills its heap, which is warm-up, not a leak
        PYSPARK_SUBMIT_ARGS=(
            f'--conf "spark.driver.defaultJavaOptions=-Xms{HEAP} -XX:+AlwaysPreTouch" pyspark-shell'
        ),
    )
    return env


def _stop(job: subprocess.Popen) -> int | None:
    """SIGTERM to the driver (it ends its batch and stops its JVM), then the whole group."""
    status = None
    if job.poll() is None:
        job.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        status = job.wait(timeout=180)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        job.wait(timeout=30)
    return status if status is not None else job.returncode


def _batches(log: Path) -> int:
    """Micro-batches the job has reported so far."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    return sum(1 for line in text.splitlines() if line.startswith("batch "))


def soak(seconds: float, out=sys.stdout) -> list[Figure]:
    """Run the job under load for ``seconds`` after its warm-up; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    lake = Lake.at(work / "lake")
    producer, watcher = Producer(lake), QueueWatcher(lake.queue_messages)
    producer.tick()  # the input tables exist before the job starts
    log = work / "job.log"
    samples: list[Sample] = []
    warm: list[float] = []  # when the warm-up ended
    stop = threading.Event()
    with open(log, "wb") as handle:
        job = subprocess.Popen(
            [*JOB, "--conf", str(CONF), "--lake", lake.root, "--trigger", "1 second"],
            cwd=ROOT,
            env=_job_env(),
            stdout=handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    process = psutil.Process(job.pid)
    started = time.monotonic()

    def sample() -> None:
        while not stop.is_set():
            samples.append(sample_rss(process))
            if (
                not warm
                and time.monotonic() - started >= WARM_UP
                and (_batches(log) >= WARM_BATCHES)
            ):
                warm.append(time.monotonic())
            stop.wait(2.0)

    def producing() -> bool:
        now = time.monotonic()
        if warm:
            return now - warm[0] < seconds
        return now - started < MAX_WARM_UP

    sampler = threading.Thread(target=sample, daemon=True)
    status = None
    try:
        sampler.start()
        while producing() and job.poll() is None:
            tick = time.monotonic()
            producer.tick()
            watcher.poll()
            stop.wait(max(0.0, TICK - (time.monotonic() - tick)))
        produced_for = time.monotonic() - started
        # let the job catch up with the last appends (bounded)
        deadline = time.monotonic() + max(120.0, seconds / 2)
        while time.monotonic() < deadline and job.poll() is None:
            watcher.poll()
            if len(watcher.seen.keys() & producer.appended.keys()) == len(producer.appended):
                break
            time.sleep(0.5)
        running = job.poll() is None
    finally:
        stop.set()
        sampler.join(timeout=10)
        status = _stop(job)
    output = log.read_text(errors="replace")
    shutil.rmtree(work, ignore_errors=True)

    lines = [line for line in output.splitlines() if line.startswith("batch ")]
    rows_in = sum(
        int(line.split("rows in ")[1].split(",")[0]) for line in lines if "rows in" in line
    )
    latencies = [watcher.seen[i] - t for i, t in producer.appended.items() if i in watcher.seen]
    missing = len(producer.appended) - len(latencies)
    # memory: medians of the first and last fifth of the samples after warm-up
    after = [x for x in samples if warm and x.at >= warm[0]]
    window = max(1, len(after) // 5)
    first = statistics.median(x.total for x in after[:window]) if after else float("nan")
    last = statistics.median(x.total for x in after[-window:]) if after else float("nan")
    growth = (last - first) / first if after else float("nan")
    passed = len(after) >= 10 and growth < MAX_GROWTH
    mib = 1024 * 1024
    print("   memory over time (MiB):   t   driver      JVM  workers  processes", file=out)
    step = max(1, len(samples) // 15)
    for x in [*samples[::step], *samples[-1:]]:
        mark = "  <- warm-up ends" if warm and x.at >= warm[0] > x.at - 2.0 * step else ""
        print(
            f"   {x.at - started:>28.0f} {x.driver / mib:>8.0f} {x.jvm / mib:>8.0f} "
            f"{x.workers / mib:>8.0f} {x.processes:>10}{mark}",
            file=out,
        )
    warm_up = warm[0] - started if warm else float("nan")
    verdict = "PASS" if passed else "FAIL"
    print(f"   soak memory: {verdict} ({growth:+.1%} in {seconds:.0f} s after warm-up)", file=out)
    if not running:
        print(f"   the job stopped by itself (status {status}):\n{output[-3000:]}", file=out)
    return [
        Figure("soak: producing for", produced_for, "s"),
        Figure(f"  warm-up ({WARM_BATCHES} micro-batches, at least {WARM_UP:.0f} s)", warm_up, "s"),
        Figure("  micro-batches", len(lines), "batches"),
        Figure("  produced rows per second", producer.rows / produced_for, "rows/s"),
        Figure("  job input rows per second", rows_in / max(produced_for, 1e-9), "rows/s"),
        Figure("  end-to-end latency p50", percentile(latencies, 50), "s"),
        Figure("  end-to-end latency p95", percentile(latencies, 95), "s"),
        Figure("  end-to-end latency p99", percentile(latencies, 99), "s"),
        Figure("  messages not routed by the end", missing, "messages", "0", missing == 0),
        Figure("  job kept running", float(running), "", "1", running),
        Figure("  RSS (job + JVM + workers) after warm-up", first / mib, "MiB"),
        Figure("  RSS at the end", last / mib, "MiB"),
        Figure("  RSS growth after warm-up", growth * 100, "%", "< 10% PASS", passed),
    ]


def run(spark, scale: float) -> list[Figure]:
    """``python -m bench``: ``spark`` is not used (the job runs in its own process)."""
    seconds = float(os.environ.get("SOAK_SECONDS", DEFAULT_SECONDS * scale))
    return soak(max(seconds, 30.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS)
    args = parser.parse_args(argv)
    figures = soak(args.seconds)
    for figure in figures:
        print(figure.line(), flush=True)
    return 1 if any(f.ok is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
