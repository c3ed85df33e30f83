"""A replay in bounded micro-batches (docs/REPLAY.md, "Memory"): the loaded tables' files
each cover a short stretch of event time, so a rate limit cuts the log finely, and the
lake ends as if the log had been one batch (SPEC §5.6)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from deltalake import DeltaTable

from jobs import demo
from jobs import replay as replay_job
from routing.io.lake import Lake

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
