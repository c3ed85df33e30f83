"""One writer per lake (routing.io.writer_lock): a job is refused, before it writes
anything, while another process holds the lake; a holder that died holds nothing."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs import demo, replay, route
from jobs._logging import one_line
from routing.io.lake import Lake
from routing.io.writer_lock import LakeBusy, WriterLock
from tests.test_cluster import BROKER, ROOT

HOLDER = textwrap.dedent(
    """
    import sys, time
    from routing.io.lake import Lake
    from routing.io.writer_lock import WriterLock
    WriterLock.take(Lake.at(sys.argv[1]), "jobs.route")
    print("held", flush=True)
    time.sleep(600)
    """
)


@pytest.fixture
def holder(tmp_path) -> Iterator[tuple[Lake, subprocess.Popen]]:
    """Another process holding a new lake, as a running job would."""
    lake = Lake.at(tmp_path / "lake")
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, lake.root], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield lake, process
    finally:
        process.kill()
        process.wait()


def listing(lake: Lake) -> list[str]:
    return sorted(str(p.relative_to(lake.root)) for p in Path(lake.root).rglob("*"))


def run(main, argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_a_job_on_a_lake_another_holds_is_refused_and_writes_nothing(holder, tmp_path):
    lake, process = holder
    before = listing(lake)
    status, out, err = run(
        route.main, ["--conf", str(BROKER), "--lake", lake.root, "--available-now"]
    )
    assert status == 1 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"lake busy: {lake.root} is being written by jobs.route (pid ")
    assert f"stop it (kill {process.pid} on " in err
    assert listing(lake) == before  # no checkpoint, no table, no log


def test_replay_and_demo_are_refused_too(holder, tmp_path):
    lake, _ = holder
    log = tmp_path / "log.jsonl"
    log.write_text("")
    status, _, err = run(
        replay.main, ["--log", str(log), "--conf", str(BROKER), "--lake", lake.root]
    )
    assert status == 1 and err.startswith("lake busy: "), err
    before = listing(lake)
    assert demo.main(["--lake", lake.root, "--fresh", "--messages", "10"], out=io.StringIO()) == 1
    assert listing(lake) == before  # --fresh emptied nothing


def test_a_holder_that_died_holds_nothing(holder):
    lake, process = holder
    with pytest.raises(LakeBusy):
        WriterLock.take(lake, "jobs.route")
    os.kill(process.pid, signal.SIGKILL)  # crashed: no clean release
    process.wait()
    with WriterLock.take(lake, "jobs.route"):
        pass


def test_a_job_inside_another_takes_the_lake_once(tmp_path):
    """jobs.replay runs jobs.route in its own process, holding the lake for both."""
    lake = Lake.at(tmp_path / "lake")
    with WriterLock.take(lake, "jobs.replay"), WriterLock.take(lake, "jobs.route"):
        pass
    with WriterLock.take(lake, "jobs.route"):  # both let it go
        pass


def test_a_failed_batch_is_told_by_the_error_inside_it():
    """A batch function's error reaches the job through the streaming query, after its
    traceback; a Python call into the JVM, with the JVM's exception after it."""
    batch = RuntimeError(
        "[STREAM_FAILED] Query [id = 1] terminated with exception: [FOREACH_BATCH_USER_"
        "FUNCTION_ERROR] ... Return Message: Traceback (most recent call last):\n"
        '  File "/work/main/jobs/route.py", line 217, in _route\n'
        "    def _route(\n"
        "py4j.protocol.Py4JJavaError: An error occurred while calling z:routing.delta."
        "AppTransactionAppend.append.\n"
        ": io.delta.exceptions.ConcurrentTransactionException: [DELTA_CONCURRENT_TRANSACTION] "
        "two writers\n"
        "\tat org.apache.spark.sql.delta.ConflictChecker.check(ConflictChecker.scala:1)\n"
        " SQLSTATE: 39000"
    )
    assert one_line(batch) == (
        "io.delta.exceptions.ConcurrentTransactionException: [DELTA_CONCURRENT_TRANSACTION] "
        "two writers"
    )
    python = RuntimeError(
        "[STREAM_FAILED] ... Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n'
        "    f()\n"
        "OSError: [Errno 28] No space left on device\n"
        " SQLSTATE: 39000"
    )
    assert one_line(python) == "OSError: [Errno 28] No space left on device"
    assert one_line(ValueError("first\nsecond")) == "first"
