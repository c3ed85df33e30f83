"""Every conformance scenario of ../shared/conformance passes against the real job.

A micro-batch spends much of its time waiting (py4j, the scheduler, Python
workers), so the selected scenarios run three at a time, each in its own lake;
every scenario is still its own test and reports its own failure.

Each worker thread has its own session (``newSession``: the one SparkContext,
its own registry of data sources). Spark's Python data sources share one
environment map between the registered source and the functions made from it,
and the driver writes into that map when it plans a read, so two streaming
queries planning reads of one registered source while tasks of it are
serialised can corrupt a task (``java.io.OptionalDataException``). The job itself
runs one query per session and never meets this.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from routing.lake_source import register
from tests.conformance import Scenario, load
from tests.conftest import SHARED

SCENARIOS = sorted((SHARED / "conformance").glob("*.json"))
CONCURRENT = 3


@pytest.fixture(scope="module")
def outcomes(request, spark, tmp_path_factory):
    """Start the scenarios selected for this run; map each path to its future."""
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        if item.originalname == "test_conformance" and hasattr(item, "callspec")
    ]
    pool = ThreadPoolExecutor(CONCURRENT, thread_name_prefix="conformance")
    sessions = threading.local()

    def run(path: Path) -> None:
        if not hasattr(sessions, "spark"):
            sessions.spark = spark.newSession()
            register(sessions.spark)
        Scenario(load(path), tmp_path_factory.mktemp(path.stem), sessions.spark).run()

    futures: dict[Path, Future] = {path: pool.submit(run, path) for path in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_conformance(outcomes, path):
    outcomes[path].result()
