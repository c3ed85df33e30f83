"""Planning: Spark's analysis and optimisation in each run of the job, on random scenarios.

Issue 72's target: planning (analysis + optimisation) of any batch under 2 s, on 50 random
scenarios of ``../shared/artemis/gen_random.py`` (a few addresses, diverts, dead letters,
expiries, moves, in rounds of ``--available-now`` runs). One such scenario once spent more
than nine minutes in the optimizer's constraint propagation.

The scenarios are recorded by the real broker (:func:`tests.artemis.record_random`), then
played one after the other on the job in this process (:class:`tests.conformance.Scenario`:
every expectation the broker recorded is checked). Around each run of the job, the time
Spark's rule executors spent (``RuleExecutor.queryExecutionMeter``: the analyzer's and the
optimizer's rules, AQE's re-optimisations, every DataFrame the run builds, counted once per
rule, nested rules inside their callers too) is read from the JVM. A run holds one or more
batches, so its figure bounds each of its batches'. Beside the seconds, the run's analyses
(each DataFrame built, each Spark and Delta build inside a query) and optimised queries
(each checkpoint, collect, write): counts a loaded machine does not change, of what a
batch's plans cost.

    python -m bench planning --scale 0.1      # 5 scenarios
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import Figure
from routing.broker.layout import ROUTE_QUERY
from tests.artemis import available, record_random
from tests.conformance import Scenario, load
from tests.recorded_random import LONGEST_RUN

SCENARIOS = 50
CASES = 5
"""Scenarios a seed records (seeds 1, 2, … until there are enough)."""
TARGET = 2.0
"""Seconds of planning a batch may take (issue 72)."""


DELTA_SCAN = "org.apache.spark.sql.delta.stats.PrepareDeltaScan"
"""Delta's optimizer rule that lists a scan's files: it replays the table's log (Spark jobs)."""
ANALYSIS = "org.apache.spark.sql.catalyst.analysis.Analyzer$LookupFunctions"
"""A rule of the analyzer's batch that runs once an analysis: its runs count the analyses."""
OPTIMISATION = "org.apache.spark.sql.catalyst.optimizer.Optimizer$FinishAnalysis"
"""A rule of the optimizer's batch that runs once a query: its runs count the queries."""


@dataclass(frozen=True)
class RuleTimes:
    """What the JVM's rule executors have done since it started: seconds in all and in
    :data:`DELTA_SCAN`, analyses and optimised queries."""

    total: float
    delta_scan: float
    analyses: int
    optimisations: int

    @classmethod
    def now(cls, spark: SparkSession) -> RuleTimes:
        rules = spark._jvm.org.apache.spark.sql.catalyst.rules  # type: ignore[union-attr]
        meter = getattr(rules, "RuleExecutor$").__getattr__("MODULE$").queryExecutionMeter()
        # "<rule>  <effective ns> / <total ns>  <effective runs> / <runs>", one line a rule
        rows = [line.split() for line in str(meter.dumpTimeSpent()).splitlines()]
        fields = {row[0]: row for row in rows if row}

        def runs(rule: str) -> int:
            return int(fields[rule][6]) if rule in fields else 0

        scan = int(fields[DELTA_SCAN][3]) / 1e9 if DELTA_SCAN in fields else 0.0
        return cls(meter.totalTime() / 1e9, scan, runs(ANALYSIS), runs(OPTIMISATION))

    def __sub__(self, other: RuleTimes) -> RuleTimes:
        return RuleTimes(
            self.total - other.total,
            self.delta_scan - other.delta_scan,
            self.analyses - other.analyses,
            self.optimisations - other.optimisations,
        )


class MeteredScenario(Scenario):
    """A scenario that also keeps each run's rule times and batches."""

    def __init__(self, spec: dict[str, Any], workdir: Path, spark: SparkSession) -> None:
        super().__init__(spec, workdir, spark)
        self.planning: list[RuleTimes] = []
        self.batches: list[int] = []

    def step_run(self, body: dict[str, Any]) -> None:
        before, committed = RuleTimes.now(self.spark), self._committed()
        try:
            super().step_run(body)
        finally:
            self.planning.append(RuleTimes.now(self.spark) - before)
            self.batches.append(self._committed() - committed)

    def _committed(self) -> int:
        """The batches the job's query has committed (its checkpoint's ``commits``)."""
        commits = Path(self.lake.checkpoint(ROUTE_QUERY)) / "commits"
        return sum(1 for p in commits.glob("*") if p.name.isdigit()) if commits.is_dir() else 0


def recorded(count: int, folder: Path) -> list[Path]:
    """``count`` scenarios recorded clean by the broker, from seeds 1, 2, …"""
    paths: list[Path] = []
    seed = 1
    while len(paths) < count:
        paths += record_random(seed, CASES, folder / f"seed{seed}")
        seed += 1
    return paths[:count]


def run(spark: SparkSession, scale: float) -> list[Figure]:
    why = available()
    if why is not None:
        return [Figure(f"planning not measured: {why}", float("nan"), "", "", False)]
    count = max(1, round(SCENARIOS * scale))
    played: list[MeteredScenario] = []
    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench-planning-") as folder:
        for path in recorded(count, Path(folder) / "recorded"):
            workdir = Path(folder) / path.stem
            workdir.mkdir()
            scenario = MeteredScenario(load(path), workdir, spark)
            try:
                scenario.run()
            except AssertionError as failure:
                failed += 1
                print(f"   {path.stem}: {str(failure)[:500]}", flush=True)
            played.append(scenario)
    planning = [times for s in played for times in s.planning]
    runs = [seconds for s in played for seconds in s.run_seconds]
    batches = sum(b for s in played for b in s.batches)
    longest = max(planning, key=lambda times: times.total)
    warm = [t for s in played[1:] for t in s.planning]
    longest_warm = max(warm, key=lambda times: times.total, default=None)
    return [
        Figure(
            f"random scenarios played ({len(runs)} runs of the job, {batches} batches)",
            len(played),
            "scenarios",
        ),
        Figure("  of them failing what the broker recorded", failed, "scenarios", "0", failed == 0),
        Figure(
            "  planning, the run that planned longest",
            longest.total,
            "s",
            f"< {TARGET:g}",
            longest.total < TARGET,
        ),
        Figure("    of it, Delta's scans listing their files", longest.delta_scan, "s"),
        Figure(
            "  planning, the longest run after the first (a warm JVM)",
            longest_warm.total if longest_warm else float("nan"),
            "s",
        ),
        Figure(
            "    its analyses",
            longest_warm.analyses if longest_warm else float("nan"),
            "analyses",
        ),
        Figure(
            "    its optimised queries",
            longest_warm.optimisations if longest_warm else float("nan"),
            "queries",
        ),
        Figure("  planning, the median run", statistics.median(t.total for t in planning), "s"),
        Figure(
            "    analyses, the median run",
            statistics.median(t.analyses for t in planning),
            "analyses",
        ),
        Figure(
            "    optimised queries, the median run",
            statistics.median(t.optimisations for t in planning),
            "queries",
        ),
        Figure(
            "    Delta's scans listing their files, the median run",
            statistics.median(t.delta_scan for t in planning),
            "s",
        ),
        Figure(
            "  planning's share of all runs' time", sum(t.total for t in planning) / sum(runs), ""
        ),
        Figure("  the median run of the job", statistics.median(runs), "s"),
        Figure("    all runs of the job", sum(runs), "s"),
        Figure(
            "  the longest run of the job",
            max(runs),
            "s",
            f"<= {LONGEST_RUN:g}",
            max(runs) <= LONGEST_RUN,
        ),
    ]
