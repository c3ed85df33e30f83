"""Small Column helpers shared by the routing modules."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column
from pyspark.sql import functions as F


def literal_map(pairs: Mapping[str, object], value_type: str = "string") -> Column:
    """A literal ``map<string, value_type>`` (sorted, so plans are stable)."""
    items = [F.lit(x) for key in sorted(pairs) for x in (key, pairs[key])]
    if not items:
        return F.create_map().cast(f"map<string,{value_type}>")
    return F.create_map(*items).cast(f"map<string,{value_type}>")
