"""Type aliases shared by the layers (private)."""

from __future__ import annotations

from pyspark.sql import Column

ColumnOrName = Column | str
"""A Column or a column name."""
