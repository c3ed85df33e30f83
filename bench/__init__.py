"""Benchmarks for `make bench`: figures and ratios printed, never asserted in tests.

Each module exposes ``run(spark, scale) -> list[Figure]``; ``python -m bench [name ...]``
runs them with one SparkSession and prints a table.
"""

from __future__ import annotations

from dataclasses import dataclass


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
