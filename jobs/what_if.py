"""What if the broker had run another ``broker.xml``: the lake's inputs replayed into a
scratch lake by the routing job itself (:mod:`jobs.route`), not a re-implementation.

Compare the two lakes with :mod:`routing.tools.audit` (:func:`routing.tools.audit.compare_outcomes`).

Example::

    run = what_if(spark, "lake", "/tmp/broker-5-attempts.xml", "/tmp/what-if")
    assert run.status == 0, run.output
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from jobs import route as route_job
from routing.io.lake import Lake
from routing.tools import audit

__all__ = ["WhatIf", "route", "what_if"]


@dataclass(frozen=True)
class WhatIf:
    """A what-if run: the job's exit status, the scratch lake it routed, what it printed."""

    status: int
    lake: Lake
    output: str


def route(
    spark: SparkSession,
    conf: str | os.PathLike[str],
    lake: str | os.PathLike[str],
    *,
    as_of: datetime | None = None,
) -> WhatIf:
    """Run the routing job available-now over ``lake`` with ``conf`` (``jobs.route``).

    :return: the job's exit status (0 done, 2 invalid configuration, 1 failed) and output.
    """
    argv = ["--conf", str(conf), "--lake", str(lake), "--available-now"]
    if as_of is not None:
        argv += ["--as-of", as_of.astimezone(UTC).isoformat()]
    output = io.StringIO()
    status = route_job.main(argv, spark=spark, out=output, err=output)
    return WhatIf(status, Lake.at(lake), output.getvalue())


def what_if(
    spark: SparkSession,
    lake: str | os.PathLike[str],
    conf: str | os.PathLike[str],
    scratch: str | os.PathLike[str],
) -> WhatIf:
    """Replay the inputs of ``lake`` under ``conf`` into the empty lake ``scratch``.

    The job runs ``--as-of`` the audited lake's clock (:func:`routing.tools.audit.lake_clock`), so both
    lakes stand at the same moment. Compare with :func:`routing.tools.audit.compare_outcomes` on the two
    lakes' ``queue_messages``.

    Example::

        run = what_if(spark, "lake", "/tmp/broker-5-attempts.xml", "/tmp/what-if")
        audit.compare_outcomes(audit.load_lake(spark, "lake").queue_messages,
                         audit.load_lake(spark, run.lake).queue_messages).show()
    """
    audit.copy_inputs(spark, lake, scratch)
    return route(spark, conf, scratch, as_of=audit.lake_clock(lake))
