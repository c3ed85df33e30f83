"""The benchmark's shapes (bench/shapes.py) and its single-process router
(bench/single_process.py), small: the job rejects none of a shape's traffic (the
generator's acknowledgements name the queue each message is in), and the single process
leaves as many messages in each queue and status as the job, on the shapes and on the
demo's traffic."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench import CONF
from bench.shapes import Shape, anycast_turns, competing_consumers, many_addresses
from bench.single_process import log_events, queue_counts, route, route_lake, written_counts
from bench.storage import message_table
from jobs import route as route_job
from jobs.demo import write_log
from jobs.replay import load_logs
from routing.io.delta_tables import is_table
from routing.io.lake import Lake
from routing.plan import schemas
from tests.lakeio import rows

SHAPES = {
    "many addresses": lambda: many_addresses(40, 400),
    "anycast groups": lambda: competing_consumers(400, grouped=True),
    "single queues": lambda: competing_consumers(400, grouped=False),
}


def job_counts(spark, conf: Path, lake: Lake) -> dict[tuple[str, str], int]:
    """Route ``lake`` with the job; its messages by queue and status."""
    argv = ["--conf", str(conf), "--lake", lake.root, "--available-now"]
    assert route_job.main(argv, spark=spark, out=io.StringIO()) == 0
    return queue_counts([(r["queue"], r["status"]) for r in rows(lake.queue_messages)])


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_job_and_the_single_process_agree_on_a_shape(spark, tmp_path, name):
    shape: Shape = SHAPES[name]()
    conf, log, lake = tmp_path / "broker.xml", tmp_path / "log.parquet", Lake.at(tmp_path / "lake")
    conf.write_text(shape.broker, encoding="utf-8")
    pq.write_table(shape.log, log)
    load_logs(spark, lake, [str(log)])
    route_lake(conf, tmp_path / "lake")
    job = job_counts(spark, conf, lake)
    assert not is_table(lake.rejected) or rows(lake.rejected) == []
    assert job == written_counts(tmp_path / "lake")
    assert {status for _, status in job} >= {"ACKED"}


def test_the_job_and_the_single_process_agree_on_the_demo(spark, tmp_path):
    """The demo's traffic has what the shapes lack: expiries, redelivery delays, dead
    letters into an auto-created queue, a RETRY and a MOVE by filter, rejected ACKs. The
    single process reads the lake or the log alike."""
    # 2,500 messages: one a MOVE by filter takes, one second ACK (rejected)
    log, lake = write_log(tmp_path / "demo.parquet", 2_500), Lake.at(tmp_path / "lake")
    load_logs(spark, lake, [str(log)])
    router = route(CONF, log_events([log]), tmp_path / "from-log")
    route_lake(CONF, tmp_path / "lake")
    job = job_counts(spark, CONF, lake)
    assert job == written_counts(tmp_path / "lake") == written_counts(tmp_path / "from-log")
    statuses = {status for _, status in job}
    assert statuses >= {"ACKED", "PENDING", "DEAD_LETTERED", "EXPIRED", "MOVED"}
    assert ("DLQ.payments", "MOVED") in job and ("orders", "MOVED") in job
    assert len(router.rejected) == len(rows(lake.rejected)) == 1


def test_anycast_turns_go_to_the_next_queue_whose_filter_matches():
    filters = ("kind = 'a'", "kind = 'b'", None, None)
    assert anycast_turns(filters, list("abcabcccab")) == [0, 1, 2, 3, 1, 2, 3, 2, 3, 1]
    assert anycast_turns(("kind = 'a'",), list("ba")) == [None, 0]


def test_the_benchmarks_message_rows_are_an_address_tables():
    """The rows ``bench.storage`` and the latency run append (``message_table``) have the
    columns of an address table (SPEC §3.1), optional ones included, so ``make bench``
    runs on them."""
    assert message_table(3).schema == schemas.MESSAGE
