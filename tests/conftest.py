"""One SparkSession for the whole test run (STYLE: tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("SPARK_TESTING", "1")

SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.is_dir():  # a checkout outside the workplace carries its own copy
    SHARED = Path(__file__).resolve().parent / "shared"


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
