"""Random scenarios whose expectations a real Artemis broker recorded
(``../shared/artemis/gen_random.py``) pass on the job: a few seeds here, more with
``make recorded-random`` (``python -m tests.recorded_random``)."""

from __future__ import annotations

import io
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.artemis import available, record_random
from tests.conformance import Scenario, load
from tests.recorded_random import play

SEEDS = (11,)
CASES = 2
PLAYED_SEED = 3  # played through make recorded-random's loop, CASES scenarios too
CONCURRENT = 2  # as tests/test_conformance.py: scenarios are mostly driver latency

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def outcomes(spark, tmp_path_factory) -> dict[tuple[int, int], Future]:
    """Record the seeds' scenarios with the broker, then play them on the job, two at a time."""
    recorded = {
        (seed, case): path
        for seed in SEEDS
        for case, path in enumerate(record_random(seed, CASES, tmp_path_factory.mktemp("rec")))
    }
    workdirs = {key: tmp_path_factory.mktemp(f"seed{key[0]}-case{key[1]}") for key in recorded}
    pool = ThreadPoolExecutor(CONCURRENT, thread_name_prefix="recorded")
    sessions: dict[int, object] = {}

    def run(key: tuple[int, int], path: Path) -> None:
        import threading

        ident = threading.get_ident()
        if ident not in sessions:
            sessions[ident] = spark.newSession()
        Scenario(load(path), workdirs[key], sessions[ident]).run()

    futures = {key: pool.submit(run, key, path) for key, path in recorded.items()}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(
    "seed, case", [(s, c) for s in SEEDS for c in range(CASES)], ids=lambda v: str(v)
)
def test_the_job_does_what_the_broker_did(outcomes, seed, case):
    assert (seed, case) in outcomes, f"seed {seed} case {case} was not recorded clean"
    outcomes[(seed, case)].result()


def test_make_recorded_random_plays_a_seed(spark, tmp_path):
    """``make recorded-random`` (:func:`tests.recorded_random.play`): the job does what the
    broker did, a line a scenario, and the lake of one that passed removed."""
    out = io.StringIO()

    failed = play([PLAYED_SEED], CASES, tmp_path / "recorded-random", spark, out)

    assert failed == 0, out.getvalue()
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        f"seed{PLAYED_SEED}-case{case}: ok" for case in range(CASES)
    ], lines
    assert not (
        tmp_path / "recorded-random" / f"seed{PLAYED_SEED}" / f"seed{PLAYED_SEED}-case0"
    ).exists()
