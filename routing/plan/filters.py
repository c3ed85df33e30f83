"""Artemis filters (SPEC §5.1) compiled to Spark Columns.

The grammar, its AST and the evaluation rules where SPEC is silent are in
:mod:`routing.broker.filters`; this module turns a parsed filter into a three-valued
boolean Column. Compiled Columns use ``pyspark.sql.functions`` only; user text never
reaches SQL text, property names are literal map keys.

.. note:: Evolving
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from routing.broker.filters import (
    LONG_MAX,
    LONG_MIN,
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
    like_regex,
    parse_filter,
)

__all__ = ["filter_column", "matches"]


# --------------------------------------------------------------------------------------
# Compilation to Columns
# --------------------------------------------------------------------------------------

# A property string is numeric when it is an integer (a long if it fits) or a decimal
# with an optional exponent; no spaces, no NaN/Infinity, no Java suffixes (1d, 1f, 0x10).
_NUM_PATTERN = r"\A[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\z"
_INT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_NUM_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


def _null(type_: str) -> Column:
    return F.lit(None).cast(type_)


@dataclass(frozen=True)
class _Num:
    """A number. ``dbl`` is its double value (null: NULL / unknown); ``lng`` its exact long
    value when it is an integer (null otherwise; None: never an integer). ``int_only``: ``lng``
    is set whenever ``dbl`` is (literals and numeric headers)."""

    dbl: Column
    lng: Column | None = None
    int_only: bool = False


@dataclass(frozen=True)
class _Str:
    """A string: a property, a string header or a string literal (``literal`` holds its value)."""

    s: Column
    literal: str | None = None


@dataclass(frozen=True)
class _Bool:
    """A three-valued boolean."""

    b: Column


_Val = _Num | _Str | _Bool


def _num_const(v: int | float) -> _Num:
    if isinstance(v, int) and LONG_MIN <= v <= LONG_MAX:
        return _Num(F.lit(float(v)), F.lit(v).cast("bigint"), True)
    return _Num(F.lit(float(v)))


def _string_number(s: Column) -> _Num:
    """Numeric view of a string Column: one regex decides, Spark's casts convert."""
    numeric = s.rlike(_NUM_PATTERN)
    # a regex-checked string has no spaces, so the bigint cast succeeds exactly for integers
    return _Num(F.when(numeric, s.try_cast("double")), F.when(numeric, s.try_cast("bigint")))


def _bool_view(v: _Val) -> Column:
    """Boolean.valueOf for strings (only "true", any case, is TRUE); a number is never TRUE."""
    if isinstance(v, _Bool):
        return v.b
    if isinstance(v, _Str):
        return F.lower(v.s) == F.lit("true")
    return F.when(v.dbl.isNotNull(), F.lit(False))


def _is_null(v: _Val) -> Column:
    if isinstance(v, _Num):
        return v.dbl.isNull()
    if isinstance(v, _Str):
        return v.s.isNull()
    return v.b.isNull()


_CMP: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _num_compare(op: str, a: _Num, b: _Num) -> Column:
    """Exact long comparison when both are integers, else doubles (Java's widening).

    ``coalesce`` picks the long comparison exactly when both long values are set.
    """
    cmp = _CMP[op]
    if a.int_only and b.int_only and a.lng is not None and b.lng is not None:
        return cmp(a.lng, b.lng)  # integers only: both longs are set
    if a.lng is None or b.lng is None:
        return cmp(a.dbl, b.dbl)
    return F.coalesce(cmp(a.lng, b.lng), cmp(a.dbl, b.dbl))


_LONG_OPS: dict[str, Callable[[Column, Column], Column]] = {
    "+": F.try_add,
    "-": F.try_subtract,
    "*": F.try_multiply,
}
_DOUBLE_OPS: dict[str, Callable[[Column, Column], Column]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": F.try_divide,  # always double, as Artemis; x / 0 is unknown
    "%": F.try_mod,
}


def _arith(op: str, a: _Num, b: _Num) -> _Num:
    """Exact long arithmetic when both are integers; on overflow, or with a double, double
    arithmetic (Artemis wraps a long around instead); ``/`` and ``%`` always double."""
    dop = _DOUBLE_OPS[op]
    if op in ("/", "%") or a.lng is None or b.lng is None:
        return _Num(dop(a.dbl, b.dbl))
    lng = _LONG_OPS[op](a.lng, b.lng)
    return _Num(F.coalesce(lng.cast("double"), dop(a.dbl, b.dbl)), lng)


def _property(name: str) -> Column:
    """``properties[name]`` with a literal key: safe for any name (quotes, dots, spaces)."""
    return F.try_element_at(F.col("properties"), F.lit(name))


def _header(name: str) -> _Val | None:
    """Header fields of FilterImpl, with the SPEC §3.1 defaults; None for a property."""
    if name == "AMQPriority":
        lng = F.coalesce(F.col("priority").cast("bigint"), F.lit(4).cast("bigint"))
        return _Num(lng.cast("double"), lng, True)
    if name == "AMQExpiration":
        exp = F.col("expiration")
        lng = F.when(exp.isNull(), F.lit(0).cast("bigint")).otherwise(F.unix_millis(exp))
        return _Num(lng.cast("double"), lng, True)
    if name == "AMQTimestamp":
        lng = F.unix_millis(F.col("sent_at"))
        return _Num(lng.cast("double"), lng, True)
    if name == "AMQDurable":
        durable = F.when(F.col("durable") == F.lit(False), F.lit("NON_DURABLE"))
        return _Str(durable.otherwise(F.lit("DURABLE")))
    if name == "AMQUserID":  # a null header falls back to the property of that name, as in Artemis
        return _Str(F.coalesce(F.col("user_id"), _property(name)))
    if name == "AMQAddress":
        return _Str(F.coalesce(F.col("address"), _property(name)))
    return None


class _Compiler:
    """AST -> typed Column values; one instance per compiled filter (it memoises identifiers)."""

    _VALUE_NODES: ClassVar[tuple[type, ...]] = (
        StringLiteral,
        NumberLiteral,
        Identifier,
        Negate,
        Arithmetic,
    )

    def __init__(self) -> None:
        self._idents: dict[str, _Val] = {}
        self._numbers: dict[str, _Num] = {}

    def identifier(self, name: str) -> _Val:
        if name not in self._idents:
            self._idents[name] = _header(name) or _Str(_property(name))
        return self._idents[name]

    def number(self, e: Expression, v: _Val) -> _Num:
        """The value as a number: numeric strings convert, anything else is unknown."""
        if isinstance(v, _Num):
            return v
        if isinstance(v, _Str):
            if v.literal is not None:
                text = v.literal
                if _INT_RE.fullmatch(text) and LONG_MIN <= int(text) <= LONG_MAX:
                    return _num_const(int(text))
                if _NUM_RE.fullmatch(text):
                    return _num_const(float(text))
                return _Num(_null("double"))
            if isinstance(e, Identifier):
                if e.name not in self._numbers:
                    self._numbers[e.name] = _string_number(v.s)
                return self._numbers[e.name]
            return _string_number(v.s)
        return _Num(_null("double"))  # a boolean is not a number

    def numeric(self, e: Expression) -> _Num:
        return self.number(e, self.value(e))

    def value(self, e: Expression) -> _Val:
        if isinstance(e, StringLiteral):
            return _Str(F.lit(e.value), e.value)
        if isinstance(e, NumberLiteral):
            return _num_const(e.value)
        if isinstance(e, Identifier):
            return self.identifier(e.name)
        if isinstance(e, Negate):
            v = self.numeric(e.operand)
            if v.lng is None:
                return _Num(-v.dbl)
            lng = F.try_subtract(F.lit(0).cast("bigint"), v.lng)  # -Long.MIN_VALUE overflows
            return _Num(F.coalesce(lng.cast("double"), -v.dbl), lng)
        if isinstance(e, Arithmetic):
            return _arith(e.op, self.numeric(e.left), self.numeric(e.right))
        return _Bool(self.boolean(e))

    def compare(self, op: str, left: Expression, right: Expression) -> Column:
        if op == "<>":
            return ~self.compare("=", left, right)  # createNotEqual = NOT(createEqual)
        a, b = self.value(left), self.value(right)
        if isinstance(a, _Bool) or isinstance(b, _Bool):
            if op != "=":
                return _null("boolean")  # the parser refuses these (checkLessThanOperand)
            if isinstance(a, _Num) or isinstance(b, _Num):  # Boolean vs Number: FALSE
                return F.when(~_is_null(a) & ~_is_null(b), F.lit(False))
            return _bool_view(a) == _bool_view(b)
        if isinstance(a, _Str) and isinstance(b, _Str):
            if a.literal is not None or b.literal is not None:
                return _CMP[op](a.s, b.s)  # a string literal is a string: compare as strings
            # two dynamic strings: as numbers if both are numeric, as strings if neither,
            # else unknown (a non-numeric string compared with a number)
            na, nb = self.number(left, a), self.number(right, b)
            a_num, b_num = na.dbl.isNotNull(), nb.dbl.isNotNull()
            return F.when(a_num & b_num, _num_compare(op, na, nb)).when(
                ~a_num & ~b_num, _CMP[op](a.s, b.s)
            )
        return _num_compare(op, self.number(left, a), self.number(right, b))

    def condition(self, e: Expression) -> Column:
        """A boolean context (AND / OR / NOT operand, the whole filter): identifiers are cast."""
        if isinstance(e, Identifier):
            return _bool_view(self.value(e))
        return self.boolean(e)

    def boolean(self, e: Expression) -> Column:
        if isinstance(e, BooleanLiteral):
            return F.lit(e.value)
        if isinstance(e, NullLiteral):
            return _null("boolean")
        if isinstance(e, And):
            return self.condition(e.left) & self.condition(e.right)
        if isinstance(e, Or):
            return self.condition(e.left) | self.condition(e.right)
        if isinstance(e, Not):
            return ~self.condition(e.operand)
        if isinstance(e, Comparison):
            return self.compare(e.op, e.left, e.right)
        if isinstance(e, Between):  # ComparisonExpression.createBetween / createNotBetween
            if e.negated:
                return self.compare("<", e.operand, e.low) | self.compare(">", e.operand, e.high)
            return self.compare(">=", e.operand, e.low) & self.compare("<=", e.operand, e.high)
        if isinstance(e, IsNull):
            isnull = _is_null(self.value(e.operand))
            return ~isnull if e.negated else isnull
        if isinstance(e, Like):
            v = self.value(e.operand)
            if isinstance(v, _Str):
                hit = v.s.rlike(like_regex(e.pattern, e.escape))
            else:  # LIKE on a non-string: FALSE (NULL stays unknown)
                hit = F.when(~_is_null(v), F.lit(False))
            return ~hit if e.negated else hit
        if isinstance(e, In):
            v = self.value(e.operand)
            # IN on a non-string is unknown (UnaryExpression.createInExpression)
            if not isinstance(v, _Str):
                return _null("boolean")
            hit = v.s.isin(list(e.values))
            return ~hit if e.negated else hit
        if isinstance(e, self._VALUE_NODES):
            raise TypeError(f"filter_column: {e} is not a boolean expression")
        raise TypeError(f"filter_column: unknown expression node {e!r}")


def _blank(text: str) -> bool:
    return all(c <= " " for c in text)


def filter_column(filter: str | Expression) -> Column:
    """Compile a filter to a three-valued boolean Column: True, False or NULL (unknown).

    Reads the message columns of SPEC §3.1 by name (``properties``, ``priority``,
    ``expiration``, ``durable``, ``sent_at``, ``user_id``, ``address``), only those
    the filter mentions, so it works on message rows and queue rows alike. A blank
    string is "no filter" (as ``FilterImpl.createFilter``) and gives ``lit(True)``.

    :param filter: filter text or an AST from :func:`parse_filter`.
    :return: a boolean Column.
    :raises FilterSyntaxError: if the text does not parse.

    Example::

        df.select(filter_column("price > 100 AND color IN ('red', 'green')").alias("hit"))
    """
    if isinstance(filter, str):
        if _blank(filter):
            return F.lit(True)
        filter = parse_filter(filter)
    if not isinstance(filter, Expression):
        raise TypeError(
            f"filter_column: filter must be a str or an Expression, got {type(filter).__name__}"
        )
    return _Compiler().condition(filter)


def matches(filter: str | Expression | None) -> Column:
    """True exactly where the filter matches: unknown counts as no match (Artemis ``Filter.match``).

    :param filter: filter text, an AST, or None (no filter: every row matches).
    :return: a non-null boolean Column.

    Example::

        queue_rows = messages.where(matches(queue.filter))
    """
    if filter is None:
        return F.lit(True)
    return F.coalesce(filter_column(filter), F.lit(False))
