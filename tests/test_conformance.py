"""Every conformance scenario of ../shared/conformance passes against the real job.

A micro-batch spends much of its time waiting (py4j, the scheduler, Python
workers), so the selected scenarios run three at a time on the one session, each
in its own lake; every scenario is still its own test and reports its own failure.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

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

    def run(path: Path) -> None:
        Scenario(load(path), tmp_path_factory.mktemp(path.stem), spark).run()

    futures: dict[Path, Future] = {path: pool.submit(run, path) for path in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_conformance(outcomes, path):
    outcomes[path].result()
