"""Differential test: compiled filter Columns (Spark) against the plain-Python oracle.

A seeded generator (``tests/filter_cases.py``) builds valid filter ASTs over a small
vocabulary of properties and header fields; each one is rendered to text, parsed back
(the round trip must give the same AST), compiled, and evaluated on every message of a
frame of awkward messages (typed properties of all eight types and untyped ones) in a few
Spark jobs. Spark's three-valued ``filter_column`` must equal
:func:`tests.filter_oracle.evaluate`, and ``matches`` (compiled apart: where NULL and FALSE
are one) be its TRUE; the oracle's own ``matches`` (Artemis's ``matches()`` methods) is its
``evaluate`` being TRUE too.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from routing.broker.filters import ConvertStrings, Expression, Identifier, parse_filter
from routing.plan.filters import filter_column, matches
from tests import filter_oracle
from tests.filter_cases import HEADERS, SCHEMA, FilterGen, messages, rows

SEED = 20260101
N_FILTERS = 110
N_MESSAGES = 110
CHUNK = 25  # filters per Spark job (small projections: Spark's code generation stays quick)


def _filters() -> list[Expression]:
    gen = FilterGen(random.Random(SEED))
    return [gen.filter(gen.r.randint(1, 3)) for _ in range(N_FILTERS)]


def _messages() -> list[dict[str, Any]]:
    """Fixed awkward messages plus seeded random ones (some all typed, some untyped)."""
    msgs: list[dict[str, Any]] = [
        {"properties": None},
        {"properties": {}, "property_types": None},
        {"properties": {"a": "5", "b": "10", "c": "abc"}, "priority": 7, "durable": False, "user_id": "alice",
         "expiration_ms": 1767229200000, "sent_at_ms": 1767225600000, "address": "orders"},
        {"properties": {"a": "9223372036854775807", "b": "9223372036854775806", "c": "9007199254740993"}},
        {"properties": {"a": "TRUE", "b": "true", "c": "false", "NOT": "1"}, "durable": True},
        {"properties": {"a": "x_1", "b": "a%b", "d.e": "[x]", "it's": "é"}, "priority": 0},
        {"properties": {"AMQUserID": "bob", "AMQAddress": "fallback"}, "address": None},
        {"properties": {"a": "7", "b": "7", "c": "7"}, "property_types": {"a": "short", "b": "integer", "c": "long"}},
        {"properties": {"a": "-0.0", "b": "0", "c": "NaN"}, "property_types": {"a": "double", "b": "integer", "c": "float"}},
        {"properties": {"a": "0.1", "b": "0.1", "c": "true"}, "property_types": {"a": "float", "b": "double", "c": "boolean"}},
        {"properties": {"a": "\U0001f600", "b": "\uffff", "c": "7"}, "property_types": {"a": "string", "b": "string"}},
        {"properties": {"a": "2147483647", "b": "-128", "c": "9223372036854775807"},
         "property_types": {"a": "integer", "b": "byte", "c": "long"}},
    ]  # fmt: skip
    return msgs + messages(SEED + 1, N_MESSAGES - len(msgs))


def test_generated_filters_round_trip() -> None:
    """Rendering then parsing gives back the same AST (the generator only makes valid filters)."""
    for f in _filters():
        assert parse_filter(str(f)) == f, str(f)


def test_spark_matches_oracle(spark) -> None:
    filters = [parse_filter(str(f)) for f in _filters()]
    msgs = _messages()
    # repartition: keep the Project out of the driver-side local-relation shortcut, so the
    # per-row evaluation (as in the job) is what runs; interpreted, as the job's small batches
    # are (session.SMALL_BATCH_CONF): quick to start, and test_filters_artemis.py runs the
    # same kind of filters as generated code.
    df = spark.createDataFrame(rows(msgs), SCHEMA).repartition(2).cache()
    conf = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    saved = {key: spark.conf.get(key) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    mismatches = []
    try:
        _compare(df, filters, msgs, mismatches)
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
        df.unpersist()
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[:5]}"


def _compare(df, filters: list[Expression], msgs: list[dict[str, Any]], mismatches: list) -> None:
    for start in range(0, len(filters), CHUNK):
        chunk = filters[start : start + CHUNK]
        cols = []
        for j, f in enumerate(chunk):
            cols.append(filter_column(f).alias(f"v{start + j}"))
            cols.append(matches(f).alias(f"m{start + j}"))  # compiled apart (NULL = FALSE)
        for row in df.select("id", *cols).collect():
            m = msgs[row["id"]]
            for j, f in enumerate(chunk):
                got = (row[f"v{start + j}"], row[f"m{start + j}"])
                want = filter_oracle.evaluate(f, m)
                if got != (want, want is True):
                    mismatches.append((str(f), m, got, want))


def test_oracle_matches_is_evaluate_true() -> None:
    """``FilterImpl.match`` (the filter's ``matches()``) is its ``evaluate()`` being TRUE:
    the compiler relies on it; the oracle computes them apart."""
    msgs = _messages()
    for f in _filters():
        for m in msgs:
            assert filter_oracle.matches(f, m) == (filter_oracle.evaluate(f, m) is True), (
                str(f),
                m,
            )


@pytest.mark.parametrize("seed", [SEED])
def test_generator_covers_every_construct(seed: int) -> None:
    """Guard the generator itself: every node type, every header, both kinds of values."""
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
             "NumberLiteral", "StringLiteral", "BooleanLiteral", "NullLiteral", "Identifier",
             ConvertStrings.__name__}  # fmt: skip
    assert kinds | set(HEADERS) <= seen
    types = {t for m in _messages() for t in (m.get("property_types") or {}).values()}
    assert types == {"boolean", "byte", "short", "integer", "long", "float", "double", "string"}
