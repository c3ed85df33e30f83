"""Replay: messages/s of ``jobs.replay`` on the demo workload, peak memory, append-to-queue latency.

Each replay runs as its own process (``python -m jobs.replay``) on a fresh lake, the
way a user runs it, so its figures include the session start; the marginal
throughput ``(T(1M) - T(100k)) / 900k`` cancels it, and is set against the single-process
router's (:mod:`bench.single_process`) over the same logs. Peak memory is the largest
proportional set size of the job's whole process tree (Python driver, JVM, Python workers)
sampled every 0.5 s. Latency: ``jobs.route`` runs continuously with a 1 s trigger
while a producer appends 120 rows to an address table every second
(delta-rs, another process's view); each batch's latency is the time from its
commit to the moment its rows are in ``queue_messages``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from deltalake import write_deltalake

from bench import CONF, ROOT, Figure, marginal_figures, single_process
from bench.process import Run, run_job
from bench.storage import message_table
from bench.watch import QueueWatcher
from jobs.demo import write_log
from routing.io.lake import Lake

SIZES = (100_000, 1_000_000)
TEN_MILLION = False
"""Also replay 10M messages once (``python -m bench replay --ten-million``): its time
against ``11 x T(1M)`` and its peak memory against the 1M run's (flat)."""


def replay(log: Path, lake: Path) -> Run:
    """One ``jobs.replay`` process of ``log`` into ``lake``, its peak memory sampled every 0.5 s."""
    command = [sys.executable, "-m", "jobs.replay", "--log", str(log), "--lake", str(lake)]
    return run_job([*command, "--conf", str(CONF)], memory=True, every=0.5)


def _phases(output: str) -> list[Figure]:
    """The load's seconds and the routing run's micro-batches, from a replay's output
    (``loaded 1 log(s) in 12.3 s``, ``batch 0: rows in 2510052, …``)."""
    lines = output.splitlines()
    loaded = [float(line.split()[-2]) for line in lines if line.startswith("loaded ")]
    batches = [
        int(line.split("rows in ")[1].split(",")[0])
        for line in lines
        if line.startswith("batch ") and "rows in " in line
    ]
    figures = [Figure("  of which loading the log", loaded[0], "s")] if loaded else []
    if batches:
        largest, smallest = max(batches), min(batches)
        figures.append(
            Figure(
                f"  micro-batches of {smallest:,} to {largest:,} input rows",
                len(batches),
                "batches",
            )
        )
    return figures


POLL = 0.01
"""Seconds between the latency run's looks at ``queue_messages``: a look is one ``stat``
until a commit lands (:class:`~bench.watch.QueueWatcher`), and a latency is measured up
to a poll late (50 ms polls overstated it by 25 ms on average)."""

ROUTE_CONTINUOUSLY = [
    sys.executable,
    "-m",
    "jobs.route",
    "--conf",
    str(CONF),
    "--trigger",
    "1 second",
]
"""The latency run's job: ``jobs.route`` at a 1 s trigger (the lake's ``--lake`` is added)."""


def latency(
    workdir: Path, batches: int = 30, rows: int = 120, job: Sequence[str] = ROUTE_CONTINUOUSLY
) -> list[float]:
    """Seconds from each producer commit to its rows in ``queue_messages``, with ``job``
    (a command, given ``--lake``) running on the lake."""
    lake = Lake.at(workdir / "latency-lake")
    template = message_table(rows)
    source = lake.address_table("orders")
    write_deltalake(source, template.slice(0, 0), mode="append")
    process = subprocess.Popen(
        [*job, "--lake", lake.root],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    seen: list[float] = []
    watcher = QueueWatcher(lake.queue_messages, clock=time.perf_counter)
    try:
        time.sleep(20)  # session start and the first (empty) batches
        start_id = 10_000_000
        for n in range(batches):
            ids = np.arange(start_id + n * rows, start_id + (n + 1) * rows, dtype=np.int64)
            now = np.datetime64(int(time.time() * 1e6), "us")
            batch = template.set_column(0, "message_id", [ids]).set_column(
                3, "sent_at", [np.full(rows, now).astype("datetime64[us]")]
            )
            batch = batch.cast(template.schema)
            write_deltalake(source, batch, mode="append")
            committed = time.perf_counter()
            last = int(ids[-1])
            if process.poll() is not None:
                raise RuntimeError(f"the latency run's job exited {process.returncode}")
            while time.perf_counter() - committed < 30:
                watcher.poll()
                if last in watcher.seen:
                    seen.append(watcher.seen[last] - committed)
                    break
                time.sleep(POLL)
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - committed)))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return seen


def run(spark, scale: float) -> list[Figure]:
    del spark  # the job runs in its own processes, as users run it
    workdir = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    figures: list[Figure] = []
    try:
        times: dict[int, float] = {}
        single: dict[int, float] = {}
        peaks: dict[int, int] = {}
        for size in (max(1000, int(s * scale)) for s in SIZES):
            log = write_log(workdir / f"demo-{size}.parquet", size)
            single[size] = single_process.timed(CONF, ["--log", str(log)], workdir).seconds
            done = replay(log, workdir / f"lake-{size}")
            seconds, output = done.seconds, done.output
            times[size], peaks[size] = seconds, done.peak_pss
            rows_in = next(
                (
                    line.split()[-1]
                    for line in output.splitlines()
                    if "rows in" in line and "batch" not in line
                ),
                "?",
            )
            figures.append(
                Figure(
                    f"replay of {size:,} messages ({rows_in} input rows), whole run", seconds, "s"
                )
            )
            figures.append(Figure("  messages/s incl. session start", size / seconds, "msg/s"))
            figures += _phases(output)
            shutil.rmtree(workdir / f"lake-{size}", ignore_errors=True)
        figures += marginal_figures(times, 60_000, single)
        large = max(times)
        peak_gib = peaks[large] / 2**30
        figures.append(
            Figure(
                f"peak memory of the job at {large:,} messages",
                peak_gib,
                "GiB",
                "< 3 GiB",
                peak_gib < 3,
            )
        )
        if TEN_MILLION:
            size = max(1000, int(10_000_000 * scale))
            log = write_log(workdir / f"demo-{size}.parquet", size)
            done = replay(log, workdir / f"lake-{size}")
            seconds, peak, output = done.seconds, done.peak_pss, done.output
            shutil.rmtree(workdir / f"lake-{size}", ignore_errors=True)
            bound = 11 * times[large]
            figures.append(
                Figure(
                    f"replay of {size:,} messages",
                    seconds,
                    "s",
                    f"<= {bound:.0f} s",
                    seconds <= bound,
                )
            )
            figures += _phases(output)
            figures.append(
                Figure(
                    f"  peak memory against {large:,} messages",
                    peak / peaks[large],
                    "x",
                    "<= 1.1x (flat)",
                    peak <= 1.1 * peaks[large],
                )
            )
        waits = latency(workdir)
        if waits:
            p50, p95 = np.percentile(waits, [50, 95])
            figures.append(
                Figure(
                    f"append-to-queue latency p50 ({len(waits)} batches, 1 s trigger)",
                    p50,
                    "s",
                    "< 2 s",
                    p50 < 2,
                )
            )
            figures.append(Figure("append-to-queue latency p95", p95, "s", "< 5 s", p95 < 5))
        else:
            figures.append(
                Figure(
                    "append-to-queue latency: no batch arrived", float("nan"), "s", "< 2 s", False
                )
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return figures
