"""Benchmarks for `make bench`: figures and ratios printed, never asserted in tests.

Each module exposes ``run(spark, scale) -> list[Figure]``; ``python -m bench [name ...]``
runs them with one SparkSession and prints a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The project's checkout: the jobs run from here."""
CONF = ROOT / "conf" / "broker.xml"
"""The demo's broker.xml, which every benchmarked run routes with."""


@dataclass(frozen=True)
class Figure:
    """One measured figure, optionally with a target it is checked against."""

    name: str
    value: float
    unit: str
    target: str = ""
    ok: bool | None = None

    def line(self) -> str:
        verdict = "" if self.ok is None else ("  ok" if self.ok else "  MISSED")
        target = f"  (target {self.target})" if self.target else ""
        return f"{self.name:<58} {self.value:>14,.2f} {self.unit:<10}{target}{verdict}"


def marginal(times: dict[int, float]) -> float:
    """The marginal throughput ``(large - small) / (T(large) - T(small))`` of two runs of
    ``size: seconds``: it cancels their fixed costs."""
    small, large = sorted(times)
    return (large - small) / (times[large] - times[small])


def marginal_figures(
    times: dict[int, float], target: float, single_process: dict[int, float]
) -> list[Figure]:
    """:func:`marginal` against ``target`` msg/s, and against the single-process router's
    (:mod:`bench.single_process`) on the same inputs, ``single_process`` its times."""
    small, large = sorted(times)
    throughput, reference = marginal(times), marginal(single_process)
    return [
        Figure(
            f"marginal throughput ({large:,} - {small:,})",
            throughput,
            "msg/s",
            f">= {target / 1000:.0f}k",
            throughput >= target,
        ),
        Figure("  the single-process router's, on the same inputs", reference, "msg/s"),
        Figure(
            "  ratio to the single-process router",
            throughput / reference,
            "x",
            ">= 3x",
            throughput / reference >= 3,
        ),
    ]
