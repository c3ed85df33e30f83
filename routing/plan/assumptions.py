"""What a batch's plan assumed of the auto-created queues, and whether it holds.

A plan assumes the moments at which the auto-created queues were created (those of
earlier batches at first, docs/DESIGN.md). Each step whose decisions depend on them
(classify's checks of the events' queues, a routing pass, a fold) is recorded here as
data: the frame it decided on and the moments it saw. Once the batch's rounds are planned,
the plan holds when none of those decisions would change under the moments the plan
found (:func:`holds`, one action over the frames that may change).

Example::

    exists = Existence(topology, assumed)
    asked = [EventChecks(classified, exists), RoutingDecisions(router, decided)]
    if not holds(asked, found):
        ...  # plan the batch again, assuming ``found``
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from routing.broker.topology import Created, Topology
from routing.plan._columns import is_in, union_all
from routing.plan.deliveries import MANAGEMENT_KIND, RETRY_QUEUE, endings_seen_differently
from routing.plan.facts import bound_since, exists_at
from routing.plan.inputs import queues_seen_differently
from routing.plan.router import Decided, Router

__all__ = [
    "Asked",
    "EndingDecisions",
    "EventChecks",
    "Existence",
    "RoutingDecisions",
    "holds",
    "retry_bound",
]


@dataclass(frozen=True)
class Existence:
    """Whether a queue exists for a row at its time and rank (what :func:`classify` asks):
    declared, auto-created by then as ``moments`` say, or one of ``assumed`` at any time.

    ``assumed``: auto-created queues the plan does not know yet, which the events name (a
    consumer or an operator names a queue once it exists: ``run_batch``'s first plan)."""

    topology: Topology
    moments: Created = field(default_factory=dict)
    assumed: tuple[str, ...] = ()

    def __call__(self, name: Column, at: Column, rank: Column | int) -> Column:
        known = exists_at(self.topology, name, at, rank, self.moments)
        return known | name.isin(*self.assumed) if self.assumed else known

    def under(self, moments: Created) -> Existence:
        """The same topology with the queues created at ``moments``, nothing assumed."""
        return Existence(self.topology, dict(moments))


def retry_bound(topology: Topology, created: Created) -> Column:
    """A RETRY's ``_AMQ_ORIG_QUEUE`` names a binding at the event's time, the auto-created
    queues created as ``created`` says: a queue that exists, or a divert."""
    name = F.col(RETRY_QUEUE)
    bound = exists_at(topology, name, F.col("at"), MANAGEMENT_KIND, created)
    diverts = sorted(d.name for d in topology.config.diverts)
    return bound | is_in(name, diverts) if diverts else bound


class Asked(Protocol):
    """A step's decisions that depend on the creation moments."""

    @property
    def seen(self) -> Created | None:
        """The moments the step saw (None: its decisions are read whatever the final ones)."""

    def changed(self, final: Created) -> DataFrame | None:
        """The rows whose decisions ``final`` moments would change (None: none can)."""


@dataclass(frozen=True)
class EventChecks:
    """classify's checks of the deliveries' and management rows' queues, made by ``exists``.

    ``never``: queues the plan took for ones that exist (``exists.assumed``) but that the
    batch never creates. The events naming them found no message and changed nothing: they
    are rejected as unknown in this plan (``run_batch``), so their checks are not asked."""

    classified: DataFrame
    exists: Existence
    never: tuple[str, ...] = ()

    @property
    def seen(self) -> Created | None:
        # checks that assumed queues the plan did not know are read whatever the moments
        return None if self.exists.assumed else self.exists.moments

    def changed(self, final: Created) -> DataFrame:
        after = self.exists.under(final)
        differ = queues_seen_differently(self.exists, after)
        if self.never:
            differ &= ~self.named_never(final)
        return self.classified.where(differ)

    def named_never(self, final: Created) -> Column:
        """The events whose ``queue`` is one the batch never creates (``never``), unless their
        ``to_queue`` check changes under ``final`` moments (a MOVE to a queue it does create)."""
        after = self.exists.under(final)
        return F.col("queue").isin(*self.never) & ~queues_seen_differently(
            self.exists, after, columns=["to_queue"]
        )

    def without(self, never: Sequence[str]) -> EventChecks:
        """These checks, the events naming a queue of ``never`` rejected rather than asked."""
        return replace(self, never=tuple(never))


@dataclass(frozen=True)
class RoutingDecisions:
    """A routing pass's decisions (:attr:`routing.plan.router.Routed.decided`)."""

    router: Router
    decided: Decided

    @property
    def seen(self) -> Created:
        return self.decided.created

    def changed(self, final: Created) -> DataFrame | None:
        return self.router.routes_seen_differently(self.decided, final)


@dataclass(frozen=True)
class EndingDecisions:
    """A fold's ending events (:attr:`routing.plan.deliveries.Folded.decided`): where a
    dead letter, an expiry or a RETRY went, as ``seen`` moments said; ``retry_target``
    whether a RETRY's target existed, as the fold saw it (:func:`retry_bound`)."""

    topology: Topology
    decided: DataFrame
    retry_target: Column
    seen: Created

    def changed(self, final: Created) -> DataFrame:
        would = retry_bound(self.topology, final)
        return self.decided.where(
            endings_seen_differently(
                bound_since(self.topology, F.col("dead_letter_address"), final),
                bound_since(self.topology, F.col("expiry_address"), final),
                (self.retry_target, would),
            )
        )


def holds(asked: Iterable[Asked], final: Created) -> bool:
    """No decision of a plan changes under the creation moments ``final`` (one action over
    the frames of the steps that saw other moments; none when every step saw ``final``, as a
    batch's later rounds usually did)."""
    final = dict(final)
    frames = [a.changed(final) for a in asked if a.seen is None or dict(a.seen) != final]
    changes = union_all([f.select(F.lit(1).alias("_changes")) for f in frames if f is not None])
    return changes is None or changes.isEmpty()
