"""The job on a real Spark standalone cluster (issue 9), with Delta's JVM connector.

A master and a worker are started on loopback from the installed pyspark
(``spark-class …Master`` / ``…Worker``); ``spark-submit --py-files project.zip
jobs/replay.py`` (with ``--jars`` the connector ``make setup`` fetched, as the README's
command line) replays a demo workload on it, and the tables it writes must equal
those of the same replay run in the tests' local session. Every process started here
runs in its own process group and is killed at the end, whatever the outcome.

:class:`Cluster` and :func:`local_replay` are shared with ``tests/test_faults.py``
(killing a worker mid-replay): one cluster and one reference replay per test run.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from jobs import demo
from jobs import replay as replay_job
from routing.io.delta_tables import is_table
from routing.io.lake import Lake
from routing.io.session import DELTA_CONF, KRYO, has_jvm_delta, job_jars
from routing.io.storage import DeltaStorage
from routing.plan.schemas import MESSAGE
from tests.frames import assert_rows_equal
from tests.lakeio import read_table

ROOT = Path(__file__).resolve().parents[1]
BROKER = ROOT / "conf" / "broker.xml"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
LOG4J = ROOT / "routing" / "io" / "log4j2.properties"
MESSAGES = 1500
"""Size of the demo workload replayed on the cluster (and killed in test_faults)."""

# a few lines the replay rejects, and a delivery the job rejects, so `rejected` is compared too
BAD_LINES = [
    "this is not json",
    json.dumps({"type": "send", "address": "orders", "message_id": 9_000_001, "sent_at": "2026"}),
    json.dumps({"type": "teleport", "at": "2026-01-01T00:00:01Z"}),
    json.dumps(
        {
            "type": "delivery",
            "queue": "orders",
            "message_id": 9_000_002,
            "outcome": "ACK",
            "at": "2026-01-01T00:00:02Z",
        }
    ),
]


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


CHILD_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""Every JVM a test starts (jobs, the cluster's daemons and executors) JIT-compiles with C1
only. Such a JVM lives seconds to minutes on a few hundred rows, and C2 never pays back its
compiling: in a cold ten-message run it kept one of the two cores busy (17 of 43 CPU-s).
The faults' two local tests took 161 s instead of 248 s, the cluster's five 193 s instead
of 240 s. Not for the notebooks' kernels, which run longer (141 s against 122 s), nor for
the job itself: its warm batches run twice as long on C1's code (docs/PERFORMANCE.md)."""


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a Spark process started by a test: loopback only, this
    interpreter for Python workers, C1 only (:data:`CHILD_JAVA_OPTIONS`), and none of the
    test session's gateway variables (a child that saw them would attach to the tests'
    JVM instead of starting its own)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYSPARK_GATEWAY") and k not in ("SPARK_TESTING", "SPARK_HOME")
    }
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONUNBUFFERED="1",
        JAVA_TOOL_OPTIONS=CHILD_JAVA_OPTIONS,
    )
    env.update(extra)
    return env


def kill_group(process: subprocess.Popen, sig: int = signal.SIGKILL, wait: float = 30) -> None:
    """Signal the process group of ``process`` (it was started in a new session) and reap it."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
    try:
        process.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=wait)
    # children that outlived the leader (a JVM's Python workers) share its group
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@dataclass
class Job:
    """A process group started by a test, with its output in a file."""

    process: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, command: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Job:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            process = subprocess.Popen(
                list(command),
                cwd=ROOT,
                env=env or child_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return cls(process, log)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_for(self, condition: Callable[[str], bool], timeout: float, poll: float = 0.2) -> bool:
        """Wait until ``condition(output)`` holds (True) or the process ended or time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self.output()):
                return True
            if self.process.poll() is not None:
                return condition(self.output())
            time.sleep(poll)
        return False

    def wait(self, timeout: float) -> int:
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            self.kill()
            raise AssertionError(
                f"{self.log.name}: no exit after {timeout:.0f} s:\n{self.tail()}"
            ) from expired

    def kill(self, sig: int = signal.SIGKILL) -> None:
        kill_group(self.process, sig)

    def stop(self, timeout: float) -> int:
        """SIGTERM to the leader only (a Python driver stops its query and its JVM itself),
        then whatever is left of the group is killed. Returns the leader's exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        finally:
            self.kill()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output().splitlines()[-lines:])


@dataclass
class Cluster:
    """A Spark standalone master and its workers on 127.0.0.1."""

    work: Path
    port: int = 0
    ui_port: int = 0
    master: Job | None = None
    workers: list[Job] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _daemon(self, name: str, args: Sequence[str]) -> Job:
        return Job.start(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            self.work / f"{name}.log",
            child_env(SPARK_LOG_DIR=str(self.work), SPARK_WORKER_DIR=str(self.work / "apps")),
        )

    def start(self) -> Cluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self.port, self.ui_port = free_port(), free_port()
        self.master = self._daemon(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],
        )
        if not self.master.wait_for(lambda out: "elected leader" in out, 90):
            raise RuntimeError(f"the master did not start:\n{self.master.tail()}")
        self.start_worker()
        return self

    def start_worker(self) -> Job:
        worker = self._daemon(
            f"worker{len(self.workers)}",
            [
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--cores",
                "2",
                "--memory",
                "2g",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(self.work / "apps"),
            ],
        )
        self.workers.append(worker)
        if not worker.wait_for(lambda out: "Successfully registered with master" in out, 90):
            raise RuntimeError(f"the worker did not register:\n{worker.tail()}")
        return worker

    def kill_worker(self) -> None:
        """SIGKILL the live worker with its executor (and the executor's Python workers)."""
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.kill()

    def state(self) -> dict:
        """The master's view (its web UI's JSON): workers, active and completed apps."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as r:
            return json.load(r)

    def submit(self, app: Sequence[str], log: Path, conf: dict[str, str] | None = None) -> Job:
        """``spark-submit --master <this cluster> --py-files project.zip <app>`` (client mode)."""
        settings = {
            "spark.sql.shuffle.partitions": "4",  # not the local session's 2: partitioning varies
            "spark.default.parallelism": "4",
            "spark.executor.memory": "1g",
            "spark.driver.memory": "1g",
            "spark.ui.enabled": "false",
            # as the README's command line: large generated methods JIT-compiled
            "spark.driver.extraJavaOptions": (
                f"-Dlog4j2.configurationFile=file:{LOG4J} -XX:-DontCompileHugeMethods"
            ),
            "spark.executor.extraJavaOptions": "-XX:-DontCompileHugeMethods",
            "spark.serializer": KRYO,
            "spark.kryo.referenceTracking": "false",
            **(conf or {}),
        }
        command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.url]
        command += ["--jars", job_jars()]
        for key, value in {**DELTA_CONF, **settings}.items():
            command += ["--conf", f"{key}={value}"]
        command += ["--py-files", str(project_zip(self.work)), *app]
        return Job.start(command, log)

    def stop(self) -> None:
        for job in [*self.workers, self.master]:
            if job is not None:
                job.kill()
        self.workers.clear()
        self.master = None


_SHARED: dict[str, object] = {"cluster": None, "users": 0}


def _stop_shared() -> None:
    cluster = _SHARED["cluster"]
    if isinstance(cluster, Cluster):
        cluster.stop()
    _SHARED["cluster"] = None


atexit.register(_stop_shared)  # a last resort: the fixtures stop it first


@contextlib.contextmanager
def shared_cluster(work: Path) -> Iterator[Cluster]:
    """One cluster for every module that uses it in this run, stopped by its last user."""
    if _SHARED["cluster"] is None:
        cluster = Cluster(work)
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        _SHARED["cluster"] = cluster
    _SHARED["users"] = int(_SHARED["users"]) + 1
    try:
        yield _SHARED["cluster"]  # type: ignore[misc]
    finally:
        _SHARED["users"] = int(_SHARED["users"]) - 1
        if _SHARED["users"] == 0:
            _stop_shared()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with shared_cluster(tmp_path_factory.mktemp("spark-cluster")) as running:
        yield running


def project_zip(folder: Path) -> Path:
    """The ``routing`` and ``jobs`` packages as the zip ``--py-files`` ships to executors."""
    path = folder / "project.zip"
    if path.exists():
        return path
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in ("routing", "jobs"):
            for file in sorted((ROOT / package).rglob("*")):
                if file.is_file() and "__pycache__" not in file.parts:
                    archive.write(file, file.relative_to(ROOT).as_posix())
    return path


# --------------------------------------------------------------------------------------
# Workload, reference and comparison
# --------------------------------------------------------------------------------------

_LOGS: dict[tuple[int, int], list[str]] = {}
_REFERENCES: dict[tuple[int, int], Path] = {}


def workload(tmp_path_factory, messages: int = MESSAGES, seed: int = 7) -> list[str]:
    """The demo traffic as a Parquet log plus a JSON Lines log of bad lines (written once:
    ``rejected`` names the log files, so every run of a workload must read the same ones)."""
    key = (messages, seed)
    if key not in _LOGS:
        folder = tmp_path_factory.mktemp(f"logs-{messages}-{seed}")
        log = demo.write_log(folder / f"demo-{messages}-{seed}.parquet", messages, seed)
        bad = folder / "bad.jsonl"
        bad.write_text("\n".join(BAD_LINES) + "\n", encoding="utf-8")
        _LOGS[key] = [str(log), str(bad)]
    return _LOGS[key]


def replay_args(logs: Sequence[str], lake: Path, *extra: str) -> list[str]:
    args = []
    for log in logs:
        args += ["--log", log]
    return [*args, "--lake", str(lake), "--conf", str(BROKER), *extra]


def local_replay(
    spark: SparkSession, tmp_path_factory, messages: int = MESSAGES, seed: int = 7
) -> Path:
    """The lake of the workload's replay in the tests' session (made once)."""
    key = (messages, seed)
    if key not in _REFERENCES:
        lake = tmp_path_factory.mktemp(f"reference-{messages}-{seed}") / "lake"
        out = io.StringIO()
        status = replay_job.main(
            replay_args(workload(tmp_path_factory, messages, seed), lake), spark=spark, out=out
        )
        assert status == 0, out.getvalue()
        _REFERENCES[key] = lake
    return _REFERENCES[key]


TABLE_KEYS = {
    "queue_messages": ["queue", "message_id"],
    "journal": ["queue", "message_id", "at", "event", "delivery_count"],
    "rejected": ["source", "at", "reason", "row"],
    "deliveries": ["queue", "message_id", "at", "outcome"],
    "management": ["at", "op", "queue"],
}


def read_lake_table(spark: SparkSession, lake: Path, relative: str) -> DataFrame:
    return spark.read.format("delta").load(Lake.at(lake).table(relative))


def address_rows(lake: Path) -> pa.Table:
    """Every ``addresses/*`` table's rows (with ``source``), read with delta-rs: independent
    of the job's own reader, and conformed to the SPEC's message columns."""
    root = Lake.at(lake)
    sources = root.address_sources()
    assert sources, f"no address tables in {lake}"
    parts = []
    for source in sources:
        table = read_table(root.table(source))
        rows = pa.table(
            {
                f.name: table.column(f.name).cast(f.type)
                if f.name in table.column_names
                else pa.nulls(table.num_rows, f.type)
                for f in MESSAGE
            }
        )
        parts.append(rows.append_column("source", pa.array([source] * rows.num_rows)))
    return pa.concat_tables(parts)


def address_tables(spark: SparkSession, lake: Path) -> DataFrame:
    """Every ``addresses/*`` table in one frame, with its ``source``."""
    return spark.createDataFrame(address_rows(lake))


def assert_lakes_equal(spark: SparkSession, actual: Path, expected: Path) -> None:
    """Every table of the two lakes holds the same rows (chispa, ordered by keys)."""
    assert sorted(Lake.at(actual).address_sources()) == sorted(Lake.at(expected).address_sources())
    assert_rows_equal(
        address_tables(spark, actual),
        address_tables(spark, expected),
        ["source", "message_id"],
        ignore_nullable=True,
    )
    for table, keys in TABLE_KEYS.items():
        exists = [is_table(Lake.at(lake).table(table)) for lake in (actual, expected)]
        assert exists[0] == exists[1], f"{table}: in one lake only"
        if not exists[0]:
            continue
        assert_rows_equal(
            read_lake_table(spark, actual, table),
            read_lake_table(spark, expected, table),
            keys,
            ignore_nullable=True,
        )


# --------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------


@pytest.mark.cluster
def test_a_replay_on_the_cluster_equals_the_local_replay(spark, cluster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("on-cluster")
    logs = workload(tmp_path_factory)
    lake = folder / "lake"
    apps_before = len(cluster.state()["completedapps"])
    # the cluster run goes on in the background while the reference replays locally
    job = cluster.submit(
        [str(ROOT / "jobs" / "replay.py"), *replay_args(logs, lake)], folder / "submit.log"
    )
    try:
        reference = local_replay(spark, tmp_path_factory)
        status = job.wait(timeout=600)
    finally:
        job.kill()
    output = job.output()
    assert status == 0, job.tail()
    assert "batch 0:" in output and "summary:" in output, job.tail()

    # the job ran on the cluster, not in a local master of its own
    state = cluster.state()
    assert len(state["completedapps"]) == apps_before + 1
    assert state["completedapps"][-1]["name"] == "jobs.replay"
    executor_logs = list((cluster.work / "apps").glob("app-*/*/stderr"))
    assert executor_logs, "no executor ran on the worker"

    assert_lakes_equal(spark, lake, reference)
    # the bad lines and the unknown delivery are in both
    reasons = [r.reason for r in read_lake_table(spark, lake, "rejected").collect()]
    assert len(reasons) == 4 and any("no PENDING message 9000002" in r for r in reasons)


def test_the_session_runs_delta_s_jvm_connector(spark):
    assert has_jvm_delta(spark)
    assert spark.conf.get("spark.sql.extensions") == DELTA_CONF["spark.sql.extensions"]


def test_the_storage_reads_the_job_state_and_transactions_of_the_lake(spark, tmp_path_factory):
    """``done`` and ``state`` come from the ``queue_messages`` commits of the job's batches."""
    lake = local_replay(spark, tmp_path_factory)
    metadata = json.loads((lake / "_checkpoints" / "route" / "metadata").read_text())
    app_id = f"jobs.route:{metadata['id']}"
    storage = DeltaStorage(Lake.at(lake))
    assert storage.done(app_id, 0)
    assert not storage.done(app_id, 1_000) and not storage.done("another-app", 0)
    assert storage.state().clock is not None


def test_replayed_address_tables_stay_readable_after_the_job_writes_copies(spark, tmp_path_factory):
    lake = local_replay(spark, tmp_path_factory)
    payments = Lake.at(lake).address_table("payments")  # RETRY copies land here
    assert (
        pa.schema(DeltaTable(payments).schema().to_arrow()).field("copy_reason").type == pa.string()
    )
    rows = spark.read.format("delta").load(payments).where("copy_reason = 'RETRY'").count()
    assert rows > 0
