"""Route: ``jobs.route --available-now`` over demo lakes, as a user runs it (issue 22).

Each lake holds the demo workload's input tables (``jobs.demo`` traffic loaded by
``jobs.replay``'s loader, not routed); the job runs as its own process on a copy of it,
so the figures include the JVM start, the query start and the writes:

- the wall time on a ten-message lake (JVM start included);
- the marginal throughput ``(T(1M) - T(100k)) / 900k``, which cancels the fixed costs,
  against the single-process router's (:mod:`bench.single_process`) on the same lakes;
- the scaling from one core to two: 300k messages with ``local[1]`` against ``local[2]``,
  and ``local[1]`` pinned to one CPU (``taskset``): ``local[1]`` runs one task at a time,
  but the Python workers it feeds, the JIT compiler, the garbage collector and the
  driver still use the second core, so only the pinned run is a one-core machine. Each
  of the three prints the CPUs its process tree kept busy on average (CPU time / wall).

``--scale`` shrinks the sizes (not the ten-message lake).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from pyspark.sql import SparkSession

from bench import CONF, Figure, marginal_figures, single_process
from bench.process import Run, run_job
from jobs.demo import write_log
from jobs.replay import load_logs
from routing.io.lake import Lake

SIZES = (100_000, 1_000_000)
SCALING = 300_000


def input_lake(spark: SparkSession, workdir: Path, messages: int) -> Path:
    """A lake holding the demo traffic of ``messages`` messages, not yet routed."""
    root = workdir / f"input-{messages}"
    log = write_log(workdir / f"demo-{messages}.parquet", messages)
    load_logs(spark, Lake.at(str(root)), [str(log)])
    return root


def route(lake: Path, workdir: Path, master: str | None = None, cpus: str | None = None) -> Run:
    """One ``jobs.route --available-now`` process on a fresh copy of ``lake`` (``cpus``: the
    CPUs it may run on, ``taskset``'s list)."""
    copy = workdir / "routed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(lake, copy)
    env = dict(os.environ)
    if master:
        env["ROUTING_SPARK_MASTER"] = master
    command = [sys.executable, "-m", "jobs.route", "--conf", str(CONF), "--lake", str(copy)]
    if cpus is not None:
        command = ["taskset", "--cpu-list", cpus, *command]
    done = run_job([*command, "--available-now"], env=env)
    shutil.rmtree(copy, ignore_errors=True)
    return done


def run(spark: SparkSession, scale: float) -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-route-"))
    figures: list[Figure] = []
    try:
        ten = route(input_lake(spark, workdir, 10), workdir).seconds
        figures.append(
            Figure("ten-message lake, wall (JVM start included)", ten, "s", "< 10 s", ten < 10)
        )

        times, single = {}, {}
        for size in (max(1000, int(s * scale)) for s in SIZES):
            lake = input_lake(spark, workdir, size)
            single[size] = single_process.timed(CONF, ["--lake", str(lake)], workdir).seconds
            times[size] = route(lake, workdir).seconds
            figures.append(Figure(f"{size:,} messages, wall", times[size], "s"))
            figures.append(Figure("  the single-process router", single[size], "s"))
        figures += marginal_figures(times, 65_000, single)

        size = max(1000, int(SCALING * scale))
        lake = input_lake(spark, workdir, size)
        runs = {"local[1]": route(lake, workdir, "local[1]")}
        runs["local[2]"] = route(lake, workdir, "local[2]")
        pinned = bool(shutil.which("taskset")) and len(os.sched_getaffinity(0)) >= 2
        if pinned:
            runs["local[1] pinned to one CPU"] = route(lake, workdir, "local[1]", cpus="0")
        for master, done in runs.items():
            figures.append(Figure(f"{size:,} messages on {master}, wall", done.seconds, "s"))
            figures.append(Figure("  CPUs busy on average", done.cores, "CPUs"))
        speed_up = runs["local[1]"].seconds / runs["local[2]"].seconds
        figures.append(
            Figure("speed-up of local[2] over local[1]", speed_up, "x", ">= 1.7x", speed_up >= 1.7)
        )
        if pinned:
            one_cpu = runs["local[1] pinned to one CPU"].seconds / runs["local[2]"].seconds
            figures.append(Figure("speed-up of two CPUs over one (local[1] pinned)", one_cpu, "x"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return figures
