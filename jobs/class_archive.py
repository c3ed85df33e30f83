"""Record the class archive the embedded session maps (``make setup``).

    python -m jobs.class_archive [--to jars/build/spark-classes.jsa]

Runs the demo on a few hundred messages in a JVM that records every class it
loads, and writes them, parsed and verified, into a class-data-sharing archive
when it exits (``routing.io.session.CLASS_ARCHIVE``). Later JVMs map it instead of
loading Spark's, Hadoop's and Delta's classes one by one: a session starts with
about 30% less JVM CPU, and the ten-message lake runs with about 16% less. The
archive holds for this JDK and these jars; a JVM that finds it stale ignores it.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pyspark import SparkContext

from jobs import demo
from routing.io.session import CLASS_ARCHIVE, build_session

TRAINING_MESSAGES = 300
"""Enough traffic that every kind of event, move and copy is routed once."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.class_archive", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--to", type=Path, default=CLASS_ARCHIVE, help="the archive to write")
    parser.add_argument("--conf", default="conf/broker.xml", help="the broker.xml of the demo")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    target: Path = args.to.absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    recording = target.with_suffix(".recording")
    target.unlink(missing_ok=True)  # recorded by a JVM that maps no older archive
    recording.unlink(missing_ok=True)
    spark = build_session("jobs.class_archive", record_classes_to=recording)
    with tempfile.TemporaryDirectory(prefix="class-archive-") as lake:
        argv = ["--lake", lake, "--conf", args.conf, "--messages", str(TRAINING_MESSAGES)]
        status = demo.main(argv, spark=spark, out=io.StringIO())
        spark.stop()
        # The JVM writes the archive as it exits, which it does when its gateway's input
        # closes: wait for it, then publish the archive whole.
        gateway = SparkContext._gateway
        if gateway is not None:
            gateway.shutdown()
            gateway.proc.stdin.close()
            gateway.proc.wait()
    if status != 0 or not recording.is_file():
        print(f"class archive: the training run failed (status {status})", file=sys.stderr)
        return 1
    recording.replace(target)
    print(f"class archive: {target} ({target.stat().st_size / 2**20:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
