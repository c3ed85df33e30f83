"""Artemis filters: grammar, parse errors, and compiled Columns (SPEC §5.1).

Column tests put input and expected in one frame and compare with
``chispa.assert_column_equality(df, "matched", "expected")``; every case is also
checked against the plain-Python oracle used by the differential test, and the typed
ones (:data:`TYPED_CASES`) against Artemis itself (``test_filters_artemis.py``).
"""

from __future__ import annotations

import json
import pickle
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from chispa import assert_column_equality
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from routing.broker.filters import (
    LONG_MIN,
    And,
    Arithmetic,
    Between,
    BooleanLiteral,
    Comparison,
    ConvertStrings,
    Expression,
    FilterSyntaxError,
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
    like_regex,
    parse_filter,
)
from routing.broker.properties import typed_value
from routing.plan.filters import filter_column, matches
from tests.filter_oracle import evaluate

EPOCH_2026 = 1767225600000  # conformance times are ms after 2026-01-01T00:00:00Z

a, b, c, x = Identifier("a"), Identifier("b"), Identifier("c"), Identifier("x")


def n(v: int | float) -> NumberLiteral:
    return NumberLiteral(v)


def s(v: str) -> StringLiteral:
    return StringLiteral(v)


# --------------------------------------------------------------------------------------
# Grammar
# --------------------------------------------------------------------------------------

GRAMMAR = [
    # comparisons and equality
    ("a = 1", Comparison("=", a, n(1))),
    ("a <> 'x'", Comparison("<>", a, s("x"))),
    ("a < 1", Comparison("<", a, n(1))),
    ("a <= 1", Comparison("<=", a, n(1))),
    ("a > 1", Comparison(">", a, n(1))),
    ("a >= 1", Comparison(">=", a, n(1))),
    ("a=1", Comparison("=", a, n(1))),
    # precedence: OR < AND < (= <> IS) < (< > LIKE IN BETWEEN) < (+ -) < (* / %) < unary
    ("a = 1 OR b = 2 AND c = 3", Or(Comparison("=", a, n(1)), And(Comparison("=", b, n(2)), Comparison("=", c, n(3))))),
    ("(a = 1 OR b = 2) AND c = 3", And(Or(Comparison("=", a, n(1)), Comparison("=", b, n(2))), Comparison("=", c, n(3)))),
    ("a = b > c", Comparison("=", a, Comparison(">", b, c))),
    ("a = 1 = TRUE", Comparison("=", Comparison("=", a, n(1)), BooleanLiteral(True))),
    ("a + b * c > 1", Comparison(">", Arithmetic("+", a, Arithmetic("*", b, c)), n(1))),
    ("a - b - c > 1", Comparison(">", Arithmetic("-", Arithmetic("-", a, b), c), n(1))),
    ("a / b % c > 1", Comparison(">", Arithmetic("%", Arithmetic("/", a, b), c), n(1))),
    ("(a + b) * c > 1", Comparison(">", Arithmetic("*", Arithmetic("+", a, b), c), n(1))),
    # NOT is unary and binds tighter than comparisons (Artemis's grammar)
    ("NOT a = b", Comparison("=", Not(a), b)),
    ("NOT (a = b)", Not(Comparison("=", a, b))),
    ("NOT NOT a", Not(Not(a))),
    ("NOT a AND b", And(Not(a), b)),
    ("-a > 1", Comparison(">", Negate(a), n(1))),
    ("+a > 1", Comparison(">", a, n(1))),
    ("a > -b * 2", Comparison(">", a, Arithmetic("*", Negate(b), n(2)))),
    # a negative literal is a negation, evaluated (as in Artemis: -2147483648 is a Long)
    ("a > - -5", Comparison(">", a, Negate(Negate(n(5))))),
    ("a > -(5)", Comparison(">", a, Negate(n(5)))),
    ("TRUE = -1", Comparison("=", BooleanLiteral(True), Negate(n(1)))),
    # integer literals
    ("a = 0", Comparison("=", a, n(0))),
    ("a = 0x1F", Comparison("=", a, n(31))),
    ("a = 0XfF", Comparison("=", a, n(255))),
    ("a = 017", Comparison("=", a, n(15))),
    ("a = 5L", Comparison("=", a, n(5))),
    ("a = 5l", Comparison("=", a, n(5))),
    ("a = 9223372036854775807", Comparison("=", a, n(2**63 - 1))),
    ("a = -9223372036854775808", Comparison("=", a, Negate(n(-LONG_MIN)))),
    ("a = 9223372036854775808", Comparison("=", a, n(2**63))),
    # decimal literals
    ("a = 1.5", Comparison("=", a, n(1.5))),
    ("a = 5.", Comparison("=", a, n(5.0))),
    ("a = .5", Comparison("=", a, n(0.5))),
    ("a = 1e3", Comparison("=", a, n(1000.0))),
    ("a = 1.5E-2", Comparison("=", a, n(0.015))),
    ("a = 2.e+2", Comparison("=", a, n(200.0))),
    ("a = 08.5", Comparison("=", a, n(8.5))),
    ("a = -1.5", Comparison("=", a, Negate(n(1.5)))),
    # strings, booleans, NULL
    ("a = 'it''s'", Comparison("=", a, s("it's"))),
    ("a = ''", Comparison("=", a, s(""))),
    ("a = 'x \"y\" -- /* z */'", Comparison("=", a, s('x "y" -- /* z */'))),
    ("a = TRUE", Comparison("=", a, BooleanLiteral(True))),
    ("a = false", Comparison("=", a, BooleanLiteral(False))),
    ("TRUE", BooleanLiteral(True)),
    ("NULL", NullLiteral()),
    ("NULL IS NULL", IsNull(NullLiteral())),
    ("'x' = TRUE", Comparison("=", s("x"), BooleanLiteral(True))),
    # keywords are case-insensitive
    ("a like 'x%' and b Is Not Null or not c", Or(And(Like(a, "x%"), IsNull(b, True)), Not(c))),
    ("a NoT bEtWeEn 1 AnD 2", Between(a, n(1), n(2), True)),
    # identifiers: letters, digits, _ and $; quoted with "..." ("" for a quote)
    ("$a_1 = 1", Comparison("=", Identifier("$a_1"), n(1))),
    ("_ = 1", Comparison("=", Identifier("_"), n(1))),
    ("notable = 1", Comparison("=", Identifier("notable"), n(1))),
    ('"odd.name" = 1', Comparison("=", Identifier("odd.name"), n(1))),
    ('"with ""quote"" and space" = 1', Comparison("=", Identifier('with "quote" and space'), n(1))),
    ('"NOT" = 1', Comparison("=", Identifier("NOT"), n(1))),
    ('"" = 1', Comparison("=", Identifier(""), n(1))),
    ("AMQPriority > 4", Comparison(">", Identifier("AMQPriority"), n(4))),
    ("a-b > 1", Comparison(">", Arithmetic("-", a, b), n(1))),
    ("hyphenated_props:a-b > 1", Comparison(">", Identifier("a-b"), n(1))),
    ("convert_string_expressions:a > 1", ConvertStrings(Comparison(">", a, n(1)))),
    ("no_convert_string_expressions:a > 1", Comparison(">", a, n(1))),
    ("convert_string_expressions:hyphenated_props:a-b > 1", ConvertStrings(Comparison(">", Identifier("a-b"), n(1)))),
    # LIKE / IN / BETWEEN / IS NULL
    ("a LIKE 'x\\_%' ESCAPE '\\'", Like(a, "x\\_%", "\\")),
    ("a NOT LIKE 'x%'", Like(a, "x%", None, True)),
    ("a IN ('red', 'green')", In(a, ("red", "green"))),
    ("a NOT IN ('red')", In(a, ("red",), True)),
    ("(a) IN ('x')", In(a, ("x",))),
    ("a BETWEEN 1 AND 2 AND b", And(Between(a, n(1), n(2)), b)),
    ("a BETWEEN b + 1 AND c * 2", Between(a, Arithmetic("+", b, n(1)), Arithmetic("*", c, n(2)))),
    ("a IS NULL", IsNull(a)),
    ("a IS NOT NULL", IsNull(a, True)),
    ("a = b IS NULL", IsNull(Comparison("=", a, b))),
    ("NOT a LIKE 'x'", Like(Not(a), "x")),
    # white space and comments
    ("\ta\n=\r1\f", Comparison("=", a, n(1))),
    ("\x01 a = 1 \x00", Comparison("=", a, n(1))),
    ("a = 1 /* c * / */ AND b", And(Comparison("=", a, n(1)), b)),
    ("-- note\na = 1", Comparison("=", a, n(1))),
    ("a = 1 -- note", Comparison("=", a, Arithmetic("-", n(1), Negate(Identifier("note"))))),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), GRAMMAR, ids=[t for t, _ in GRAMMAR])
def test_grammar(text: str, expected: Expression) -> None:
    assert parse_filter(text) == expected


@pytest.mark.parametrize(("text", "expected"), GRAMMAR, ids=[t for t, _ in GRAMMAR])
def test_rendering_parses_back(text: str, expected: Expression) -> None:
    assert parse_filter(str(expected)) == expected


ERRORS = [
    ("color = 'red' AND AND size > 1", 18, "an expression", "AND"),  # conformance 033
    ("", 0, "an expression", ""),
    ("   ", 3, "an expression", ""),
    ("a = ", 3, "an expression", ""),
    ("a = 1 AND", 9, "an expression", ""),
    ("a = 'abc", 4, "a string literal closed by '", ""),
    ('a = "b', 4, 'a quoted identifier closed by "', ""),
    ("(a = 1", 6, "')'", ""),
    ("a = 1)", 5, "an operator or end of input", ")"),
    ("a b", 2, "an operator or end of input", "b"),
    ("a == 1", 3, "an expression", "="),
    ("a != 1", 2, "an operator, literal or identifier", "!"),
    ("a = 1 --", 8, "an expression", ""),  # a line comment needs its line end
    ("a = 08", 5, "an operator or end of input", "8"),
    ("a = 0L", 5, "an operator or end of input", "L"),
    ("a = 1.2.3", 7, "an operator or end of input", ".3"),
    ("a = NULL", 4, "other than NULL", "NULL"),
    ("NULL <> a", 0, "other than NULL", "NULL"),
    ("a > 'b'", 4, "a numeric expression", "'b'"),
    ("'a' > 1", 0, "a numeric expression", "'a'"),
    ("a > TRUE", 4, "a numeric expression", "TRUE"),
    ("a < NULL", 4, "a numeric expression", "NULL"),
    ("NOT a > 1", 0, "a numeric expression", "NOT a"),
    ("(a = 1) > 2", 0, "a numeric expression", "(a = 1)"),
    ("a BETWEEN 'x' AND 2", 10, "a numeric expression", "'x'"),
    ("a BETWEEN 1 OR 2", 12, "AND", "OR"),
    ("1 IN ('a')", 0, "an identifier before IN", "1"),
    ("a + 1 IN ('a')", 0, "an identifier before IN", "a + 1"),
    ("a IN 'x'", 5, "'('", "'x'"),
    ("a IN ()", 6, "a string literal", ")"),
    ("a IN (1)", 6, "a string literal", "1"),
    ("a IN ('x' 'y')", 10, "',' or ')'", "'y'"),
    ("a LIKE b", 7, "a string literal", "b"),
    ("a LIKE 'x' ESCAPE 'ab'", 18, "a single-character ESCAPE string", "'ab'"),
    ("a LIKE 'x' ESCAPE ''", 18, "a single-character ESCAPE string", "''"),
    ("a LIKE 'x' ESCAPE '😀'", 18, "a single-character ESCAPE string", "'😀'"),  # two Java chars
    ("a LIKE 'x\x05\x05y' ESCAPE '\x05'", 7, "a LIKE pattern Java can compile", "'x\x05\x05y'"),
    ("a IS 5", 5, "NULL or NOT NULL", "5"),
    ("a IS NOT 5", 9, "NULL", "5"),
    ("5", 0, "a boolean expression", "5"),
    ("'x'", 0, "a boolean expression", "'x'"),
    ("a + 1", 0, "a boolean expression", "a + 1"),
    ("a AND 5", 6, "a boolean expression", "5"),
    ("5 OR a", 0, "a boolean expression", "5"),
    ("NOT 'x'", 4, "a boolean expression", "'x'"),
    ("TRUE = 1", 7, "a boolean literal", "1"),
    ("a = 0x8000000000000000", 4, "a hexadecimal literal that fits in a long", "0x8000000000000000"),
    ("a = 01000000000000000000000", 4, "an octal literal that fits in a long", "01000000000000000000000"),
    ("XPATH '//x'", 0, "XPATH and XQUERY filters are not supported", "XPATH"),
    ("a = xquery", 4, "XPATH and XQUERY filters are not supported", "xquery"),
    ('hyphenated_props:"a" = 1', 17, "an operator, literal or identifier", '"'),
    ("a = é", 4, "an operator, literal or identifier", "é"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "position", "expected", "found"), ERRORS, ids=[e[0] for e in ERRORS]
)
def test_syntax_errors(text: str, position: int, expected: str, found: str) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(text)
    err = info.value
    assert (err.text, err.position, err.found) == (text, position, found)
    assert expected in err.expected
    assert str(err).startswith(f"at position {position}: expected {err.expected}, found ")


def test_syntax_error_message_and_type() -> None:
    with pytest.raises(ValueError, match=r"^at position 18: expected an expression, found 'AND'$"):
        parse_filter("color = 'red' AND AND size > 1")
    with pytest.raises(FilterSyntaxError, match=r"found end of input$"):
        parse_filter("a = 1 AND")
    err = FilterSyntaxError("a b", 2, "an operator or end of input", "b")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.text, copy.position, copy.expected, copy.found, str(copy)) == (
        err.text, err.position, err.expected, err.found, str(err),
    )  # fmt: skip


def test_api_argument_checks() -> None:
    with pytest.raises(TypeError, match="text must be a str"):
        parse_filter(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="filter must be a str or an Expression"):
        filter_column(42)  # type: ignore[arg-type]
    with pytest.raises(FilterSyntaxError):
        filter_column("a = ")
    with pytest.raises(FilterSyntaxError):
        matches("a AND AND b")


def test_like_regex_is_artemis_regex() -> None:
    """LikeExpression's own regex: metacharacters and quoted characters as \\x and hex."""
    assert like_regex("a.b", None) == "(?s)\\Aa\\x2eb\\z"
    assert like_regex("x\\_%", "\\") == "(?s)\\Ax\\x5f.*?\\z"
    assert like_regex("a!b", "!") == "(?s)\\Aa\\x21b\\z"  # escape before an ordinary character
    assert like_regex("%%_", "%") == "(?s)\\A\\x25.\\z"
    assert like_regex("é€😀", None) == "(?s)\\Aé€😀\\z"  # other characters as they are
    # Java reads two hex digits after \\x: an escape character quoting itself beyond U+00FF
    assert like_regex("a€€", "€") == "(?s)\\Aa\\x20ac\\z"  # U+0020, "a", "c"


# --------------------------------------------------------------------------------------
# Columns
# --------------------------------------------------------------------------------------

SCHEMA = (
    "case int, properties map<string,string>, property_types map<string,string>, priority int, "
    "durable boolean, expiration timestamp, sent_at timestamp, user_id string, address string, "
    "expected boolean"
)


def _ts(ms: int | None) -> datetime | None:
    return None if ms is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


def _message(
    props: dict[str, str] | None = None, types: dict[str, str] | None = None, **headers: Any
) -> dict[str, Any]:
    return {"properties": {} if props is None else props, "property_types": types, **headers}


def _typed(**props: tuple[str, str]) -> dict[str, Any]:
    """A message whose properties are all typed: ``_typed(n=("short", "7"))``."""
    return _message({k: v for k, (_, v) in props.items()}, {k: t for k, (t, _) in props.items()})


def _frame(
    spark: SparkSession,
    cases: list[tuple[str, dict[str, Any], bool | None]],
    compile_: Callable[[str], Column] = filter_column,
) -> DataFrame:
    """One row per case (its message and expected result); ``matched`` evaluates its filter.

    Each distinct filter is one element of an array column and a row picks its own, so
    the whole table is one small Spark job (one CASE WHEN over many filters would not
    fit in one generated Java method).
    """
    texts = sorted({text for text, _, _ in cases})
    index = {text: i for i, text in enumerate(texts)}
    rows = [
        (index[text], m.get("properties"), m.get("property_types"), m.get("priority"),
         m.get("durable"), _ts(m.get("expiration_ms")), _ts(m.get("sent_at_ms")), m.get("user_id"),
         m.get("address"), want)
        for text, m, want in cases
    ]  # fmt: skip
    filters = F.array(*[compile_(text) for text in texts])
    matched = F.element_at(filters, F.col("case") + F.lit(1))
    return spark.createDataFrame(rows, SCHEMA).withColumn("matched", matched)


def _assert_matched(df: DataFrame) -> None:
    """``matched`` equals ``expected``, evaluated as the job's small batches are (no code
    generation, ``session.SMALL_BATCH_CONF``): quick to start, and one generated method for
    every filter of a table would pass the 64 KB a Java method may have. (The differential
    tests run generated code.)"""
    spark = df.sparkSession
    conf = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    saved = {key: spark.conf.get(key) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        assert_column_equality(df, "matched", "expected")
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


def _check(spark: SparkSession, cases: list[tuple[str, dict[str, Any], bool | None]]) -> None:
    for text, m, want in cases:  # the oracle agrees with every hand-written expectation
        assert evaluate(parse_filter(text), m) is want, (text, m)
    _assert_matched(_frame(spark, cases))


T, FALSE_, U = True, False, None
P = _message  # shorthand: P({"k": "v"}, priority=7); untyped properties

# -- untyped properties: the lake's lenient rule ----------------------------------------

NUMERIC_CASES = [
    ("price > 100", P({"price": "150"}), T),
    ("price > 100", P({"price": "99.5"}), FALSE_),
    ("price > 100", P({"price": "1e3"}), T),
    ("price > 100", P({"price": "+150"}), T),
    ("price > 100", P({"price": "abc"}), FALSE_),  # not a number against a number: FALSE
    ("price > 100", P({"price": " 150"}), FALSE_),  # no spaces in numbers
    ("price > 100", P({"price": "0x96"}), FALSE_),
    ("price > 100", P({"price": "NaN"}), FALSE_),
    ("price > 100", P({}), U),
    ("price > 100", {"properties": None}, U),
    ("NOT (price > 100)", P({"price": "abc"}), T),  # SPEC §5.1: NOT (color > 5) matches 'red'
    ("NOT (price > 100)", P({}), U),
    ("price = 99.5", P({"price": "99.5"}), T),
    ("price = 100", P({"price": "100.0"}), T),
    ("price = 100", P({"price": "0100"}), T),
    ("price <> 100", P({"price": "100"}), FALSE_),
    # long precision beyond 2^53: integers compare exactly
    ("n = 9007199254740993", P({"n": "9007199254740992"}), FALSE_),
    ("n = 9007199254740993", P({"n": "9007199254740993"}), T),
    ("n > 9007199254740992", P({"n": "9007199254740993"}), T),
    ("n < 9223372036854775807", P({"n": "9223372036854775806"}), T),
    ("n = -9223372036854775808", P({"n": "-9223372036854775808"}), T),
    # a double on either side widens the long to a double (as Java does)
    ("n = 9007199254740992.0", P({"n": "9007199254740993"}), T),
    ("n > 9223372036854775807", P({"n": "9223372036854775808"}), FALSE_),
    # arithmetic: an untyped integer is a Long, a decimal a Double (Java arithmetic)
    ("qty * price > 2000", P({"qty": "11", "price": "200"}), T),
    ("a + b = 15", P({"a": "5", "b": "10"}), T),
    ("a - 1 = 4", P({"a": "5"}), T),
    ("a / b = 0.5", P({"a": "5", "b": "10"}), T),  # division is always in doubles
    ("a % 3 = 2", P({"a": "5"}), T),
    ("a % 2 = -1.5", P({"a": "-5.5"}), T),  # Java's remainder keeps the dividend's sign
    ("-a = -5", P({"a": "5"}), T),
    ("-a < 0", P({"a": "abc"}), U),  # negating a String: null
    ("a + 1 = 2", P({"a": "true"}), FALSE_),  # a String on the left concatenates: 'true1'
    ("a + 1 = 'true1'", P({"a": "true"}), T),
    ("1 + a > 0", P({"a": "abc"}), U),  # a String on the right: Artemis throws, no match
    ("a / 0 > 1", P({"a": "5"}), T),  # 5 / 0.0 is Infinity
    ("a % 0 = 0", P({"a": "5"}), FALSE_),  # NaN
    ("a + 1 < 0", P({"a": "9223372036854775807"}), T),  # a Long wraps around, as in Java
    ("a * 2 = 18446744073709551614", P({"a": "9223372036854775807"}), T),  # -2 = -2 (see 2^64)
    ("2147483647 + 1 = -2147483648", P(), T),  # two Integer literals: int arithmetic
    ("5 = '5'", P(), FALSE_),  # an Integer and a String: mismatched types
    ("5 = 'abc'", P(), FALSE_),
    ("(a = 1) = 1", P({"a": "1"}), FALSE_),  # a boolean is never equal to a number
]

BOOLEAN_CASES = [
    ("urgent = TRUE", P({"urgent": "TRUE"}), T),
    ("urgent = TRUE", P({"urgent": "true"}), T),
    ("urgent = TRUE", P({"urgent": "True"}), T),
    ("urgent = TRUE", P({"urgent": "FALSE"}), FALSE_),
    ("urgent = TRUE", P({"urgent": "yes"}), FALSE_),
    ("urgent = TRUE", P({}), U),
    ("urgent = FALSE", P({"urgent": "yes"}), T),  # Boolean.valueOf: anything but "true" is false
    ("urgent <> TRUE", P({"urgent": "false"}), T),
    ("TRUE = urgent", P({"urgent": "true"}), T),
    ("urgent", P({"urgent": "true"}), T),  # an identifier used as a condition
    ("urgent", P({"urgent": "no"}), FALSE_),
    ("urgent", P({}), U),
    ("NOT urgent", P({}), U),
    ("NOT urgent", P({"urgent": "1"}), T),
    ("AMQPriority", P(), FALSE_),  # a number is not TRUE
    ("(a = 1) = (b = 1)", P({"a": "1", "b": "2"}), FALSE_),
    ("(a = 1) = 'true'", P({"a": "1"}), FALSE_),  # a Boolean against a String
    ("(a = 1) = (b = 1)", P(), T),  # two nulls are equal (doCreateEqual)
]

STRING_CASES = [
    ("color = 'red'", P({"color": "red"}), T),
    ("color = 'red'", P({"color": "RED"}), FALSE_),
    ("color <> 'red'", P({}), U),  # the left null: NULL
    ("'red' = color", P({}), FALSE_),  # the right null: FALSE (doCreateEqual)
    ("'red' <> color", P({}), T),
    ("code = '007'", P({"code": "7"}), FALSE_),  # a string literal compares as a string
    ("code = '7'", P({"code": "7.0"}), FALSE_),
    # two properties: numbers if both are numeric, strings if neither, else FALSE
    ("a = b", P({"a": "1.0", "b": "1"}), T),
    ("a = b", P({"a": "abc", "b": "abc"}), T),
    ("a = b", P({"a": "10", "b": "abc"}), FALSE_),
    ("a > b", P({"a": "10", "b": "9"}), T),
    ("a < b", P({"a": "abc", "b": "abd"}), T),  # lexicographic, as String.compareTo
    ("a < b", P({"a": "B", "b": "a"}), T),
    ("a <> b", P({"a": "7", "b": "7"}), FALSE_),
    ("a = b", P({"a": "x"}), FALSE_),
    ("a = b", P(), T),  # both null: equal, as in Artemis
    ("a <> b", P(), FALSE_),
]

LIKE_CASES = [
    ("s LIKE 'AB%'", P({"s": "ABC"}), T),
    ("s LIKE 'AB%'", P({"s": "XAB"}), FALSE_),
    ("s LIKE 'a.c'", P({"s": "abc"}), FALSE_),  # regex metacharacters are literal
    ("s LIKE 'a.c'", P({"s": "a.c"}), T),
    ("s LIKE '[x]%'", P({"s": "[x]yz"}), T),
    ("s LIKE '[x]%'", P({"s": "x"}), FALSE_),
    ("s LIKE '$^(?)*+|{1}'", P({"s": "$^(?)*+|{1}"}), T),
    ("s LIKE 'a\\b'", P({"s": "a\\b"}), T),
    ("s LIKE 'a_c'", P({"s": "abc"}), T),
    ("s LIKE 'a_c'", P({"s": "ac"}), FALSE_),
    ("s LIKE '%'", P({"s": ""}), T),
    ("s LIKE 'a%'", P({"s": "a\nb"}), T),  # % and _ match line ends too
    ("s LIKE 'é_'", P({"s": "éx"}), T),
    ("s LIKE 'x\\_%' ESCAPE '\\'", P({"s": "x_1"}), T),
    ("s LIKE 'x\\_%' ESCAPE '\\'", P({"s": "xy1"}), FALSE_),
    ("s LIKE 'x!%' ESCAPE '!'", P({"s": "x%"}), T),
    ("s LIKE 'x!%' ESCAPE '!'", P({"s": "xy"}), FALSE_),
    ("s LIKE 'a!!b' ESCAPE '!'", P({"s": "a!b"}), T),
    ("s LIKE 'a!b' ESCAPE '!'", P({"s": "a!b"}), T),  # escape before an ordinary char is literal
    ("s LIKE '%%%' ESCAPE '%'", P({"s": "%abc"}), T),
    ("s LIKE '%%%' ESCAPE '%'", P({"s": "abc"}), FALSE_),
    ("s LIKE 'x_%'", P({"s": "x_"}), T),
    ("s NOT LIKE 'a%'", P({"s": "abc"}), FALSE_),
    ("s NOT LIKE 'a%'", P({}), U),
    ("s LIKE '5'", P({"s": "5"}), T),  # an untyped value is a String to LIKE
    ("AMQPriority LIKE '4'", P(), FALSE_),  # LIKE on a number: false
    ("NOT a LIKE 'x'", P({"a": "x"}), FALSE_),  # (NOT a) LIKE 'x': a boolean is not a string
]

IN_BETWEEN_NULL_CASES = [
    ("color IN ('red', 'green')", P({"color": "green"}), T),
    ("color IN ('red', 'green')", P({"color": "blue"}), FALSE_),
    ("color IN ('red', 'green')", P({}), U),
    ("color NOT IN ('red', 'green')", P({"color": "blue"}), T),
    ("color NOT IN ('red')", P({}), U),
    ("n IN ('5')", P({"n": "5.0"}), FALSE_),  # IN compares strings
    ("AMQPriority IN ('4')", P(), U),  # IN on a number: unknown
    ("AMQDurable IN ('DURABLE')", P(), T),
    ("q BETWEEN 5 AND 10", P({"q": "5"}), T),
    ("q BETWEEN 5 AND 10", P({"q": "10"}), T),
    ("q BETWEEN 5 AND 10", P({"q": "10.5"}), FALSE_),
    ("q BETWEEN 5 AND 10", P({"q": "abc"}), FALSE_),
    ("q BETWEEN 5 AND 10", P({}), U),
    ("q NOT BETWEEN 5 AND 10", P({"q": "4"}), T),
    ("q NOT BETWEEN 5 AND 10", P({"q": "7"}), FALSE_),
    ("q NOT BETWEEN 5 AND 10", P({"q": "abc"}), FALSE_),
    ("q NOT BETWEEN 5 AND 10", P({}), U),
    ("q BETWEEN lo AND hi", P({"q": "5", "lo": "1"}), U),
    ("q NOT BETWEEN lo AND hi", P({"q": "0", "lo": "1"}), T),  # TRUE OR unknown
    ("c IS NULL", P({}), T),
    ("c IS NULL", {"properties": None}, T),
    ("c IS NULL", P({"c": ""}), FALSE_),
    ("c IS NOT NULL", P({"c": "x"}), T),
    ("(a = 1) IS NULL", P({}), T),
    ("NULL", P(), U),
    ("NULL IS NULL", P(), T),
    ("NOT NULL", P(), U),
    ("NULL OR TRUE", P(), T),
    ("NULL AND FALSE", P(), FALSE_),
    ("NULL AND TRUE", P(), U),
]

HEADER_CASES = [
    ("AMQPriority = 4", P(), T),  # null priority means 4
    ("AMQPriority > 4", P(priority=7), T),
    ("AMQPriority = 0", P(priority=0), T),
    ("AMQExpiration = 0", P(), T),  # null expiration: never, 0
    ("AMQExpiration = 1767229200000", P(expiration_ms=1767229200000), T),
    ("AMQExpiration > 0", P(expiration_ms=1), T),
    ("AMQTimestamp = 1767225600123", P(sent_at_ms=1767225600123), T),
    ("AMQTimestamp IS NULL", P(), T),
    ("AMQDurable = 'DURABLE'", P(), T),  # null durable means durable
    ("AMQDurable = 'DURABLE'", P(durable=True), T),
    ("AMQDurable = 'NON_DURABLE'", P(durable=False), T),
    ("AMQUserID = 'alice'", P(user_id="alice"), T),
    ("AMQUserID = 'alice'", P(), U),
    ("AMQUserID = 'bob'", P({"AMQUserID": "bob"}), T),  # a null header falls back to the property
    ("AMQAddress = 'orders'", P(address="orders"), T),
    ("AMQAddress LIKE 'ord%'", P(address="orders"), T),
    ("amqpriority = 1", P({"amqpriority": "1"}), T),  # header names are case-sensitive
    ("priority = 1", P({"priority": "1"}, priority=9), T),  # a property, never a column
    ("AMQSize = 5", P({"AMQSize": "5"}), T),  # other identifiers are properties
]

NAME_CASES = [
    ("\"a.b\" = 'x'", P({"a.b": "x"}), T),
    ('"it\'s" = 1', P({"it's": "1"}), T),
    ('"back`tick" = 1', P({"back`tick": "1"}), T),
    ('"with space" = 1', P({"with space": "1"}), T),
    ('"x\') OR (1=1" = 1', P({}), U),  # a name is only ever a map key
    ('"properties" = 1', P({"properties": "1"}), T),
    ("$a = 1", P({"$a": "1"}), T),
]

# -- typed properties: exactly as Artemis 2.44 (test_filters_artemis.py checks these on it) --

SHORT7, INT7, LONG7, DOUBLE7 = ("short", "7"), ("integer", "7"), ("long", "7"), ("double", "7.0")
BYTE7 = ("byte", "7")

TYPED_COMPARISON_CASES = [
    # ComparisonExpression.compare's promotions, asymmetries included
    ("s = i", _typed(s=SHORT7, i=INT7), T),  # Short vs Integer promotes
    ("i = s", _typed(s=SHORT7, i=INT7), FALSE_),  # Integer vs Short: FALSE
    ("l = s", _typed(s=SHORT7, l=LONG7), FALSE_),  # Long vs Short / Byte: FALSE
    ("l = y", _typed(y=BYTE7, l=LONG7), FALSE_),
    ("y = l", _typed(y=BYTE7, l=LONG7), T),
    ("y = s", _typed(y=BYTE7, s=SHORT7), T),
    ("s = y", _typed(y=BYTE7, s=SHORT7), FALSE_),
    ("i = l", _typed(i=INT7, l=LONG7), T),
    ("l = i", _typed(i=INT7, l=LONG7), T),
    ("d = s", _typed(d=DOUBLE7, s=SHORT7), FALSE_),  # Double never promotes a Short
    ("s = d", _typed(d=DOUBLE7, s=SHORT7), T),
    ("d = l", _typed(d=DOUBLE7, l=LONG7), T),
    ("i = 7", _typed(i=INT7), T),
    ("s = 7", _typed(s=SHORT7), T),  # Short vs Integer literal
    ("7 = s", _typed(s=SHORT7), FALSE_),  # Integer literal vs Short
    ("s > 5", _typed(s=SHORT7), T),
    ("5 < s", _typed(s=SHORT7), FALSE_),
    ("AMQPriority = s", _typed(s=("short", "4")), FALSE_),  # AMQPriority is an Integer
    ("s = AMQPriority", _typed(s=("short", "4")), T),
    # floats: the float nearest the text; compared as floats against Integer / Long
    ("f = 0.1", _typed(f=("float", "0.1")), FALSE_),  # Float widened: 0.100000001...
    ("d = 0.1", _typed(d=("double", "0.1")), T),
    ("d = f", _typed(d=("double", "0.1"), f=("float", "0.1")), FALSE_),
    ("f = 16777217", _typed(f=("float", "16777216")), T),  # the literal as a float
    ("f = i", _typed(f=("float", "16777216"), i=("integer", "16777217")), T),
    ("l = f", _typed(f=("float", "16777216"), l=("long", "16777217")), T),  # Long as a float
    ("d = l", _typed(d=("double", "16777216"), l=("long", "16777217")), FALSE_),
    ("f > 2.4", _typed(f=("float", "2.5")), T),
    # -0.0 is below 0.0 (Double.compareTo); NaN equals NaN and is above everything
    ("d = 0", _typed(d=("double", "-0.0")), FALSE_),
    ("d < 0", _typed(d=("double", "-0.0")), T),
    ("d = -0.0", _typed(d=("double", "-0.0")), T),
    ("d = f", _typed(d=("double", "-0.0"), f=("float", "0.0")), FALSE_),
    ("i = 0", _typed(i=("integer", "-0")), T),
    ("d = d", _typed(d=("double", "NaN")), T),
    ("d > 1e308", _typed(d=("double", "NaN")), T),
    ("f > d", _typed(f=("float", "NaN"), d=("double", "Infinity")), T),
    # integer literals: Integer, Long, BigDecimal (whose low 64 bits in an int make an Integer)
    ("l = 9223372036854775808", _typed(l=("long", "-9223372036854775808")), FALSE_),
    ("l = -9223372036854775808", _typed(l=("long", "-9223372036854775808")), T),
    ("i = 4294967296", _typed(i=("integer", "0")), FALSE_),
    ("i = 18446744073709551616", _typed(i=("integer", "0")), T),
    ("i = 18446744073709551615", _typed(i=("integer", "-1")), T),
    ("i = 0x7FFFFFFF", _typed(i=("integer", "2147483647")), T),
    # booleans: only a Boolean equals a Boolean; false < true between properties
    ("flag = TRUE", _typed(flag=("boolean", "TRUE")), T),
    ("flag = TRUE", _typed(flag=("string", "true")), FALSE_),
    ("flag = 1", _typed(flag=("boolean", "true")), FALSE_),
    ("flag", _typed(flag=("boolean", "true")), T),
    ("flag", _typed(flag=("string", "true")), FALSE_),  # a cast: a String is not TRUE
    ("flag", _typed(flag=("integer", "1")), FALSE_),
    ("NOT flag", _typed(flag=("string", "true")), T),
    ("a < b", _typed(a=("boolean", "false"), b=("boolean", "true")), T),
    # strings: String.compareTo, UTF-16 code units (a supplementary character sorts below U+FFFF)
    ("a < b", _typed(a=("string", "\U0001f600"), b=("string", "\uffff")), T),
    ("a > b", _typed(a=("string", "10"), b=("string", "9")), FALSE_),
    ("n = 7", _typed(n=("string", "7")), FALSE_),  # a String against a number: FALSE
    ("NOT (n > 5)", _typed(n=("string", "7")), T),
    ("n = '7'", _typed(n=("string", "7")), T),
    ("n = '7'", _typed(n=("integer", "7")), FALSE_),
    ("n <> '7'", _typed(n=("integer", "7")), T),
    # a null on one side of =: NULL when it is the left, FALSE when it is the right
    ("x = n", _typed(n=INT7), U),
    ("n = x", _typed(n=INT7), FALSE_),
    ("NOT (n = x)", _typed(n=INT7), T),
    ("x = y", _typed(), T),
    # LIKE on a non-String is FALSE, IN on a non-String unknown
    ("n LIKE '7'", _typed(n=INT7), FALSE_),
    ("n NOT LIKE '7'", _typed(n=INT7), T),
    ("n IN ('7')", _typed(n=INT7), U),
    ("n NOT IN ('7')", _typed(n=INT7), U),
    ("n IN ('7')", _typed(n=("string", "7")), T),
    ("s LIKE 'a€€b' ESCAPE '€'", _typed(s=("string", "a€b")), FALSE_),  # like_regex
    ("s LIKE 'a€€' ESCAPE '€'", _typed(s=("string", "a ac")), T),
    ("s LIKE 'x\x05\x05a' ESCAPE '\x05'", _typed(s=("string", "xZ")), T),  # \x5a
    ("n BETWEEN 5 AND 10", _typed(n=("string", "7")), FALSE_),
    ("NOT (n BETWEEN 5 AND 10)", _typed(n=("string", "7")), T),
    ("n NOT BETWEEN 5 AND 10", _typed(n=("string", "7")), FALSE_),
]

TYPED_ARITHMETIC_CASES = [
    # int arithmetic wraps at 32 bits, long at 64; a Long operand makes it long
    ("i + 2147483647 < 0", _typed(i=("integer", "1")), T),
    ("s * 32767 * 32767 * 3 < 0", _typed(s=("short", "32767")), T),
    ("l + 2147483647 > 0", _typed(l=("long", "1")), T),
    ("l + 9223372036854775807 < 0", _typed(l=("long", "1")), T),
    ("2147483648 - 1 = 2147483647", _typed(), T),
    ("y + y = 14", _typed(y=BYTE7), T),
    ("f + 0 = 2.5", _typed(f=("float", "2.5")), T),  # a Float operand: double arithmetic
    ("i / 2 = 3.5", _typed(i=INT7), T),  # / and % always in doubles
    ("i / 0 > 1000", _typed(i=INT7), T),  # Infinity
    ("-i / 0 < 0", _typed(i=INT7), T),
    ("i % 0 = i % 0", _typed(i=INT7), T),  # NaN = NaN (Double.equals)
    ("d / 0 = 1", _typed(d=("double", "0")), FALSE_),  # NaN
    ("i / -0.0 < 0", _typed(i=INT7), T),  # -Infinity
    # + with a String on the left concatenates Java's toString of the right
    ("'a' + 7 = 'a7'", _typed(), T),
    ("'a' + 7.0 = 'a7.0'", _typed(), T),
    ("'a' + TRUE = 'atrue'", _typed(), T),
    ("'a' + d = 'a1.0E20'", _typed(d=("double", "1e20")), T),
    ("'a' + f = 'a0.1'", _typed(f=("float", "0.1")), T),
    ("n + 'x' = '7x'", _typed(n=("string", "7")), T),
    ("'x' + l = 'x7'", _typed(l=("long", "+007")), T),
    # any other non-number operand throws: the filter does not match, NOT or no NOT
    ("1 + 'x' > 0", _typed(), U),
    ("NOT (1 + 'x' > 0)", _typed(), U),
    ("n - 1 > 0", _typed(n=("string", "7")), U),
    ("flag * 1 = 1", _typed(flag=("boolean", "true")), U),
    ("(n - 1 > 0) IS NULL", _typed(n=("string", "7")), U),
    # negating a Short or a Byte throws; a non-number: null
    ("-s < 0", _typed(s=SHORT7), U),
    ("NOT (-s < 0)", _typed(s=SHORT7), U),
    ("-y IS NULL", _typed(y=BYTE7), U),
    ("-n IS NULL", _typed(n=("string", "7")), T),
    ("-i = -7", _typed(i=INT7), T),
    ("-l < 0", _typed(l=LONG7), T),
    ("-i > 0", _typed(i=("integer", "-2147483648")), FALSE_),  # -MIN_VALUE is MIN_VALUE
    # Artemis's evaluation order decides whether a throwing operand is reached
    ("a = 1 OR b - 1 > 0", _typed(a=("integer", "1"), b=("string", "x")), T),
    ("a = 1 OR b - 1 > 0", _typed(a=("integer", "2"), b=("string", "x")), U),
    ("b - 1 > 0 OR a = 1", _typed(a=("integer", "1"), b=("string", "x")), U),
    ("NOT (a = 2 AND b - 1 > 0)", _typed(a=("integer", "1"), b=("string", "x")), T),
    ("NOT (a = 2 AND b - 1 > 0)", _typed(a=("integer", "2"), b=("string", "x")), U),
    ("(x > b - 1) IS NULL", _typed(b=("string", "x")), T),  # x null: b - 1 not evaluated
    ("(a > b - 1) IS NULL", _typed(a=INT7, b=("string", "x")), U),
    ("(x = b - 1) IS NULL", _typed(b=("string", "x")), U),  # = evaluates both sides
    ("(x + (b - 1)) IS NULL", _typed(b=("string", "x")), T),
]

HUGE = "convert_string_expressions:(a - b) * (c - d) > e"  # 5 * 7.5 > e: Double vs Short is FALSE
INT2 = ("integer", "2")

CONVERT_CASES = [
    # convert_string_expressions: a String against a number or boolean is converted
    ("convert_string_expressions:n = 7", _typed(n=("string", "7")), T),
    ("n = 7", _typed(n=("string", "7")), FALSE_),
    ("convert_string_expressions:7 = n", _typed(n=("string", "7")), T),
    (
        "convert_string_expressions:n > 5",
        _typed(n=("string", "abc")),
        FALSE_,
    ),  # NumberFormatException
    ("convert_string_expressions:NOT (n > 5)", _typed(n=("string", "abc")), T),
    ("convert_string_expressions:y = ' 5'", _typed(y=("byte", "5")), FALSE_),  # Byte.valueOf
    ("convert_string_expressions:y = '300'", _typed(y=("byte", "44")), FALSE_),
    ("convert_string_expressions:d = ' 5'", _typed(d=("double", "5")), T),  # Double.valueOf trims
    ("convert_string_expressions:d = '5d'", _typed(d=("double", "5")), T),
    ("convert_string_expressions:f = '0.1'", _typed(f=("float", "0.1")), T),
    ("convert_string_expressions:flag = 'TRUE'", _typed(flag=("boolean", "true")), T),
    ("convert_string_expressions:'yes' = flag", _typed(flag=("boolean", "false")), T),
    ("convert_string_expressions:n = TRUE", _typed(n=("string", "True")), T),
    ("convert_string_expressions:l = '7.0'", _typed(l=LONG7), FALSE_),  # Long.valueOf('7.0') fails
    # arithmetic: a String with a point is a Double, else a Long; else it throws
    ("convert_string_expressions:n - 1 = 6", _typed(n=("string", "7")), T),
    ("convert_string_expressions:n * 2 = 3.0", _typed(n=("string", "1.5")), T),
    ("convert_string_expressions:n - 1 > 0", _typed(n=("string", "1e3")), U),
    ("convert_string_expressions:n + 1 = '71'", _typed(n=("string", "7")), T),  # concatenates
    # deep arithmetic over several properties: a large filter, interpreted (test below)
    (
        HUGE,
        _typed(a=("string", "7"), b=INT2, c=("long", "9"), d=("double", "1.5"), e=("short", "30")),
        FALSE_,
    ),
    (
        HUGE,
        _typed(
            a=("string", "7"), b=INT2, c=("long", "9"), d=("double", "1.5"), e=("integer", "30")
        ),
        T,
    ),
    (
        HUGE,
        {
            **_typed(b=INT2, c=("long", "9"), e=("integer", "30")),
            "properties": {"a": "7", "b": "2", "c": "9", "d": "1.5", "e": "30"},
        },
        T,
    ),
    (HUGE, {**_typed(b=INT2), "properties": {"a": "x", "b": "2"}}, U),  # 'x' - 2 throws
    ("convert_string_expressions:n = 7", P({"n": "7.0"}), T),  # untyped: the lenient rule first
]

TYPED_CASES = TYPED_COMPARISON_CASES + TYPED_ARITHMETIC_CASES + CONVERT_CASES[:-3]
"""The hand-written typed cases; ``test_filters_artemis.py`` checks them against Artemis."""


@pytest.mark.parametrize(
    "cases",
    [
        NUMERIC_CASES,
        BOOLEAN_CASES,
        STRING_CASES,
        LIKE_CASES,
        IN_BETWEEN_NULL_CASES,
        HEADER_CASES,
        NAME_CASES,
        TYPED_COMPARISON_CASES,
        TYPED_ARITHMETIC_CASES,
        CONVERT_CASES,
    ],
    ids=["numeric", "boolean", "string", "like", "in-between-null", "headers", "names",
         "typed-comparisons", "typed-arithmetic", "convert"],
)  # fmt: skip
def test_filter_columns(
    spark: SparkSession, cases: list[tuple[str, dict[str, Any], bool | None]]
) -> None:
    _check(spark, cases)


def test_three_valued_truth_tables(spark: SparkSession) -> None:
    """AND / OR / NOT over TRUE (x = 1), FALSE (x = 0) and UNKNOWN (x missing)."""
    values = {True: "1", False: "0", None: None}

    def props(p: bool | None, q: bool | None) -> dict[str, str]:
        out = {}
        if values[p] is not None:
            out["p"] = values[p]
        if values[q] is not None:
            out["q"] = values[q]
        return out

    def kleene_and(p: bool | None, q: bool | None) -> bool | None:
        if p is False or q is False:
            return False
        return None if p is None or q is None else True

    def kleene_or(p: bool | None, q: bool | None) -> bool | None:
        if p is True or q is True:
            return True
        return None if p is None or q is None else False

    cases = []
    for p in (True, False, None):
        cases.append(("NOT (p = 1)", P(props(p, None)), None if p is None else not p))
        for q in (True, False, None):
            cases.append(("p = 1 AND q = 1", P(props(p, q)), kleene_and(p, q)))
            cases.append(("p = 1 OR q = 1", P(props(p, q)), kleene_or(p, q)))
    _check(spark, cases)


def test_matches_is_two_valued(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [
            ({"a": "1"}, None, True, True),
            ({"a": "2"}, None, False, True),
            ({}, None, False, True),
            (None, None, False, True),
            ({"a": "x", "b": "1"}, {"a": "string", "b": "integer"}, False, True),  # throws
            ({"a": "1"}, {"a": "short"}, True, True),
        ],
        "properties map<string,string>, property_types map<string,string>, expected boolean, "
        "everything boolean",
    )
    out = df.select(
        "expected",
        "everything",
        matches("a = 1").alias("matched"),
        matches("a - 1 = 0 OR b = 1").alias("threw"),
        matches(None).alias("none"),
        matches("").alias("blank"),
        filter_column("  ").alias("blank_column"),
        matches(parse_filter("a = 1")).alias("from_ast"),
    )
    assert_column_equality(out, "matched", "expected")
    assert_column_equality(out, "from_ast", "expected")
    assert_column_equality(out, "threw", "expected")  # a - 1 throws for the string 'x'
    for name in ("none", "blank", "blank_column"):
        assert_column_equality(out, name, "everything")
    # three-valued: FALSE OR NULL is NULL, and a thrown evaluation is NULL too
    three_valued = df.select(filter_column("a - 1 = 0 OR b = 1").alias("v")).collect()
    assert [r.v for r in three_valued] == [True, None, None, None, None, True]


def test_a_filter_reads_only_the_columns_it_names(spark: SparkSession) -> None:
    """A property filter needs ``properties`` and ``property_types``, nothing else."""
    df = spark.createDataFrame(
        [({"kind": "bad"}, None, "q1", True), ({"kind": "good"}, {"kind": "string"}, "q1", False)],
        "properties map<string,string>, property_types map<string,string>, queue string, "
        "expected boolean",
    )
    assert_column_equality(df.withColumn("matched", matches("kind = 'bad'")), "matched", "expected")


# --------------------------------------------------------------------------------------
# The size of what common filters compile to (they run on every row, for every queue)
# --------------------------------------------------------------------------------------

COMMON_SHAPES = [
    ("prop = 'x'", 1),
    ("prop <> 'x'", 1),
    ("prop IN ('a', 'b', 'c')", 1),
    ("prop LIKE 'ord%'", 1),
    ("prop > 100", 5),
    ("prop BETWEEN 10 AND 20", 5),
    ("flag = TRUE", 3),
    ("flag", 3),
    ("prop = 'x' AND other > 100", 6),
    ("AMQPriority > 4", 1),
    ("prop IS NULL", 1),
]


def _branches(column: Column) -> int:
    """WHEN branches in a compiled filter, plus one for a filter that has none."""
    return max(1, column._jc.toString().count(" WHEN "))


@pytest.mark.parametrize(("text", "most"), COMMON_SHAPES, ids=[t for t, _ in COMMON_SHAPES])
def test_common_shapes_compile_small(text: str, most: int) -> None:
    """A few CASE branches on the property's type, not a matrix; a string equality, IN or a
    LIKE whose pattern no typed number or boolean matches is the plain string test."""
    compiled = matches(text)
    assert _branches(compiled) <= most, compiled._jc.toString()
    assert "transform" not in compiled._jc.toString()  # no let (a struct per row)
    assert " WHEN " not in str(matches("prop = 'x'")._jc.toString())


def test_a_huge_filter_is_interpreted() -> None:
    """Arithmetic over several properties compiles to many nodes: its sub-results are
    computed once a row (a struct in a ``transform``), and the whole is interpreted inside
    generated code; ``CONVERT_CASES`` checks its results."""
    compiled = matches(HUGE)._jc.toString()
    assert compiled.startswith("element_at(transform(array(true)")  # interpreted as a whole
    assert compiled.count("transform(") >= 3  # (a - b), (c - d) and the product, each once
    assert "transform" not in matches("a - 1 > 0")._jc.toString()


# --------------------------------------------------------------------------------------
# Conformance scenarios 003, 004 and 038: every queue filter against every message
# --------------------------------------------------------------------------------------


def _queue_filters(broker_xml: str) -> dict[str, str | None]:
    ns = {"c": "urn:activemq:core"}
    root = ET.fromstring(broker_xml)
    out: dict[str, str | None] = {}
    for queue in root.iterfind(".//c:addresses/c:address//c:queue", ns):
        flt = queue.find("c:filter", ns)
        out[queue.attrib["name"]] = None if flt is None else flt.attrib["string"]
    return out


def _scenario_messages(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    msgs = []
    for step in steps:
        if "send" not in step:
            continue
        send = step["send"]
        for m in send["messages"]:
            exp = m.get("expiration")
            props: dict[str, str] = {}
            types: dict[str, str] = {}
            for name, value in m.get("properties", {}).items():
                text, type_ = typed_value(value)
                props[name] = text
                if type_ is not None:
                    types[name] = type_
            msgs.append(
                {
                    "tag": m["tag"],
                    "address": m.get("address", send["address"]),
                    "properties": {**props, "tag": m["tag"]},
                    "property_types": types,
                    "priority": m.get("priority"),
                    "durable": m.get("durable"),
                    "user_id": m.get("user_id"),
                    "sent_at_ms": EPOCH_2026 + m.get("at", send.get("at", 0)),
                    "expiration_ms": None if exp is None else EPOCH_2026 + exp,
                }
            )
    return msgs


@pytest.mark.parametrize(
    "scenario",
    [
        "003-filter-expressions.json",
        "004-filter-header-fields.json",
        "038-filter-typed-properties.json",
    ],
)
def test_conformance_queue_filters(spark: SparkSession, shared_dir, scenario: str) -> None:
    spec = json.loads((shared_dir / "conformance" / scenario).read_text())
    filters = _queue_filters(spec["broker_xml"])
    msgs = _scenario_messages(spec["steps"])
    address_of = {}
    for address in ET.fromstring(spec["broker_xml"]).iterfind(
        ".//{urn:activemq:core}addresses/{urn:activemq:core}address"
    ):
        for queue in address.iterfind(".//{urn:activemq:core}queue"):
            address_of[queue.attrib["name"]] = address.attrib["name"]
    expected = {
        e["expect"]["queue"]: set(e["expect"]["tags"])
        for e in spec["steps"]
        if "expect" in e and "tags" in e["expect"]
    }
    assert set(expected) <= set(filters) and msgs
    cases = [
        (filters[q] or "", m, m["tag"] in tags)
        for q, tags in sorted(expected.items())
        for m in msgs
        if m["address"] == address_of.get(q, m["address"])  # a divert's copies aside
    ]
    for text, m, want in cases:  # the oracle agrees too
        assert text == "" or (evaluate(parse_filter(text), m) is True) is want, (text, m["tag"])
    _assert_matched(_frame(spark, cases, lambda text: matches(text or None)))


def test_conformance_unparseable_filter(shared_dir) -> None:
    spec = json.loads(
        (shared_dir / "conformance" / "033-invalid-config-unparseable-filter.json").read_text()
    )
    flt = ET.fromstring(spec["broker_xml"]).find(
        ".//{urn:activemq:core}divert/{urn:activemq:core}filter"
    )
    assert flt is not None
    with pytest.raises(
        FilterSyntaxError, match="at position 18: expected an expression, found 'AND'"
    ):
        parse_filter(flt.attrib["string"])


@pytest.mark.parametrize(
    "text",
    ["_AMQ_ORIG_QUEUE = 'queue1'", "kind = 'bad'", "_AMQ_ORIG_ADDRESS='orders'"],
)
def test_other_conformance_filters_parse(text: str) -> None:
    """Filters used by scenarios 018, 020 and 026 parse to property comparisons."""
    e = parse_filter(text)
    assert (
        isinstance(e, Comparison)
        and isinstance(e.left, Identifier)
        and isinstance(e.right, StringLiteral)
    )
