"""Differential test: compiled filter Columns (Spark) against the plain-Python oracle.

A seeded generator builds valid filter ASTs over a small vocabulary of
properties and header fields; each one is rendered to text, parsed back (the
round trip must give the same AST), compiled, and evaluated on every message
of a frame of awkward messages in a few Spark jobs. Spark's three-valued answer
(True / False / None) must equal :func:`tests.filter_oracle.evaluate`'s.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from routing.broker.filters import (
    And,
    Arithmetic,
    Between,
    BooleanLiteral,
    Comparison,
    Expression,
    Identifier,
    In,
    IsNull,
    Like,
    Negate,
    Not,
    NullLiteral,
    NumberLiteral,
    Or,
    StringLiteral,
    parse_filter,
)
from routing.plan.filters import filter_column
from tests.filter_oracle import evaluate

SEED = 20260101
N_FILTERS = 250
CHUNK = 300  # filter columns per Spark job

PROPS = ["a", "b", "c", "d.e", "it's", "NOT"]
HEADERS = ["AMQPriority", "AMQExpiration", "AMQTimestamp", "AMQDurable", "AMQUserID", "AMQAddress"]
NUMERIC = ["5", "10", "-3", "0", "-0", "2.5", "-0.5", "1e3", ".5", "5.", "+7", "007", "4", "7",
           "9007199254740993", "9007199254740992", "9223372036854775807", "-9223372036854775808",
           "9223372036854775808", "1767225600000"]  # fmt: skip
BOOLEAN = ["TRUE", "true", "True", "false", "FALSE", "yes", ""]
TEXT = ["abc", "ABC", "abd", "x_1", "x1", "x_", "a%b", "a.b", "a\\b", "[x]", "a\nb", "é", "alice",
        "DURABLE", "NON_DURABLE", "orders", " 5", "NaN", "Infinity", "1d", "0x10"]  # fmt: skip
VALUES = [*NUMERIC, *BOOLEAN, *TEXT]
NUMBERS: list[int | float] = [0, 1, 2, 3, 4, 5, 7, 9, 10, -1, -3, 2.5, -0.5, 1e3, 1e300, 0.1, 100,
    2**31, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 9007199254740992.0, 1767225600000]  # fmt: skip
ESCAPES = [None, None, "\\", "!", "%", "x"]


class _Gen:
    """Random valid filter ASTs (valid: Artemis's parse-time checks pass)."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def ident(self) -> Identifier:
        pool = PROPS if self.r.random() < 0.65 else HEADERS
        return Identifier(self.r.choice(pool))

    def number(self) -> NumberLiteral:
        return NumberLiteral(self.r.choice(NUMBERS))

    def numeric(self, depth: int) -> Expression:
        """An operand of < <= > >= BETWEEN: numbers, identifiers, arithmetic, negation."""
        k = self.r.random()
        if depth <= 0 or k < 0.45:
            return self.number() if self.r.random() < 0.5 else self.ident()
        if k < 0.85:
            op = self.r.choice("+-*/%")
            left = self.numeric(depth - 1)
            right = self.numeric(depth - 1) if self.r.random() < 0.85 else self.string()
            return Arithmetic(op, left, right)
        inner = self.numeric(depth - 1)
        if isinstance(inner, NumberLiteral):
            inner = self.ident()  # the parser folds -literal into a literal
        return Negate(inner)

    def string(self) -> StringLiteral:
        return StringLiteral(self.r.choice(VALUES))

    def value(self, depth: int) -> Expression:
        """An operand of = / <>."""
        k = self.r.random()
        if k < 0.45:
            return self.numeric(depth - 1)
        if k < 0.8:
            return self.string()
        if k < 0.9:
            return BooleanLiteral(self.r.random() < 0.5)
        nested = self.boolean(depth - 1)
        return BooleanLiteral(False) if isinstance(nested, NullLiteral) else nested  # no "= NULL"

    def like(self, escape: str | None) -> str:
        """A pattern made from a value: some characters become wildcards or get escaped."""
        out = []
        for ch in self.r.choice(VALUES):
            k = self.r.random()
            if k < 0.15:
                out.append("%")
            elif k < 0.3:
                out.append("_")
            elif k < 0.4 and escape is not None:
                out.append(escape + self.r.choice(["%", "_", escape, ch]))
            elif k < 0.45:
                out.append(self.r.choice([".", "[", "*", "$", "\\", "(", "^", "?"]))
            else:
                out.append(ch)
        return "".join(out)

    def predicate(self, depth: int) -> Expression:
        k = self.r.randrange(11)
        if k <= 2:
            left, right = self.value(depth), self.value(depth)
            if isinstance(left, BooleanLiteral) and isinstance(
                right, (StringLiteral, NumberLiteral)
            ):
                left, right = right, left  # TRUE = 'x' is refused, 'x' = TRUE is not
            return Comparison(self.r.choice(["=", "<>"]), left, right)
        if k <= 4:
            op = self.r.choice(["<", "<=", ">", ">="])
            return Comparison(op, self.numeric(depth - 1), self.numeric(depth - 1))
        if k == 5:
            operand, low, high = (self.numeric(depth - 1) for _ in range(3))
            return Between(operand, low, high, self.r.random() < 0.4)
        if k == 6:
            operand = self.ident() if self.r.random() < 0.8 else self.value(depth)
            escape = self.r.choice(ESCAPES)
            return Like(operand, self.like(escape), escape, self.r.random() < 0.3)
        if k == 7:
            values = tuple(self.r.sample(VALUES, self.r.randint(1, 4)))
            return In(self.ident(), values, self.r.random() < 0.4)
        if k == 8:
            operand = self.r.choice([self.ident(), self.numeric(depth - 1), self.value(depth)])
            return IsNull(operand, self.r.random() < 0.5)
        if k == 9:
            return self.r.choice([BooleanLiteral(True), BooleanLiteral(False), NullLiteral()])
        return self.ident()  # cast to a boolean

    def boolean(self, depth: int) -> Expression:
        """A boolean expression (or an identifier, which Artemis casts)."""
        k = self.r.random()
        if depth <= 0 or k < 0.45:
            return self.predicate(max(depth, 1))
        if k < 0.65:
            return And(self.boolean(depth - 1), self.boolean(depth - 1))
        if k < 0.85:
            return Or(self.boolean(depth - 1), self.boolean(depth - 1))
        return Not(self.boolean(depth - 1))


def _filters() -> list[Expression]:
    gen = _Gen(random.Random(SEED))
    return [gen.boolean(gen.r.randint(1, 3)) for _ in range(N_FILTERS)]


def _messages() -> list[dict[str, Any]]:
    """Fixed awkward messages plus seeded random ones."""
    msgs: list[dict[str, Any]] = [
        {"properties": None},
        {"properties": {}},
        {"properties": {"a": "5", "b": "10", "c": "abc"}, "priority": 7, "durable": False, "user_id": "alice",
         "expiration_ms": 1767229200000, "sent_at_ms": 1767225600000, "address": "orders"},
        {"properties": {"a": "9223372036854775807", "b": "9223372036854775806", "c": "9007199254740993"}},
        {"properties": {"a": "TRUE", "b": "true", "c": "false", "NOT": "1"}, "durable": True},
        {"properties": {"a": "x_1", "b": "a%b", "d.e": "[x]", "it's": "é"}, "priority": 0},
        {"properties": {"AMQUserID": "bob", "AMQAddress": "fallback"}, "address": None},
    ]  # fmt: skip
    rng = random.Random(SEED + 1)
    pools = [NUMERIC, NUMERIC, BOOLEAN, TEXT]
    for _ in range(90):
        props = {
            p: rng.choice(rng.choice(pools)) for p in [*PROPS, "AMQUserID"] if rng.random() < 0.8
        }
        msgs.append(
            {
                "properties": props,
                "priority": rng.choice([None, 0, 4, 5, 9]),
                "durable": rng.choice([None, True, False]),
                "expiration_ms": rng.choice([None, 1767225600000, 1767225601234, 0]),
                "sent_at_ms": rng.choice([None, 1767225600000, 1767225600999]),
                "user_id": rng.choice([None, "alice", "5", "", "true"]),
                "address": rng.choice([None, "orders", "a.b", "7"]),
            }
        )
    return msgs


def _ts(ms: int | None) -> datetime | None:
    return None if ms is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


SCHEMA = (
    "id int, properties map<string,string>, priority int, durable boolean, expiration timestamp, "
    "sent_at timestamp, user_id string, address string"
)


def test_generated_filters_round_trip() -> None:
    """Rendering then parsing gives back the same AST (the generator only makes valid filters)."""
    for f in _filters():
        assert parse_filter(str(f)) == f, str(f)


def test_spark_matches_oracle(spark) -> None:
    filters = [parse_filter(str(f)) for f in _filters()]
    msgs = _messages()
    rows = [
        (i, m.get("properties"), m.get("priority"), m.get("durable"), _ts(m.get("expiration_ms")),
         _ts(m.get("sent_at_ms")), m.get("user_id"), m.get("address"))
        for i, m in enumerate(msgs)
    ]  # fmt: skip
    # repartition: keep the Project out of the driver-side local-relation shortcut, so the
    # generated code path (as in the job) is what runs.
    df = spark.createDataFrame(rows, SCHEMA).repartition(2).cache()
    mismatches = []
    for start in range(0, len(filters), CHUNK):
        chunk = filters[start : start + CHUNK]
        cols = [filter_column(f).alias(f"f{start + j}") for j, f in enumerate(chunk)]
        for row in df.select("id", *cols).collect():
            m = msgs[row["id"]]
            for j, f in enumerate(chunk):
                got = row[f"f{start + j}"]
                want = evaluate(f, m)
                if got != want:
                    mismatches.append((str(f), m, got, want))
    df.unpersist()
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


@pytest.mark.parametrize("seed", [SEED])
def test_generator_covers_every_construct(seed: int) -> None:
    """Guard the generator itself: every node type and every header appears."""
    seen: set[str] = set()

    def walk(e: Expression) -> None:
        seen.add(type(e).__name__)
        if isinstance(e, Identifier):
            seen.add(e.name)
        for child in vars(e).values():
            if isinstance(child, Expression):
                walk(child)

    for f in _filters():
        walk(f)
    kinds = {"And", "Or", "Not", "Comparison", "Between", "Like", "In", "IsNull", "Arithmetic", "Negate",
             "NumberLiteral", "StringLiteral", "BooleanLiteral", "NullLiteral", "Identifier"}  # fmt: skip
    assert kinds | set(HEADERS) <= seen
