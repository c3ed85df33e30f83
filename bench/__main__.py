"""``python -m bench [module ...] [--scale S]``: run the benchmarks and print the figures."""

from __future__ import annotations

import argparse
import importlib
import sys
import time

MODULES = [
    "storage",
    "breadcrumbs",
    "routing",
    "floor",
    "route",
    "replay",
    "shapes",
    "planning",
    "history",
    "soak",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="The performance figures of docs/PERFORMANCE.md, each printed beside a\n"
        "reference measured in the same run (`make bench` runs every module).",
        epilog="example:\n  python -m bench route floor --scale 0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("modules", nargs="*", default=MODULES, help=f"any of {MODULES}")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the full data sizes")
    parser.add_argument(
        "--ten-million", action="store_true", help="replay: also replay 10M messages once"
    )
    args = parser.parse_args(argv)
    if args.ten_million:
        import bench.replay

        bench.replay.TEN_MILLION = True

    from routing.io.session import build_session

    spark = build_session("routing-bench")
    failed = False
    for name in args.modules:
        module = importlib.import_module(f"bench.{name}")
        print(f"\n== {name}: {module.__doc__.strip().splitlines()[0]}", flush=True)
        started = time.perf_counter()
        for figure in module.run(spark, args.scale):
            print(figure.line(), flush=True)
            failed |= figure.ok is False
        print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
    spark.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
