"""``python -m bench.warm --conf C LAKE [LAKE ...] [--rounds N]``: route a fresh copy of each
lake in turn, ``N`` rounds, all in one process, and print each run's seconds (a JSON line a
run).

The other benches time each run as a process of its own, as an ``--available-now`` run is
used: its code runs cold while the JIT compiles it. A continuous job or a long replay pays
that once; this is its steady state. The process keeps one session and its compiled code
from run to run, as ``jobs.route`` keeps them from batch to batch.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from jobs import route
from routing.io.session import build_session, stop_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.warm", description=__doc__.strip().splitlines()[0]
    )
    parser.add_argument("--conf", required=True, help="the lakes' broker.xml")
    parser.add_argument("lakes", nargs="+", help="lakes to route copies of, in turn")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    spark = build_session("jobs.route")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-warm-") as folder:
            for round_ in range(args.rounds):
                for lake in args.lakes:
                    copy = Path(folder) / "lake"
                    shutil.copytree(lake, copy)
                    err = io.StringIO()
                    options = ["--conf", args.conf, "--lake", str(copy), "--available-now"]
                    started = time.perf_counter()
                    status = route.main(options, spark=spark, out=io.StringIO(), err=err)
                    seconds = time.perf_counter() - started
                    shutil.rmtree(copy)
                    if status != 0:
                        print(err.getvalue().strip(), file=sys.stderr)
                        return status
                    line = {"round": round_, "lake": lake, "seconds": seconds}
                    print(json.dumps(line), flush=True)
    finally:
        stop_session(spark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
