"""Random scenarios recorded by a real Artemis broker (``../shared/artemis/gen_random.py``),
played on the job: every expectation the broker recorded must hold, and each run of the
job must take at most :data:`LONGEST_RUN` seconds. ``tests/test_recorded_random.py`` runs a
few seeds in ``make test``; more, on their own (``make recorded-random``)::

    python -m tests.recorded_random 1 20 4      # seeds 1 to 19, four scenarios each
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from tests.artemis import available, record_random
from tests.conformance import Scenario, load

LONGEST_RUN = 60.0
"""Seconds one run of the job (``--available-now``) of a random scenario may take."""


def main(argv: list[str], out: TextIO = sys.stdout) -> int:
    """``python -m tests.recorded_random FIRST END [CASES [WORKDIR]]``: seeds FIRST to END - 1,
    CASES scenarios each (default 4); a failing scenario's lake stays in WORKDIR (default
    ``recorded-random``)."""
    from routing.io.session import build_session

    why = available()
    if why is not None:
        print(why, file=out)
        return 2
    first, end = int(argv[0]), int(argv[1])
    cases = int(argv[2]) if len(argv) > 2 else 4
    base = Path(argv[3] if len(argv) > 3 else "recorded-random")
    spark = build_session("recorded-random", conf={"spark.sql.shuffle.partitions": "2"})
    try:
        failed = play(range(first, end), cases, base, spark, out)
    finally:
        spark.stop()
    return 1 if failed else 0


def play(seeds: Iterable[int], cases: int, base: Path, spark, out: TextIO) -> int:
    """Record ``cases`` scenarios of each seed with the broker and play them on the job in
    ``spark``, a line each on ``out``; how many failed or were slow."""
    failed = 0
    for seed in seeds:
        for path in record_random(seed, cases, base / f"seed{seed}" / "recorded"):
            workdir = base / f"seed{seed}" / path.stem
            workdir.mkdir(parents=True, exist_ok=True)
            scenario = Scenario(load(path), workdir, spark)
            started = time.monotonic()
            try:
                scenario.run()
            except Exception as error:  # report the scenario and go on
                failed += 1
                print(f"{path.stem}: FAILED {type(error).__name__}: {str(error)[:2000]}", file=out)
                continue
            longest = max(scenario.run_seconds, default=0.0)
            took = time.monotonic() - started
            verdict = "ok" if longest <= LONGEST_RUN else f"SLOW (over {LONGEST_RUN:.0f} s)"
            failed += verdict != "ok"
            print(
                f"{path.stem}: {verdict}, {len(scenario.run_seconds)} runs, longest "
                f"{longest:.1f} s, {took:.0f} s in all",
                file=out,
                flush=True,
            )
            if verdict == "ok":
                shutil.rmtree(workdir)
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
