"""Every conformance scenario of ../shared/conformance, and every one of tests/scenarios,
passes against the real job.

The selected scenarios run in worker threads, two at a time, each in its own
lake and its own session; every scenario is still its own test and reports its
own failure.

Two at a time: the Python data sources that once read and wrote every row could
corrupt a map Spark shares between concurrent queries; the input stream is now a source
of the JVM, planned by an object of each query's own in this process, and scenarios run
side by side (docs/DESIGN.md, "The input stream's source runs in the JVM, planned in the
driver").
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conformance import Scenario, load
from tests.conftest import SHARED

SCENARIOS = [
    *sorted((SHARED / "conformance").glob("*.json")),
    # the project's own, for behaviours the public ones do not show (tests/test_artemis.py
    # plays both on a real broker)
    *sorted((Path(__file__).resolve().parent / "scenarios").glob("*.json")),
]
CONCURRENT = 2  # two cores: scenarios are mostly driver latency, and overlap well


@pytest.fixture(scope="module")
def outcomes(request, spark, tmp_path_factory):
    """Start the scenarios selected for this run; map each path to its future."""
    selected = [
        item.callspec.params["path"]
        for item in request.session.items
        if item.originalname == "test_conformance" and hasattr(item, "callspec")
    ]
    # Made here, on one thread: the first mktemp of a worker creates its base
    # directory (removing an old one), which two threads racing would remove twice.
    workdirs = {path: tmp_path_factory.mktemp(path.stem) for path in selected}
    pool = ThreadPoolExecutor(CONCURRENT, thread_name_prefix="conformance")
    sessions = threading.local()

    def run(path: Path) -> None:
        if not hasattr(sessions, "spark"):
            sessions.spark = spark.newSession()
        Scenario(load(path), workdirs[path], sessions.spark).run()

    futures: dict[Path, Future] = {path: pool.submit(run, path) for path in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_conformance(outcomes, path):
    outcomes[path].result()
