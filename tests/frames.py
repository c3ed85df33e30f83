"""DataFrame comparison for frames with map columns (chispa's ``ignore_row_order`` sorts by
every column, and Spark 4 refuses to sort or hash maps)."""

from __future__ import annotations

from collections.abc import Sequence

from chispa import assert_df_equality
from pyspark.sql import DataFrame


def assert_rows_equal(
    actual: DataFrame, expected: DataFrame, order_by: Sequence[str], **options: object
) -> None:
    """chispa's schema-then-rows comparison after ordering both frames by ``order_by``."""
    assert_df_equality(actual.orderBy(*order_by), expected.orderBy(*order_by), **options)
