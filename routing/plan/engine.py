"""One micro-batch of the job: rounds of routing and events (docs/DESIGN.md).

Round 1 routes the producer rows of the batch, then applies the batch's
deliveries, management rows and due expiries to every PENDING message (those of
earlier batches and those just routed). Ending transitions make copies
(dead letter, expiry, MOVE, RETRY); round 2 routes them and applies what concerns
them, and so on until a round makes no copy. Everything of one batch therefore
happens in event-time order whatever the micro-batch sizes. A batch of producer rows
alone, in which no message in play expires by the clock, has nothing to apply: it
stops after routing (one action asks whether anything expires).

Auto-created queues exist from the moment of the dead letter or expiry that
creates them (``JobState.created``: its event time, then its rank at that instant,
:data:`routing.broker.topology.RANKS`). A batch is planned with the creation moments it
assumes (those of earlier batches at first); when its own dead letters and expiries
create a queue, or create one earlier than assumed, the batch is planned again with
the moments it found, until what it assumes is what it finds (docs/DESIGN.md). Each
auto-created queue is created once in a job's life, so few batches are planned twice.
So is a batch whose routing passes took a group's turns out of ``(sent_at,
message_id)`` order (a copy of a later pass earlier than a row of an earlier one): the
next plan takes the turns it found, in order.

:func:`run_batch` is pure apart from Spark actions: it reads nothing from
storage and writes nothing; the job writes :class:`BatchResult` in one commit
per table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from routing.broker.filters import FilterSyntaxError, parse_filter
from routing.broker.ids import COPY_ID_BASE, DEAD_LETTER, EXPIRY
from routing.broker.layout import MANAGEMENT
from routing.broker.state import JobState
from routing.broker.topology import MESSAGE_RANK, Created, Topology
from routing.plan import schemas
from routing.plan._columns import literal_map, local_frame, union_all, union_of
from routing.plan.assumptions import (
    Asked,
    EndingDecisions,
    EventChecks,
    Existence,
    RoutingDecisions,
    holds,
    retry_bound,
)
from routing.plan.batch import BatchResult, batch_value, batch_values
from routing.plan.breadcrumbs import ORIG_ADDRESS
from routing.plan.deliveries import (
    BY_FILTER,
    CHANGED,
    EVENT_ORDER,
    EVENT_WHAT,
    EXPIRE_KIND,
    KEY,
    KIND,
    MANAGEMENT_KIND,
    O_ROW,
    O_VERSION,
    TO_QUEUE,
    Folded,
    copies_of,
    fold,
    fold_state,
    no_pending_message,
    rejected_events,
)
from routing.plan.expiry import Expirations, earliest_expiration, expires_at
from routing.plan.filters import matches
from routing.plan.id_ranges import WHOLE, IdRanges, ReadsById
from routing.plan.inputs import (
    OWN,
    REASON,
    classify,
    is_message_row,
    reclassify,
    split,
    to_route,
)
from routing.plan.router import RANK, Routed, Router
from routing.plan.scratch import Scratch
from routing.plan.turns import positions_frame

QUEUE_ROW = schemas.QUEUE_MESSAGE.names
_PASS = "_pass"
"""A turn request's pass, numbered through the batch's rounds in the order they ran."""
MAX_ATTEMPTS = 8
"""Plans of one batch at most, each assuming the creation moments and taking the turns
the previous one found."""
BROADCAST_CHANGES = 200_000
"""Input rows of a batch up to which the fold's changes (at most one per input row) are
broadcast to the queue rows they apply to rather than joined by a shuffle of both."""


def filter_errors(filters: Iterable[str]) -> dict[str, str]:
    """The filters that do not parse, with the parser's message."""
    errors = {}
    for text in filters:
        if not text.strip():  # blank: no filter, as Artemis's FilterImpl.createFilter
            continue
        try:
            parse_filter(text)
        except FilterSyntaxError as error:
            errors[text] = str(error)
    return errors


def expiries(in_play: DataFrame, clock: DataFrame, disabled: Sequence[str]) -> DataFrame:
    """An expiry event for each message in play whose expiration is due by the lake clock.

    :param clock: :func:`batch_values` with ``clock``.
    :param disabled: queues that expire nothing (:attr:`Topology.expiry_disabled`).
    """
    due = expires_at(batch_value("clock"))
    if disabled:
        in_play = in_play.where(~F.col("queue").isin(*disabled))
    return (
        in_play.crossJoin(clock)
        .where(due.isNotNull())
        .select(
            "queue",
            "message_id",
            due.alias("at"),
            F.lit(EXPIRE_KIND).alias(KIND),
            *_nulls(EVENT_WHAT),
            F.lit(False).alias(BY_FILTER),
            *_nulls(EVENT_ORDER),
        )
    )


def _nulls(names: Iterable[str]) -> list[Column]:
    types = {O_VERSION: "long", O_ROW: "long"}
    return [F.lit(None).cast(types.get(n, "string")).alias(n) for n in names]


def expand_by_filter(ops: DataFrame, in_play: DataFrame, filters: Iterable[str]) -> DataFrame:
    """Management rows without ``message_id``: one event per PENDING message of the queue
    that had entered it by the row's time and matches its filter (null: every one).

    Not a message that entered at the row's very instant with a management row's copy
    (rank :data:`MANAGEMENT_KIND`): Artemis moves the messages it iterates, and the copies
    a move routes (a RETRY's, like a new message, can come back to the same queue) are
    not among them. (Two management rows of one instant: the later does not see the
    earlier's copies either, a simplification.)"""
    texts = sorted(set(filters))
    matched = F.col("filter").isNull()
    if texts:
        # element_at over an array, not a CASE chain: many filters would outgrow codegen;
        # a row without a filter must not reach element_at (Spark folds a null index to false)
        index = literal_map({t: i + 1 for i, t in enumerate(texts)}, "int")[F.col("filter")]
        matched = matched | F.coalesce(
            F.element_at(F.array(*[matches(t) for t in texts]), index), F.lit(False)
        )
    joined = in_play.join(F.broadcast(ops), "queue")  # operations are few: rows stay put
    entered = (F.col("routed_at") < F.col("at")) | (
        (F.col("routed_at") == F.col("at")) & (F.col(RANK) < F.lit(MANAGEMENT_KIND))
    )
    return joined.where(entered & matched).select(
        "queue",
        "message_id",
        "at",
        F.lit(MANAGEMENT_KIND).alias(KIND),
        F.lit(None).cast("string").alias("outcome"),
        "op",
        TO_QUEUE,
        F.lit(True).alias(BY_FILTER),
        *EVENT_ORDER,
    )


def run_batch(
    events: DataFrame,
    pending: DataFrame,
    state: JobState,
    topology: Topology,
    router: Router,
    scratch: Scratch,
    *,
    as_of: int | None = None,
    taken: DataFrame | None = None,
    pending_expirations: Expirations | None = None,
    reads: ReadsById = WHOLE,
) -> BatchResult:
    """Plan one micro-batch: checkpoints at each routing pass and each round's fold,
    one action for the batch's clock and filters, one action per round collecting the
    addresses its copies are at, where the next round routes (with auto-created queues
    in the topology, also the queues the round's dead letters and expiries created).

    A batch that creates an auto-created queue (or finds it created earlier than the
    state says) is planned again, assuming the moments it found, until it finds what it
    assumed (at most :data:`MAX_ATTEMPTS` plans; the last one is kept). So every
    decision, in any round, sees a queue from the moment of its creation, even one a
    later round creates: a copy that entered the dead-letter address in round 2 and
    was dead-lettered again there may create a queue before a round-1 decision's time.
    The checkpoints of a plan set aside stay in ``scratch`` until the batch is written.

    :param events: the batch's rows of the ``lake_events`` source.
    :param pending: PENDING rows of ``queue_messages`` before the batch.
    :param state: the job state after the previous batch.
    :param scratch: keeps the checkpoints of the batch; released by the caller.
    :param as_of: ``--as-of`` in epoch µs.
    :param taken: producer ids accepted by earlier batches (``message_id``), if any.
    :param pending_expirations: what is known of ``pending``'s expirations (None: nothing);
        when none is due by the clock, a batch without events asks no more to know that
        nothing expires.
    :param reads: which of ``pending`` and ``taken`` are files read only where the ids
        the batch names may be (:mod:`routing.plan.id_ranges`).
    """
    assumed = dict(state.created)
    foreseen: Foreseen | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        result, holds, requests = _plan_batch(
            events,
            pending,
            state,
            topology,
            router,
            scratch,
            assumed,
            as_of=as_of,
            taken=taken,
            events_expect_queues=attempt == 1,
            pending_expirations=pending_expirations,
            foreseen=foreseen,
            reads=reads,
        )
        result.attempts = attempt
        if holds:
            break
        assumed = result.created
        if requests is not None:  # the next plan takes these turns in one order
            start = positions_frame(events.sparkSession, state.positions)
            foreseen = Foreseen(*router.foresee(requests, start, scratch))
    return result


@dataclass(frozen=True)
class Foreseen:
    """The turns a batch's plan is expected to take: every request an earlier plan made,
    in ``(sent_at, message_id)`` order per group whatever the round or pass that made it
    (turns.TURNS), and the positions after them."""

    turns: DataFrame
    positions: DataFrame


@dataclass
class Rounds:
    """What a plan's rounds have made so far: each output as the frames it is the union of,
    the steps whose decisions depend on the creation moments, and the turns taken."""

    events: EventChecks  # classify's checks of the events' queues
    rounds: int = 0
    # the routing passes' and the folds' decisions that depend on the creation moments
    decisions: list[Asked] = field(default_factory=list)
    entries: list[DataFrame | None] = field(default_factory=list)  # each round's new queue rows
    updated: list[DataFrame] = field(default_factory=list)  # each fold's changed rows
    journal: list[DataFrame] = field(default_factory=list)
    rejected: list[DataFrame] = field(default_factory=list)  # by routing and the folds
    unmatched: list[DataFrame] = field(default_factory=list)  # rejected at the end
    copies: list[DataFrame] = field(default_factory=list)  # rows for the address tables
    # each pass's turn requests, numbered (_PASS) in the order the passes took them
    requests: list[DataFrame] = field(default_factory=list)
    turn_groups: Counter[str] = field(default_factory=Counter)  # group -> passes taking turns
    # auto-created queues created, each with the moment of a row that created it
    found: list[tuple[str, tuple[int, int]]] = field(default_factory=list)

    @property
    def asked(self) -> list[Asked]:
        """Every step whose decisions depend on the creation moments (:func:`holds`)."""
        return [self.events, *self.decisions]

    def add_routed(self, routed: Routed, router: Router) -> None:
        """A round's routing passes."""
        self.decisions += [RoutingDecisions(router, d) for d in routed.decided]
        first = len(self.requests)
        self.requests += [
            r.withColumn(_PASS, F.lit(first + i)) for i, r in enumerate(routed.requests)
        ]
        self.turn_groups.update(g for groups in routed.turn_groups for g in groups)
        self.journal += routed.journal
        self.rejected += routed.rejected
        self.copies += routed.copies

    def add_folded(self, folded: Folded, endings: EndingDecisions) -> DataFrame:
        """A round's fold. Returns its events that named no message in play but a copy's
        id: a copy made later in the batch may still enter that queue, so they wait for the
        next round; the others are rejected at the end."""
        self.decisions.append(endings)
        self.updated.append(folded.updated)
        self.journal.append(folded.journal)
        self.rejected.append(folded.rejected)
        copy = F.col("message_id") >= COPY_ID_BASE
        self.unmatched.append(folded.unmatched.where(~copy))
        return folded.unmatched.where(copy)


def created_moments(
    state: Created, found: Iterable[tuple[str, tuple[int, int]]]
) -> dict[str, tuple[int, int]]:
    """The creation moments of ``state`` with those ``found`` in a batch: each queue's
    earliest (a late row can create a queue before the moment an earlier batch saw)."""
    out = dict(state)
    for name, when in found:
        out[name] = min(when, out.get(name, when))
    return dict(sorted(out.items()))


def created_queue(topology: Topology) -> Column:
    """The auto-created queue a dead-letter or expiry copy's move creates (null: none): the
    one of the address it left (``_AMQ_ORIG_ADDRESS``, the address of the queue it left).

    A move that creates a queue always makes a copy: the queue it creates is a binding
    of the address it goes to (:func:`routing.plan.facts.queue_facts`).
    """
    left = F.col("properties")[ORIG_ADDRESS]
    return F.when(
        F.col("copy_reason") == DEAD_LETTER, literal_map(topology.creations(DEAD_LETTER))[left]
    ).when(F.col("copy_reason") == EXPIRY, literal_map(topology.creations(EXPIRY))[left])


def _plan_batch(
    events: DataFrame,
    pending: DataFrame,
    state: JobState,
    topology: Topology,
    router: Router,
    scratch: Scratch,
    assumed: Created,
    *,
    as_of: int | None,
    taken: DataFrame | None,
    events_expect_queues: bool = False,
    pending_expirations: Expirations | None = None,
    foreseen: Foreseen | None = None,
    reads: ReadsById = WHOLE,
) -> tuple[BatchResult, bool, DataFrame | None]:
    """One plan of the batch, assuming the auto-created queues exist from ``assumed``
    (and from what its earlier rounds create); :attr:`BatchResult.created` is what the
    plan itself creates, merged with ``state``'s.

    The plan holds (second value) when every decision that asked whether an auto-created
    queue existed got the answer the moments the plan found give
    (:func:`routing.plan.assumptions.holds`): then it is the plan that assumed those moments
    from the start, and every turn group took its turns in ``(sent_at, message_id)`` order
    (:func:`_turns_hold`). A group can take turns in several passes and rounds (an address
    that both producers and diverts, dead letters or expiries send to): the passes take them
    one after the other, and a copy routed in a later pass may be earlier than a row of an
    earlier pass. Then the next plan takes the turns found, all in one order (``foreseen``),
    and holds when it makes the requests foreseen. The third value is the plan's turn
    requests, when a group took turns in more than one pass (None: the passes' order is the
    turns' order).

    ``events_expect_queues``: the input's deliveries and management rows take an
    auto-created queue the plan does not know yet for one that exists. A consumer or an
    operator naming ``DLQ.x`` usually does so after it was created, often by a dead
    letter of the same batch (a replayed log is one batch): assuming it absent would
    plan every such batch twice. When the batch never creates such a queue, the events
    naming it are rejected as unknown in this plan (they found nothing and changed
    nothing); when it creates one later than an event assumed, or a MOVE went to one it
    never creates, the batch is planned again with what it found.
    """
    spark: SparkSession = events.sparkSession
    expected = (
        tuple(q.name for q in topology.auto_queues if q.name not in assumed)
        if events_expect_queues
        else ()
    )
    exists = Existence(topology, dict(assumed), expected)
    classified = classify(events, topology.queues, scratch, taken, exists, taken_by_id=reads.taken)
    facts = batch_facts(classified, list(expected))
    if not facts.expecting:
        # no event named a queue it expected: the plan assumed ``assumed``, and the checks
        # are those of ``assumed`` alone (no row they are asked of names another queue)
        exists = exists.under(assumed)
    # the lake clock (SPEC §5.4): latest event time seen, or --as-of if later; never back
    times = [t for t in (state.clock, facts.latest, as_of) if t is not None]
    clock = max(times) if times else None
    clock_values = batch_values(spark, clock=clock)
    bad = filter_errors(facts.filters)
    good_filters = [f for f in facts.filters if f not in bad]
    inputs = split(classified, bad)
    queue_addresses = {q.name: q.address for q in topology.queues.values()}
    # what the rounds see: the moments assumed, and those the rounds so far created
    known = dict(assumed)
    planned = Rounds(EventChecks(classified, exists))

    positions = positions_frame(spark, state.positions)
    old = pending.select(*QUEUE_ROW)
    if reads.pending and _named_only(facts, clock, pending_expirations):
        old = old.where(facts.event_ids.holds(F.col("message_id")))
    waiting = inputs.by_id
    # after round 1 only copies enter queues; unless an event names a copy, an operator
    # works by filter, or an address may give a copy an expiration, nothing applies to them
    later_rounds_apply = bool(facts.copy_events or facts.filter_ops) or router.may_set_expiration
    # whether a message in round 1's play may expire by the clock, known without an action
    may_expire = _may_expire(clock, facts, router, pending_expirations)
    entering = inputs.messages
    # where the rows entering a round are: round 1's messages where the facts say, a later
    # round's copies where the moves before it sent them (the action that finds them says)
    at = facts.addresses
    while True:
        planned.rounds += 1
        first_round = planned.rounds == 1
        routed = router.route(
            entering,
            positions,
            scratch,
            known,
            fresh=True,
            at=at,
            foreseen=None if foreseen is None else foreseen.turns,
        )
        planned.add_routed(routed, router)
        if first_round and router.may_create(at):
            # only a producer's rows, and their divert copies, create an address's queue
            planned.found += router.creators(routed.decided)
            known = created_moments(known, planned.found)
        positions = routed.positions
        if not first_round:
            planned.copies.append(entering.select(*schemas.MESSAGE.names))
        new = union_all(routed.entries)  # with the rank each row entered at
        planned.entries.append(None if new is None else new.select(*QUEUE_ROW))
        earlier = old.withColumn(RANK, F.lit(MESSAGE_RANK))  # of earlier batches
        in_play = union_of([earlier, new] if first_round else [new])
        if not first_round and not later_rounds_apply:
            break
        if (
            first_round
            and not facts.events
            and not (may_expire and _expiring(in_play, clock_values, topology.expiry_disabled))
        ):
            break  # nothing to apply: no event, and no message in play expires by the clock
        # only what may happen is read: the rows in play are read once for the operators'
        # filters and once for the expiries, each a pass over every row in play
        round_events = union_of(
            [
                waiting,
                expand_by_filter(inputs.by_filter, in_play, good_filters)
                if facts.filter_ops
                else None,
                expiries(in_play, clock_values, topology.expiry_disabled)
                if clock is not None and (not first_round or may_expire)
                else None,
            ]
        )
        fold_facts = router.fold_facts.frame(spark, known)
        retry_target = retry_bound(topology, known)
        folded = fold(
            round_events, fold_state(in_play), fold_facts, queue_addresses, scratch, retry_target
        )
        endings = EndingDecisions(topology, folded.decided, retry_target, known)
        waiting = planned.add_folded(folded, endings)
        entering = scratch.keep(copies_of(folded.moves, in_play, router.source_of))
        # one action: the addresses the copies are at (none: no copy), and the queues
        # their moves created
        if topology.auto_queues:
            made = (
                entering.groupBy("address", created_queue(topology).alias("queue"))
                .agg(F.min(F.struct(F.unix_micros("sent_at").alias("at"), RANK)).alias("first"))
                .collect()
            )
            planned.found += [
                (r.queue, (r.first["at"], r.first[RANK])) for r in made if r.queue is not None
            ]
            known = created_moments(known, planned.found)
        else:
            made = entering.select("address").distinct().collect()
        if not made:
            break
        at = frozenset(r.address for r in made)
    planned.unmatched.append(waiting)
    created = created_moments(state.created, planned.found)
    # a batch whose rows all passed classify's checks, and whose filters all parse, rejects
    # none of them: the kept rows are not read again to find none
    input_rejected: DataFrame | None = inputs.rejected if facts.refused or bad else None
    unmatched = planned.unmatched
    never = [q for q in exists.assumed if q not in created]
    if never:
        # The events naming a queue the plan took for one that exists but the batch never
        # created found no message there and changed nothing: routing and RETRY see
        # created queues only, and a MOVE to it is a decision asked below. They are
        # rejected as a plan assuming ``created`` rejects them, not planned again.
        planned.events = planned.events.without(never)
        named_never = planned.events.named_never(created)
        rechecked = reclassify(classified, named_never, exists.under(created))
        input_rejected = split(rechecked, bad).rejected
        unmatched = [u.where(~F.col("queue").isin(*never)) for u in unmatched]
    # every unmatched row is an event: a batch without events leaves none
    no_such_message = map(_no_such_message, unmatched) if facts.events else ()
    rejections = union_all([input_rejected, *planned.rejected, *no_such_message])
    # a plan that finds what it assumed holds without a read
    plan_holds = holds(planned.asked, created)
    # a group that took all its turns in one pass took them in order: nothing to check
    checked = max(planned.turn_groups.values(), default=0) > 1 or foreseen is not None
    in_passes = union_all(planned.requests) if checked else None
    if plan_holds and checked:
        plan_holds = _turns_hold(in_passes, None if foreseen is None else foreseen.turns)
    if foreseen is not None:  # its passes took the turns foreseen and moved no position
        positions = foreseen.positions

    queue_rows = rows_written(
        planned.entries, planned.updated, old, broadcast=facts.rows <= BROADCAST_CHANGES
    )
    if queue_rows is None:  # nothing routed, nothing changed
        # a frame of its own: one made from ``old`` shares its columns' ids, and when the
        # write carries the PENDING rows to the next batch it joins the two, in a plan
        # that Spark's optimizer then makes invalid (an alias reusing its column's id)
        queue_rows = _none_of(spark, schemas.QUEUE_MESSAGE)
    copied = union_all(planned.copies)
    journaled = union_all(planned.journal)
    batch = BatchResult(
        queue_rows=queue_rows,
        journal=journaled if journaled is not None else _none_of(spark, schemas.JOURNAL),
        rejected=rejections if rejections is not None else _none_of(spark, schemas.REJECTED),
        copies=copied if copied is not None else _none_of(spark, schemas.MESSAGE),
        clock=clock,
        positions=positions,
        routed=inputs.messages,
        rows_in=facts.rows - facts.own_copies,
        routed_rows=facts.routed,
        own_copies=facts.own_copies,
        rounds=planned.rounds,
        folded=bool(planned.updated),
        created=created,
        known_empty=frozenset(
            name
            for name, frames in (
                ("copies", copied),
                ("rejected", rejections),
                ("journal", journaled),
                ("producer_ids", inputs.messages if facts.routed else None),
            )
            if frames is None
        ),
    )
    requests_made = None if in_passes is None else in_passes.drop(_PASS)
    return batch, plan_holds, requests_made


@dataclass(frozen=True)
class BatchFacts:
    """What the plan needs to know of the batch's classified rows before it plans
    (:func:`batch_facts`): the latest event time (µs), the operators' filters, the counts
    that say which reads can find nothing, and the addresses the batch's messages are at."""

    latest: int | None
    filters: tuple[str, ...]
    rows: int
    own_copies: int
    routed: int
    earliest_expiration: int | None
    addresses: frozenset[str]
    events: int
    copy_events: int
    filter_ops: int
    refused: int
    event_ids: IdRanges
    expecting: int


def batch_facts(classified: DataFrame, expected: list[str]) -> BatchFacts:
    """The :class:`BatchFacts` of the classified rows (one action).

    :param expected: auto-created queues the events may name before the plan knows them
        (``expecting`` counts the events that do).
    """
    event = ~is_message_row()
    found = classified.agg(
        F.max(F.unix_micros(F.coalesce("sent_at", "at"))).alias("latest"),
        F.collect_set(F.when(F.col("source") == MANAGEMENT, F.col("filter"))).alias("filters"),
        F.count(F.lit(1)).alias("rows"),
        F.count_if(F.col(OWN)).alias("own_copies"),
        F.count_if(to_route()).alias("routed"),
        earliest_expiration(to_route()).alias("earliest_expiration"),
        F.collect_set(F.when(to_route(), F.col("address"))).alias("addresses"),
        F.count_if(event).alias("events"),
        F.count_if(event & (F.col("message_id") >= COPY_ID_BASE)).alias("copy_events"),
        F.count_if((F.col("source") == MANAGEMENT) & F.col("message_id").isNull()).alias(
            "filter_ops"
        ),
        F.count_if(F.col(REASON).isNotNull()).alias("refused"),
        *IdRanges.aggregates(F.when(event, F.col("message_id")), "events"),
        F.count_if(
            event & (F.col("queue").isin(*expected) | F.col("to_queue").isin(*expected))
        ).alias("expecting"),
    ).collect()[0]  # an aggregate without groups: exactly one row
    return BatchFacts(
        latest=found.latest,
        filters=tuple(sorted(found.filters)),
        rows=found.rows,
        own_copies=found.own_copies,
        routed=found.routed,
        earliest_expiration=found.earliest_expiration,
        addresses=frozenset(found.addresses),
        events=found.events,
        copy_events=found.copy_events,
        filter_ops=found.filter_ops,
        refused=found.refused,
        event_ids=IdRanges.of(found, "events"),
        expecting=found.expecting,
    )


def rows_written(
    entries: list[DataFrame | None],
    updated: list[DataFrame],
    old: DataFrame,
    *,
    broadcast: bool,
) -> DataFrame | None:
    """The batch's ``queue_messages`` rows: every entry its rounds made, and each PENDING
    row of an earlier batch (``old``) that a fold changed (``updated``); None: no row.

    :param broadcast: the changes are few enough to send to every task (:func:`apply_changes`).
    """
    rows = union_all(entries)
    if updated:
        changed = union_of(updated)
        keys = changed.select(*KEY)
        touched = old.join(F.broadcast(keys) if broadcast else keys, list(KEY), "left_semi")
        return apply_changes(union_of([rows, touched]), changed, broadcast=broadcast)
    return rows


def _none_of(spark: SparkSession, schema: pa.Schema) -> DataFrame:
    """An empty frame of ``schema``: an output the plan makes no row of."""
    return local_frame(spark, [], schemas.spark_schema(schema))


def _may_expire(
    clock: int | None, facts: BatchFacts, router: Router, pending: Expirations | None
) -> bool:
    """Whether a message in play may expire by the lake ``clock``, as far as the batch knows
    without an action: the expirations of the PENDING rows it started from (``pending``;
    None: unknown), and of the rows it routes (``facts``: the earliest, and the addresses
    they enter, whose settings or whose copies' addresses' settings may set one)."""
    if clock is None:
        return False
    if _pending_may_expire(clock, pending):
        return True
    routed = Expirations(facts.earliest_expiration)
    return routed.due_by(clock) or router.may_set_expiration_from(facts.addresses)


def _named_only(facts: BatchFacts, clock: int | None, pending: Expirations | None) -> bool:
    """Whether the batch changes only the PENDING rows of earlier batches that its
    deliveries and management rows name by id: no operator works by filter, and none of
    those rows may expire by the lake ``clock`` (their expirations ``pending`` known)."""
    return not facts.filter_ops and not _pending_may_expire(clock, pending)


def _pending_may_expire(clock: int | None, pending: Expirations | None) -> bool:
    """Whether a PENDING row of an earlier batch may expire by the lake ``clock``, as far as
    their expirations ``pending`` say (None: unknown)."""
    return clock is not None and (pending is None or pending.due_by(clock))


def _expiring(in_play: DataFrame, clock_values: DataFrame, disabled: Sequence[str]) -> bool:
    """Some message in play expires by the lake clock (one action)."""
    return not expiries(in_play, clock_values, disabled).isEmpty()


def _turns_hold(requests: DataFrame | None, foreseen: DataFrame | None) -> bool:
    """Whether every turn group took its turns in ``(sent_at, message_id)`` order (one
    action). Without turns foreseen, the passes took them one after the other: they did
    when no request comes before one of an earlier pass. With turns foreseen, they were
    taken in that order: they were right when the plan made the very requests foreseen
    (``requests`` None: no pass took a turn)."""
    if requests is None:
        return foreseen is None or foreseen.isEmpty()
    if foreseen is None:
        in_order = Window.partitionBy("group").orderBy("sent_at", "message_id")
        late = F.lag(_PASS).over(in_order) > F.col(_PASS)
        return requests.select(late.alias("_late")).where("_late").isEmpty()
    key = ["group", "message_id"]
    made = requests.select(*key, F.lit(True).alias("_made"))
    expected = foreseen.select(*key, F.lit(True).alias("_foreseen"))
    missed = made.join(expected, key, "full_outer")
    return missed.where(F.col("_made").isNull() | F.col("_foreseen").isNull()).isEmpty()


def apply_changes(rows: DataFrame, changed: DataFrame, *, broadcast: bool) -> DataFrame:
    """Queue rows with the fold's changes applied (``changed``: KEY + CHANGED of the rows an
    event changed, each key at most once).

    :param broadcast: ``changed`` is small enough to send to every task, so ``rows``, the
        wide side, is not shuffled.
    """
    new = changed.select(
        *KEY, F.lit(True).alias("_changed"), *[F.col(c).alias(f"_new_{c}") for c in CHANGED]
    )
    joined = rows.join(F.broadcast(new) if broadcast else new, list(KEY), "left")
    return joined.select(
        *[
            F.when(F.col("_changed"), F.col(f"_new_{c}")).otherwise(F.col(c)).alias(c)
            if c in CHANGED
            else F.col(c)
            for c in QUEUE_ROW
        ]
    )


def _no_such_message(events: DataFrame) -> DataFrame:
    return rejected_events(
        events.where(~F.col(BY_FILTER) & (F.col(KIND) != EXPIRE_KIND)), no_pending_message()
    )
