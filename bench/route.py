"""Route: ``jobs.route --available-now`` over demo lakes, as a user runs it (issue 22).

Each lake holds the demo workload's input tables (``jobs.demo`` traffic loaded by
``jobs.replay``'s loader, not routed); the job runs as its own process on a copy of it,
so the figures include the JVM start, the query start and the writes:

- the wall time on a ten-message lake (JVM start included);
- the marginal throughput ``(T(1M) - T(100k)) / 900k``, which cancels the fixed costs;
- the scaling from one core to two: 300k messages with ``local[1]`` against ``local[2]``,
  and ``local[1]`` pinned to one CPU (``taskset``): ``local[1]`` runs one task at a time,
  but the Python workers it feeds, the JIT compiler, the garbage collector and the
  driver still use the second core, so only the pinned run is a one-core machine.

``--scale`` shrinks the sizes (not the ten-message lake).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import SparkSession

from bench import Figure, marginal_figures
from jobs.demo import write_log
from jobs.replay import load_logs
from routing.io.lake import Lake

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf" / "broker.xml"
SIZES = (100_000, 1_000_000)
SCALING = 300_000


def input_lake(spark: SparkSession, workdir: Path, messages: int) -> Path:
    """A lake holding the demo traffic of ``messages`` messages, not yet routed."""
    root = workdir / f"input-{messages}"
    log = write_log(workdir / f"demo-{messages}.parquet", messages)
    load_logs(spark, Lake.at(str(root)), [str(log)])
    return root


def route(lake: Path, workdir: Path, master: str | None = None, cpus: str | None = None) -> float:
    """Seconds of one ``jobs.route --available-now`` process on a fresh copy of ``lake``
    (``cpus``: the CPUs it may run on, ``taskset``'s list)."""
    copy = workdir / "routed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(lake, copy)
    env = dict(os.environ)
    if master:
        env["ROUTING_SPARK_MASTER"] = master
    command = [sys.executable, "-m", "jobs.route", "--conf", str(CONF), "--lake", str(copy)]
    if cpus is not None:
        command = ["taskset", "--cpu-list", cpus, *command]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--available-now"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"jobs.route exited {done.returncode}:\n{done.stderr[-3000:]}")
    shutil.rmtree(copy, ignore_errors=True)
    return seconds


def run(spark: SparkSession, scale: float) -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-route-"))
    figures: list[Figure] = []
    try:
        ten = route(input_lake(spark, workdir, 10), workdir)
        figures.append(
            Figure("ten-message lake, wall (JVM start included)", ten, "s", "< 10 s", ten < 10)
        )

        times = {}
        for size in (max(1000, int(s * scale)) for s in SIZES):
            times[size] = route(input_lake(spark, workdir, size), workdir)
            figures.append(Figure(f"{size:,} messages, wall", times[size], "s"))
        figures += marginal_figures(times, 65_000)

        size = max(1000, int(SCALING * scale))
        lake = input_lake(spark, workdir, size)
        one, two = route(lake, workdir, "local[1]"), route(lake, workdir, "local[2]")
        figures.append(Figure(f"{size:,} messages on local[1], wall", one, "s"))
        figures.append(Figure(f"{size:,} messages on local[2], wall", two, "s"))
        figures.append(
            Figure("  speed-up of the second core", one / two, "x", ">= 1.7x", one / two >= 1.7)
        )
        if shutil.which("taskset") and len(os.sched_getaffinity(0)) >= 2:
            pinned = route(lake, workdir, "local[1]", cpus="0")
            figures.append(Figure(f"{size:,} messages on local[1] pinned to one CPU", pinned, "s"))
            figures.append(Figure("  speed-up of two CPUs over one", pinned / two, "x"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return figures
