"""A replay in bounded micro-batches (docs/REPLAY.md, "Memory"): the loaded tables' files
each cover a short stretch of event time, so a rate limit cuts the log finely, and the
lake ends as if the log had been one batch (SPEC §5.6)."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from deltalake import DeltaTable

from jobs import demo, route
from jobs import replay as replay_job
from routing.broker.layout import address_of_source
from routing.io.lake import Lake
from tests.test_delivery_rules import assert_same_tables

ROOT = Path(__file__).resolve().parents[1]
BROKER = ROOT / "conf" / "broker.xml"
PER_FILE = 40


def shuffled_log(path: Path, messages: int) -> Path:
    """The demo traffic in no particular order: the loader has to sort it itself."""
    traffic = demo.traffic(messages)
    pq.write_table(traffic.take(np.random.default_rng(3).permutation(traffic.num_rows)), path)
    return path


def file_times(table: str, column: str) -> list[list]:
    """The event times of each data file of a Delta table, as the file holds them."""
    delta = DeltaTable(table)
    return [
        pq.read_table(uri, columns=[column]).column(column).to_pylist() for uri in delta.file_uris()
    ]


def test_a_loaded_table_is_in_files_of_short_sorted_time_ranges(spark, tmp_path):
    lake = Lake.at(tmp_path / "lake")
    log = shuffled_log(tmp_path / "log.parquet", 400)
    replay_job.load_logs(spark, lake, [str(log)], rows_per_file=PER_FILE)

    sent = pq.read_table(log, columns=["type", "address"]).to_pydict()
    expected = {
        "addresses/orders": ("sent_at", sent["address"].count("orders")),
        "addresses/payments": ("sent_at", sent["address"].count("payments")),
        "deliveries": ("at", sent["type"].count("delivery")),
    }
    for source, (column, rows) in expected.items():
        files = file_times(lake.table(source), column)
        assert sum(len(f) for f in files) == rows > 2 * PER_FILE, source
        assert len(files) >= rows / PER_FILE and all(len(f) <= PER_FILE for f in files), source
        assert all(f == sorted(f) for f in files), f"{source}: a file's rows out of time order"
        spans = sorted((f[0], f[-1]) for f in files)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), f"{source}: files overlap"


def test_a_rate_limited_replay_ends_with_the_lake_of_one_batch(spark, tmp_path):
    log = str(demo.write_log(tmp_path / "log.parquet", 300))
    whole, cut = Lake.at(tmp_path / "whole"), Lake.at(tmp_path / "cut")

    out = io.StringIO()
    argv = ["--log", log, "--lake", whole.root, "--conf", str(BROKER)]
    assert replay_job.main([*argv, "--max-events-per-trigger", "0"], spark=spark, out=out) == 0
    assert len(batches(out)) == 1

    # the same log loaded in files of 50 rows, routed 200 rows a batch
    replay_job.load_logs(spark, cut, [log], rows_per_file=50)
    out = io.StringIO()
    argv = ["--lake", cut.root, "--conf", str(BROKER), "--available-now"]
    assert route.main([*argv, "--max-events-per-trigger", "200"], spark=spark, out=out) == 0
    sizes = batches(out)
    assert sum(sizes) == pq.read_metadata(log).num_rows and len(sizes) >= 3
    assert max(sizes) <= 200 + 3 * 50, sizes  # the limit, and what other tables' files add

    addresses = {address_of_source(s) for s in whole.address_sources()}
    assert_same_tables(spark, cut, whole, addresses)


def batches(out: io.StringIO) -> list[int]:
    """The input rows of each micro-batch, from the job's per-batch lines."""
    lines = [line for line in out.getvalue().splitlines() if line.startswith("batch ")]
    return [int(line.split("rows in ")[1].split(",")[0]) for line in lines]
