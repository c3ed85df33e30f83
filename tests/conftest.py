"""One SparkSession for the whole test run (STYLE: tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_TESTING", "1")

SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.is_dir():  # a checkout outside the workplace carries its own copy
    SHARED = Path(__file__).resolve().parent / "shared"


LONGEST_FIRST = (
    "test_conformance.py",
    "test_recorded_random.py",
    "test_faults.py",
    "test_notebooks.py",
    "test_auto_created_queues.py",
    "test_readme.py",
    "test_random_lakes.py",
    "test_bad_input.py",
    "test_cluster.py",
    "test_delivery_rules.py",
    "test_audit.py",
    "test_routing_rules.py",
    "test_artemis.py",
)
"""The test files that take longest (from about one minute to ten of a full run's time),
run first. ``make test``'s two workers take a file at a time (``--dist loadfile``, in this
order: ``--no-loadscope-reorder``); with the long files last, one worker ran them
while the other one idled."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of :data:`LONGEST_FIRST` first, in that order; the others as collected."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def spark():
    from routing.io.session import build_session

    session = build_session(
        "routing-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The contract folder (``../shared``): SPEC, conformance scenarios, fixtures."""
    return SHARED
