"""Random lakes (``tests/random_lakes.py``) routed in one batch, in small batches and in
two runs: the same tables, and the SPEC's rules on each. Two seeds drawn for what they
hold: diverts, a dead-letter address of two queues and both kinds of auto-created queue
(40); diverts sharing a routing-name, an expiry address of two queues,
send-to-dla-on-no-route and management rows (52). More seeds: ``python -m
tests.random_lakes 0 100``."""

from __future__ import annotations

import pytest

from tests.random_lakes import run_case


@pytest.mark.parametrize("seed", [40, 52])
def test_a_random_lake_gives_the_same_tables_in_one_batch_in_small_ones_and_restarted(
    spark, tmp_path, seed
):
    rows, batches = run_case(spark, seed, tmp_path)
    assert rows > 20 and batches > 3, (rows, batches)
