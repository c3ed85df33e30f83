"""A plain-Python evaluator of filter ASTs over one message dict (tests only).

Written apart from :mod:`routing.broker.filters`'s Column compiler so the two can be
checked against each other (``tests/test_filters_differential.py``). It follows
the same decisions (see the module docstring of ``routing.broker.filters``) and Spark's
own arithmetic rules where Artemis and Spark differ: a long overflow is computed
in doubles, division by zero is unknown, NaN equals NaN and sorts above every number, -0.0 = 0.0.

A message is a dict with ``properties`` (dict or None) and the header inputs
``priority``, ``expiration_ms``, ``durable``, ``sent_at_ms``, ``user_id``,
``address`` (any may be None or missing).
"""

from __future__ import annotations

import math
import re
from typing import Any

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
)

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DEC = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)

# Tagged values: ("num", int | float | None), ("str", str | None, literal?), ("bool", bool | None)
Value = tuple


def evaluate(expr: Expression, message: dict[str, Any]) -> bool | None:
    """Three-valued result of the whole filter on ``message``."""
    return _cond(expr, message)


def _cond(e: Expression, m: dict[str, Any]) -> bool | None:
    if isinstance(e, Identifier):
        return _as_bool(_value(e, m))
    if isinstance(e, BooleanLiteral):
        return e.value
    if isinstance(e, NullLiteral):
        return None
    if isinstance(e, And):
        return _and(_cond(e.left, m), _cond(e.right, m))
    if isinstance(e, Or):
        return _or(_cond(e.left, m), _cond(e.right, m))
    if isinstance(e, Not):
        a = _cond(e.operand, m)
        return None if a is None else not a
    if isinstance(e, Comparison):
        return _compare(e.op, _value(e.left, m), _value(e.right, m))
    if isinstance(e, Between):
        v, lo, hi = _value(e.operand, m), _value(e.low, m), _value(e.high, m)
        if e.negated:
            return _or(_compare("<", v, lo), _compare(">", v, hi))
        return _and(_compare(">=", v, lo), _compare("<=", v, hi))
    if isinstance(e, IsNull):
        isnull = _value(e.operand, m)[1] is None
        return not isnull if e.negated else isnull
    if isinstance(e, Like):
        v = _value(e.operand, m)
        if v[1] is None:
            return None
        hit = v[0] == "str" and _like(e.pattern, e.escape).fullmatch(v[1]) is not None
        return not hit if e.negated else hit
    if isinstance(e, In):
        v = _value(e.operand, m)
        if v[0] != "str" or v[1] is None:
            return None
        return (v[1] in e.values) != e.negated
    raise AssertionError(f"not a boolean expression: {e!r}")


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _value(e: Expression, m: dict[str, Any]) -> Value:
    if isinstance(e, StringLiteral):
        return ("str", e.value, True)
    if isinstance(e, NumberLiteral):
        v = e.value
        return ("num", v if isinstance(v, float) or LONG_MIN <= v <= LONG_MAX else float(v))
    if isinstance(e, Identifier):
        return _identifier(e.name, m)
    if isinstance(e, Negate):
        x = _number(_value(e.operand, m))
        if x is None:
            return ("num", None)
        if isinstance(x, int) and -x <= LONG_MAX:
            return ("num", -x)
        return ("num", -float(x))
    if isinstance(e, Arithmetic):
        return ("num", _arith(e.op, _number(_value(e.left, m)), _number(_value(e.right, m))))
    return ("bool", _cond(e, m))


def _identifier(name: str, m: dict[str, Any]) -> Value:
    props = m.get("properties")

    def prop(key: str) -> str | None:
        return None if props is None else props.get(key)

    if name == "AMQPriority":
        p = m.get("priority")
        return ("num", 4 if p is None else int(p))
    if name == "AMQExpiration":
        x = m.get("expiration_ms")
        return ("num", 0 if x is None else int(x))
    if name == "AMQTimestamp":
        return ("num", m.get("sent_at_ms"))
    if name == "AMQDurable":
        return ("str", "NON_DURABLE" if m.get("durable") is False else "DURABLE", False)
    if name == "AMQUserID":
        u = m.get("user_id")
        return ("str", u if u is not None else prop(name), False)
    if name == "AMQAddress":
        a = m.get("address")
        return ("str", a if a is not None else prop(name), False)
    return ("str", prop(name), False)


def parse_number(s: str | None) -> int | float | None:
    """A property string as a number: a long integer, else a double, else None."""
    if s is None:
        return None
    if _INT.fullmatch(s):
        n = int(s)
        return n if LONG_MIN <= n <= LONG_MAX else float(s)
    if _DEC.fullmatch(s):
        return float(s)
    return None


def _number(v: Value) -> int | float | None:
    if v[0] == "num":
        return v[1]
    if v[0] == "str":
        return parse_number(v[1])
    return None


def _as_bool(v: Value) -> bool | None:
    if v[1] is None:
        return None
    if v[0] == "bool":
        return v[1]
    if v[0] == "str":
        return v[1].lower() == "true"
    return False


def _arith(op: str, a: int | float | None, b: int | float | None) -> int | float | None:
    if a is None or b is None:
        return None
    if op in "+-*" and isinstance(a, int) and isinstance(b, int):
        r = a + b if op == "+" else a - b if op == "-" else a * b
        if LONG_MIN <= r <= LONG_MAX:
            return r  # else: overflow, computed in doubles below
    x, y = float(a), float(b)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if y == 0:
        return None  # try_divide / try_mod
    if op == "/":
        return x / y
    try:
        return math.fmod(x, y)  # Java's % on doubles
    except ValueError:
        return math.nan


def _order(a: int | float, b: int | float) -> int:
    """Java widening then Spark's double order (NaN = NaN, NaN above all, -0.0 = 0.0)."""
    if isinstance(a, int) and isinstance(b, int):
        return (a > b) - (a < b)
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return (math.isnan(x)) - (math.isnan(y))
    return (x > y) - (x < y)


_OPS = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


def _compare(op: str, a: Value, b: Value) -> bool | None:
    test = _OPS[op]
    if a[0] == "bool" or b[0] == "bool":
        if op not in ("=", "<>") or a[1] is None or b[1] is None:
            return None
        if a[0] == "num" or b[0] == "num":
            return op == "<>"
        return (_as_bool(a) == _as_bool(b)) == (op == "=")
    if a[0] == "str" and b[0] == "str":
        if a[1] is None or b[1] is None:
            return None
        if a[2] or b[2]:
            return test((a[1] > b[1]) - (a[1] < b[1]))
        x, y = parse_number(a[1]), parse_number(b[1])
        if x is not None and y is not None:
            return test(_order(x, y))
        if x is None and y is None:
            return test((a[1] > b[1]) - (a[1] < b[1]))
        return None
    x, y = _number(a), _number(b)
    if x is None or y is None:
        return None
    return test(_order(x, y))


def _like(pattern: str, escape: str | None) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == escape and i + 1 < len(pattern) and pattern[i + 1] in ("%", "_", escape):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL)
