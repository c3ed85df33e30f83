"""A job run as its own process, as users run it: its wall time, and what its process tree used."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psutil

from bench import ROOT


@dataclass(frozen=True)
class Run:
    """One process run to its end."""

    seconds: float
    """Wall time, from start to exit."""
    cpu_seconds: float
    """User and system CPU time of every process of the tree (the JVM, the Python workers):
    each process's last reading before it exited, sampled every ``every`` seconds."""
    peak_pss: int
    """The tree's largest proportional set size seen (0: not sampled)."""
    output: str
    """What it wrote to stdout and stderr."""

    @property
    def cores(self) -> float:
        """CPUs busy on average over the run."""
        return self.cpu_seconds / self.seconds


def run_job(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    memory: bool = False,
    every: float = 0.25,
) -> Run:
    """Run ``command`` from the project's root, sampling its process tree's CPU time (and its
    PSS with ``memory``) until it exits; raise if it fails.

    The JVM a job starts is not a child it waits for, so the tree is read from ``/proc``
    (:mod:`psutil`) while it runs rather than from the parent's ``getrusage``.
    """
    started = time.perf_counter()
    process = subprocess.Popen(
        list(command),
        cwd=ROOT,
        env=None if env is None else dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None  # piped above
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()
    watched = psutil.Process(process.pid)
    cpu: dict[tuple[int, float], float] = {}
    peak = 0
    while process.poll() is None:
        tree = [watched, *_children(watched)]
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                times = p.cpu_times()
                cpu[(p.pid, p.create_time())] = times.user + times.system
        if memory:
            peak = max(peak, _pss(tree))
        time.sleep(every)
    reader.join()
    seconds = time.perf_counter() - started
    text = "".join(output)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}:\n{text[-3000:]}")
    return Run(seconds, sum(cpu.values()), peak, text)


def _children(process: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        return process.children(recursive=True)
    return []


def _pss(tree: Sequence[psutil.Process]) -> int:
    """Proportional set size of the process tree: Spark forks its Python workers from one
    daemon, and a sum of resident sets would count the pages they share once per worker
    (about 0.7 GiB too much at 1M messages)."""
    total = 0
    for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += p.memory_full_info().pss
    return total
