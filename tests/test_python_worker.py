"""A job's Python worker, started as its session starts (routing.plan.workers).

Each test runs a process of its own: only a JVM that has started no Python worker yet
shows what starting one ahead does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from routing.plan.workers import PASSES

ROOT = Path(__file__).parents[1]

STOPPED_UNDER_IT = """
from routing.io.session import build_session, start_python_worker, stop_session
spark = build_session("worker-stopped", short_run=True, log_file=LOG)
started = start_python_worker(spark)
stop_session(spark)  # before the worker is up: its query ends with the session
started.join(timeout=120)
print("alive" if started.is_alive() else "ended")
"""

READY_AHEAD = """
import json
from pyspark.sql import functions as F
from routing.io.session import build_session, start_python_worker, stop_session
spark = build_session("worker-ahead", short_run=True, log_file=LOG)
if AHEAD:
    start_python_worker(spark).join(timeout=120)

def imported(ids):  # pickled by value: unpickling it imports nothing of the project
    import sys
    import pyarrow as pa
    names = ",".join(sorted(m for m in sys.modules if m.startswith("routing.plan.")))
    return pa.array([names] * len(ids))

row = spark.range(0, 1, 1, 1).select(F.arrow_udf(imported, "string")("id")).first()
print(json.dumps(row[0].split(",")))
stop_session(spark)
"""


def _run(script: str, tmp_path: Path, **names: object) -> subprocess.CompletedProcess[str]:
    preamble = "".join(f"{name} = {value!r}\n" for name, value in names.items())
    preamble += f"LOG = __import__('pathlib').Path({str(tmp_path / 'jvm.log')!r})\n"
    return subprocess.run(
        [sys.executable, "-c", preamble + script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_session_stopped_before_its_worker_is_up_ends_quietly(tmp_path):
    done = _run(STOPPED_UNDER_IT, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ended"
    assert done.stderr == "", done.stderr


def test_the_worker_started_ahead_holds_the_passes_modules_for_the_first_pass(tmp_path):
    passes = {module.__name__ for module in PASSES}
    ahead = _run(READY_AHEAD, tmp_path, AHEAD=True)
    assert ahead.returncode == 0, ahead.stderr
    assert passes <= set(json.loads(ahead.stdout.splitlines()[-1]))
    # without it the first pass's worker starts bare, and imports them as it unpickles
    bare = _run(READY_AHEAD, tmp_path, AHEAD=False)
    assert bare.returncode == 0, bare.stderr
    assert not passes & set(json.loads(bare.stdout.splitlines()[-1]))
