"""Differential test against the real thing: compiled filters (Spark) and Apache ActiveMQ
Artemis 2.44's own filter code (``FilterImpl.createFilter(text).match(message)``, run by
``tests/artemis_filters/FilterEval.java``) must agree on every case.

The cases are random filters (``tests/filter_cases.py``) on messages whose properties are
all typed (Artemis has no untyped properties: the lenient rule is the lake's own, checked
against the Python oracle in ``test_filters_differential.py``), the hand-written typed
cases of ``test_filters.py``, and the grammar tables of ``test_filters.py`` (what the
parser accepts, Artemis accepts; what it refuses, Artemis refuses). Artemis is right:
a disagreement is a bug of the compiler (and of the oracle, which is checked here too).

Skipped when ``java``, ``javac`` or ``mvn`` is missing; the first run copies Artemis's jars
with Maven (``tests/artemis_filters``), the next ones reuse them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from routing.broker.filters import Expression, parse_filter
from routing.plan.filters import matches
from tests import filter_oracle
from tests.artemis_filters import evaluate, unavailable
from tests.filter_cases import SCHEMA, FilterGen, messages, rows
from tests.test_filters import ERRORS, GRAMMAR, TYPED_CASES

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

SEED = 20260244
N_FILTERS = 120
N_MESSAGES = 40
CHUNK = 25  # filters per Spark job


def _messages() -> list[dict[str, Any]]:
    fixed: list[dict[str, Any]] = [
        {"properties": None},
        {"properties": {"a": "7", "b": "7", "c": "7"}, "property_types": {"a": "short", "b": "integer", "c": "long"}},
        {"properties": {"a": "-0.0", "b": "0", "c": "NaN"}, "property_types": {"a": "double", "b": "integer", "c": "float"}},
        {"properties": {"a": "0.1", "b": "0.1", "c": "true"}, "property_types": {"a": "float", "b": "double", "c": "boolean"}},
        {"properties": {"a": "\U0001f600", "b": "\uffff", "c": "7"}, "property_types": {"a": "string", "b": "string", "c": "byte"}},
        {"properties": {"a": "2147483647", "b": "-128", "c": "9223372036854775807"},
         "property_types": {"a": "integer", "b": "byte", "c": "long"}, "user_id": "5", "priority": 9},
    ]  # fmt: skip
    return fixed + messages(SEED + 1, N_MESSAGES - len(fixed), typed_share=1.0)


def _filters() -> list[Expression]:
    gen = FilterGen(random.Random(SEED))
    return [parse_filter(str(gen.filter(gen.r.randint(1, 3)))) for _ in range(N_FILTERS)]


def _spark_matches(
    spark, filters: list[Expression], msgs: list[dict[str, Any]], generated: bool = True
) -> list[bool]:
    """``matches(f)`` for every (filter, message) pair, filters outer, in a few Spark jobs;
    as generated code (without whole-stage code generation, see test_filters_differential)
    or interpreted (``generated=False``, as the job's small batches)."""
    df = spark.createDataFrame(rows(msgs), SCHEMA).repartition(2).cache()
    conf = {"spark.sql.codegen.wholeStage": "false"}
    if not generated:
        conf["spark.sql.codegen.factoryMode"] = "NO_CODEGEN"
    saved = {key: spark.conf.get(key) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    got: dict[tuple[int, int], bool] = {}
    try:
        for start in range(0, len(filters), CHUNK):
            chunk = filters[start : start + CHUNK]
            cols = [matches(f).alias(f"m{start + j}") for j, f in enumerate(chunk)]
            for row in df.select("id", *cols).collect():
                for j in range(len(chunk)):
                    got[(start + j, row["id"])] = row[f"m{start + j}"]
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)
        df.unpersist()
    return [got[(i, k)] for i in range(len(filters)) for k in range(len(msgs))]


def _report(bad: list[tuple[Any, ...]], total: int) -> str:
    lines = [f"{len(bad)} of {total} cases disagree with Artemis; the first ones:"]
    for text, m, *answers in bad[:8]:
        props = {
            k: (m.get("property_types") or {}).get(k, "?") + ":" + v
            for k, v in (m.get("properties") or {}).items()
        }
        headers = {
            k: v
            for k, v in m.items()
            if k not in ("properties", "property_types") and v is not None
        }
        lines.append(f"  {text}\n      props {props} headers {headers}: {answers}")
    return "\n".join(lines)


def test_random_filters_agree_with_artemis(spark) -> None:
    filters, msgs = _filters(), _messages()
    cases = [(str(f), m) for f in filters for m in msgs]
    artemis = evaluate(cases)
    assert len(artemis) == len(cases)
    assert "invalid" not in artemis, "Artemis refused a generated filter"
    spark_says = _spark_matches(spark, filters, msgs)
    bad = [
        (text, m, "artemis", a, "spark", s)
        for (text, m), a, s in zip(cases, artemis, spark_says, strict=True)
        if (a == "true") != s
    ]
    assert not bad, _report(bad, len(cases))
    # the oracle of test_filters_differential says what Artemis says too
    oracle_bad = [
        (text, m, "artemis", a, "oracle", o)
        for (text, m), a in zip(cases, artemis, strict=True)
        if (a == "true") != (o := filter_oracle.matches(parse_filter(text), m))
    ]
    assert not oracle_bad, _report(oracle_bad, len(cases))
    # not a vacuous agreement: both outcomes are common
    assert 0.2 < artemis.count("true") / len(artemis) < 0.8


PAIR_VALUES = {
    "boolean": ["true", "false"],
    "byte": ["7", "0"],
    "short": ["7", "-3"],
    "integer": ["7", "2147483647"],
    "long": ["7", "-9223372036854775808"],
    "float": ["7", "-0.0", "NaN", "0.1"],
    "double": ["7.0", "0.0", "NaN", "0.1"],
    "string": ["7", "abc", "\uffff"],
}
PAIR_FILTERS = [
    f"{prefix}{text}"
    for prefix in ("", "convert_string_expressions:")
    for text in [*(f"a {op} b" for op in ("=", "<>", "<", "<=", ">", ">=")),
                 *(f"a {op} b = 7" for op in "+-*/%"), "-a < b", "a + b IS NULL"]
]  # fmt: skip


def test_every_pair_of_types_agrees_with_artemis(spark) -> None:
    """Two properties of every pair of types (awkward values of each), with every operator:
    the promotion matrix, its asymmetries and the arithmetic's, exhaustively."""
    values = [(t, v) for t, vs in PAIR_VALUES.items() for v in vs]
    msgs = [
        {"properties": {"a": va, "b": vb}, "property_types": {"a": ta, "b": tb}}
        for ta, va in values
        for tb, vb in values
    ]
    filters = [parse_filter(text) for text in PAIR_FILTERS]
    cases = [(str(f), m) for f in filters for m in msgs]
    artemis = evaluate(cases)
    spark_says = _spark_matches(spark, filters, msgs, generated=False)
    bad = [
        (text, m, "artemis", a, "spark", s)
        for (text, m), a, s in zip(cases, artemis, spark_says, strict=True)
        if (a == "true") != s
    ]
    assert not bad, _report(bad, len(cases))
    assert 0.1 < artemis.count("true") / len(artemis) < 0.9


def test_hand_written_typed_cases_hold_on_artemis() -> None:
    """The typed expectations of test_filters.py (TYPED_CASES) are Artemis's answers."""
    artemis = evaluate([(text, m) for text, m, _ in TYPED_CASES])
    wrong = [
        (text, m, "expected", want, "artemis", a)
        for (text, m, want), a in zip(TYPED_CASES, artemis, strict=True)
        if a != ("true" if want is True else "false")
    ]
    assert not wrong, _report(wrong, len(TYPED_CASES))


def test_the_parser_agrees_with_artemis() -> None:
    """What parse_filter accepts Artemis accepts; what it refuses Artemis refuses (but
    XPATH / XQUERY, which need the body: Artemis takes them, this job does not)."""
    accepted = [text for text, _ in GRAMMAR]
    # a blank filter is no filter to Artemis (createFilter gives null); parse_filter refuses
    # it and filter_column takes it as no filter (test_filters.test_matches_is_two_valued)
    refused = [e[0] for e in ERRORS if "XPATH" not in e[2] and e[0].strip()]
    answers = evaluate([(text, {}) for text in accepted + refused])
    wrong = [t for t, a in zip(accepted, answers, strict=False) if a == "invalid"]
    wrong += [t for t, a in zip(refused, answers[len(accepted) :], strict=True) if a != "invalid"]
    assert not wrong, f"parse_filter and Artemis disagree on {wrong}"
