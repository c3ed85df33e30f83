"""A plain-Python evaluator of filter ASTs over one message dict (tests only).

Written apart from the Column compiler (:mod:`routing.plan.filters`) so the two can be
checked against each other (``tests/test_filters_differential.py``): a line-by-line port
of Artemis 2.44's evaluation (``ComparisonExpression``, ``UnaryExpression``,
``ArithmeticExpression``, ``LogicExpression``, ``ConstantExpression``, ``FilterImpl.match``),
with Java's boxed classes as :class:`J` values and a thrown exception as :class:`Threw`,
plus the lake's lenient rule for untyped properties (the module docstring of
:mod:`routing.broker.filters`).

A message is a dict with ``properties`` (dict or None), ``property_types`` (dict or None:
a property's JMS type, SPEC §3.1's names; no entry = untyped) and the header inputs
``priority``, ``expiration_ms``, ``durable``, ``sent_at_ms``, ``user_id``, ``address``
(any may be None or missing).

:func:`matches` is ``FilterImpl.match`` (False where the evaluation throws);
:func:`evaluate` is the three-valued result the compiler's ``filter_column`` gives:
``evaluate()`` of the whole filter, None where it throws.

``Double.toString`` here is the shortest representation (Java 19 and later); Java 17,
which runs Spark and Artemis in the tests, writes a few doubles with more digits (1.0E23
as 9.999999999999999E22): the generators avoid such values in concatenations.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from routing.broker.filters import (
    And,
    Arithmetic,
    Between,
    BooleanLiteral,
    Comparison,
    ConvertStrings,
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
from routing.broker.properties import java_double

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1

# Java classes of values
BOOLEAN, BYTE, SHORT, INTEGER, LONG = "Boolean", "Byte", "Short", "Integer", "Long"
FLOAT, DOUBLE, STRING, BIGDECIMAL = "Float", "Double", "String", "BigDecimal"
INTEGRAL = (BYTE, SHORT, INTEGER, LONG)
NUMBERS = (*INTEGRAL, FLOAT, DOUBLE, BIGDECIMAL)
RANGES = {BYTE: 8, SHORT: 16, INTEGER: 32, LONG: 64}


@dataclass(frozen=True)
class J:
    """A Java object: its class and its Python value (a float holds a Float's exact value)."""

    cls: str
    v: Any


@dataclass(frozen=True)
class Untyped:
    """An untyped property's text (the lenient rule decides what it is, case by case)."""

    text: str


class Threw(Exception):
    """Artemis's evaluation threw: ``FilterImpl.match`` returns false."""


class NumberFormat(Exception):
    """Java's NumberFormatException."""


# --------------------------------------------------------------------------------------
# Java numbers
# --------------------------------------------------------------------------------------


def wrap(n: int, bits: int) -> int:
    m = 1 << bits
    n %= m
    return n - m if n >= m >> 1 else n


def _f32_from_bits(bits: int) -> float:
    return float(struct.unpack(">f", struct.pack(">I", bits & 0xFFFFFFFF))[0])


def to_float(x: Fraction | int | float) -> float:
    """The float32 nearest an exact value (ties to even), Infinity beyond the range."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return x
    q = Fraction(x)
    if q == 0:
        return -0.0 if isinstance(x, float) and math.copysign(1.0, x) < 0 else 0.0
    sign = -1.0 if q < 0 else 1.0
    q = abs(q)
    # largest float32 <= q, by bisection over the ordered bit patterns of positive floats
    lo, hi = 0, 0x7F800000  # 0.0 .. Infinity
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if Fraction(_f32_from_bits(mid)) <= q:
            lo = mid
        else:
            hi = mid
    below = _f32_from_bits(lo)
    if hi == 0x7F800000:  # above the largest float: Infinity past half an ulp
        limit = Fraction(_f32_from_bits(0x7F7FFFFF)) + Fraction(2) ** 103
        return sign * (math.inf if q >= limit else below)
    above = _f32_from_bits(hi)
    d_below, d_above = q - Fraction(below), Fraction(above) - q
    if d_below < d_above or (d_below == d_above and lo % 2 == 0):
        return sign * below
    return sign * above


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_JAVA_FLOAT_TEXT = re.compile(
    r"[\x00-\x20]*([+-]?)(NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"([fFdD]?)[\x00-\x20]*",
    re.ASCII,
)


def parse_integral(cls: str, text: str) -> J:
    """``Byte/Short/Integer/Long.valueOf`` (ASCII digits)."""
    if not _INTEGER_TEXT.fullmatch(text):
        raise NumberFormat(text)
    n = int(text)
    if wrap(n, RANGES[cls]) != n:
        raise NumberFormat(text)
    return J(cls, n)


def parse_floating(cls: str, text: str) -> J:
    """``Float/Double.valueOf``: trimmed, sign, NaN, Infinity, decimal, f/d suffix (no hex)."""
    m = _JAVA_FLOAT_TEXT.fullmatch(text)
    if not m or (m.group(3) and m.group(2) in ("NaN", "Infinity")):
        raise NumberFormat(text)
    sign, body = m.group(1), m.group(2)
    if body == "NaN":
        return J(cls, math.nan)
    if body == "Infinity":
        return J(cls, -math.inf if sign == "-" else math.inf)
    exact = Fraction(body)
    if cls == DOUBLE:
        try:
            value = float(exact)  # correctly rounded (Python, as Java)
        except OverflowError:
            value = math.inf
    else:
        value = to_float(exact)
    if exact == 0:
        value = 0.0
    return J(cls, -value if sign == "-" else value)


def typed(type_name: str, text: str) -> J:
    """A typed property's value, as the Java object its type names."""
    if type_name == "boolean":
        return J(BOOLEAN, text.lower() == "true")
    if type_name == "string":
        return J(STRING, text)
    if type_name in ("float", "double"):
        return parse_floating(FLOAT if type_name == "float" else DOUBLE, text)
    cls = {"byte": BYTE, "short": SHORT, "integer": INTEGER, "long": LONG}[type_name]
    return parse_integral(cls, text)


def java_compare_fp(x: float, y: float, double: bool) -> int:
    """``Double.compare`` / ``Float.compare``: -0.0 < 0.0, NaN equal to itself and largest."""
    if x < y:
        return -1
    if x > y:
        return 1

    def bits(v: float) -> int:
        if math.isnan(v):
            return 0x7FF8000000000000
        fmt = ">d" if double else ">f"
        raw = struct.unpack(">q" if double else ">i", struct.pack(fmt, v))[0]
        return int(raw)

    bx, by = bits(x), bits(y)
    return (bx > by) - (bx < by)


def java_float_string(f: float) -> str:
    """``Float.toString``: the shortest digits that read back as the same float."""
    if math.isnan(f) or math.isinf(f) or f == 0:
        return java_double(f)
    for digits in range(1, 10):
        text = f"{f:.{digits - 1}e}"
        if to_float(Fraction(text)) == f:
            break
    mantissa, exp = text.split("e")
    exponent = int(exp)
    neg = mantissa.startswith("-")
    ds = mantissa.lstrip("-").replace(".", "").rstrip("0") or "0"
    if -3 <= exponent < 7:
        point = exponent + 1
        if point <= 0:
            s = "0." + "0" * (-point) + ds
        elif point >= len(ds):
            s = ds + "0" * (point - len(ds)) + ".0"
        else:
            s = ds[:point] + "." + ds[point:]
    else:
        s = f"{ds[0]}.{ds[1:] or '0'}E{exponent}"
    return ("-" if neg else "") + s


def java_string(x: J) -> str:
    """``String.valueOf(x)``."""
    if x.cls == BOOLEAN:
        return "true" if x.v else "false"
    if x.cls == DOUBLE:
        return java_double(x.v)
    if x.cls == FLOAT:
        return java_float_string(x.v)
    if x.cls == STRING:
        return x.v
    return str(x.v)


def from_decimal(n: int) -> J:
    """``ConstantExpression.createFromDecimal`` (and from hex / octal)."""
    if LONG_MIN <= n <= LONG_MAX:
        value: J = J(LONG, n)
    else:
        value = J(BIGDECIMAL, n)
    low = wrap(n, 64)  # longValue()
    if INT_MIN <= low <= INT_MAX:
        return J(INTEGER, low)  # intValue()
    return value


# --------------------------------------------------------------------------------------
# The lenient rule (untyped values)
# --------------------------------------------------------------------------------------

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DEC = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def untyped_number(u: Untyped) -> J:
    """An untyped text where a number is wanted: Long, else Double, else the String."""
    s = u.text
    if _INT.fullmatch(s) and LONG_MIN <= int(s) <= LONG_MAX:
        return J(LONG, int(s))
    if _DEC.fullmatch(s):
        return J(DOUBLE, float(s))
    return J(STRING, s)


def untyped_against(u: Untyped, other: Any) -> J:
    if isinstance(other, J) and other.cls == BOOLEAN:
        return J(BOOLEAN, u.text.lower() == "true")
    if isinstance(other, J) and other.cls == STRING:
        return J(STRING, u.text)
    return untyped_number(u)


def resolve_pair(lv: Any, rv: Any) -> tuple[J, J]:
    if isinstance(lv, Untyped) and isinstance(rv, Untyped):
        return untyped_number(lv), untyped_number(rv)
    if isinstance(lv, Untyped):
        return untyped_against(lv, rv), rv
    if isinstance(rv, Untyped):
        return lv, untyped_against(rv, lv)
    return lv, rv


# --------------------------------------------------------------------------------------
# The evaluator
# --------------------------------------------------------------------------------------


class Evaluator:
    """One filter (``convert``: its ``convert_string_expressions:`` prefix) on one message."""

    def __init__(self, message: dict[str, Any], convert: bool) -> None:
        self.m = message
        self.convert = convert

    # -- values -----------------------------------------------------------------------

    def prop(self, name: str) -> Any:
        props = self.m.get("properties") or {}
        types = self.m.get("property_types") or {}
        text = props.get(name)
        if text is None:
            return None
        type_name = types.get(name)
        return Untyped(text) if type_name is None else typed(type_name, text)

    def identifier(self, name: str) -> Any:
        m = self.m
        if name == "AMQPriority":
            p = m.get("priority")
            return J(INTEGER, 4 if p is None else int(p))
        if name == "AMQExpiration":
            x = m.get("expiration_ms")
            return J(LONG, 0 if x is None else int(x))
        if name == "AMQTimestamp":
            t = m.get("sent_at_ms")
            return None if t is None else J(LONG, int(t))
        if name == "AMQDurable":
            return J(STRING, "NON_DURABLE" if m.get("durable") is False else "DURABLE")
        if name == "AMQUserID" and m.get("user_id") is not None:
            return J(STRING, m["user_id"])
        if name == "AMQAddress" and m.get("address") is not None:
            return J(STRING, m["address"])
        return self.prop(name)

    def ev(self, e: Expression) -> Any:
        """``Expression.evaluate``: a J, an Untyped, or None; raises Threw."""
        if isinstance(e, StringLiteral):
            return J(STRING, e.value)
        if isinstance(e, NumberLiteral):
            return J(DOUBLE, e.value) if isinstance(e.value, float) else from_decimal(e.value)
        if isinstance(e, BooleanLiteral):
            return J(BOOLEAN, e.value)
        if isinstance(e, NullLiteral):
            return None
        if isinstance(e, Identifier):
            return self.identifier(e.name)
        if isinstance(e, Negate):
            return self.negate(self.ev(e.operand))
        if isinstance(e, Arithmetic):
            lv = self.ev(e.left)
            if lv is None:
                return None
            rv = self.ev(e.right)
            if rv is None:
                return None
            return self.arithmetic(e.op, lv, rv)
        b = self.ev_bool(e)
        return None if b is None else J(BOOLEAN, b)

    def negate(self, v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, Untyped):
            v = untyped_number(v)
        if v.cls not in NUMBERS:
            return None
        if v.cls == INTEGER:
            return J(INTEGER, wrap(-v.v, 32))
        if v.cls == LONG:
            return J(LONG, wrap(-v.v, 64))
        if v.cls in (FLOAT, DOUBLE):
            return J(v.cls, -v.v)
        if v.cls == BIGDECIMAL:
            return J(LONG, LONG_MIN) if -v.v == LONG_MIN else J(BIGDECIMAL, -v.v)
        raise Threw(f"Don't know how to negate: {v}")

    def as_number(self, v: Any) -> J:
        if isinstance(v, Untyped):
            v = untyped_number(v)
        if v.cls in NUMBERS:
            return v
        if self.convert and v.cls == STRING:
            try:
                if "." in v.v:
                    return parse_floating(DOUBLE, v.v)
                return parse_integral(LONG, v.v)
            except NumberFormat:
                raise Threw(f"Cannot convert value: {v.v} into a number") from None
        raise Threw(f"Cannot convert value: {v} into a number")

    def arithmetic(self, op: str, lv: Any, rv: Any) -> J:
        if isinstance(lv, Untyped):
            lv = untyped_number(lv)
        if isinstance(rv, Untyped):
            rv = untyped_number(rv)
        if op == "+" and lv.cls == STRING:
            return J(STRING, lv.v + java_string(rv))
        a, b = self.as_number(lv), self.as_number(rv)
        if op == "/":
            return J(DOUBLE, java_divide(double_value(a), double_value(b)))
        if op == "%":
            return J(DOUBLE, java_remainder(double_value(a), double_value(b)))
        if a.cls in (FLOAT, DOUBLE) or b.cls in (FLOAT, DOUBLE):
            x, y = double_value(a), double_value(b)
            return J(DOUBLE, x + y if op == "+" else x - y if op == "-" else x * y)
        bits = 64 if LONG in (a.cls, b.cls) else 32
        x, y = wrap(a.v, bits), wrap(b.v, bits)  # longValue() / intValue()
        r = x + y if op == "+" else x - y if op == "-" else x * y
        return J(LONG if bits == 64 else INTEGER, wrap(r, bits))

    # -- comparisons ------------------------------------------------------------------

    def compare(self, op: str, lv: Any, rv: Any) -> bool:
        """``ComparisonExpression.compare`` (both non-null)."""
        lv, rv = resolve_pair(lv, rv)
        lc, rc = lv.cls, rv.cls
        try:
            if lc != rc:
                lv, rv = self.promote(lv, rv)
        except _Mismatch:
            return False
        except NumberFormat:
            return False
        return OPS[op](compare_to(lv, rv))

    def promote(self, lv: J, rv: J) -> tuple[J, J]:
        """The chain of ifs of ``compare``, in Java's order."""
        lc, rc = lv.cls, rv.cls
        conv = self.convert
        if lc == BOOLEAN:
            if conv and rc == STRING:
                return lv, J(BOOLEAN, rv.v.lower() == "true")
            raise _Mismatch
        if lc == BYTE:
            if rc in (SHORT, INTEGER, LONG):
                return J(rc, lv.v), rv
            if rc == FLOAT:
                return J(FLOAT, to_float(lv.v)), rv
            if rc == DOUBLE:
                return J(DOUBLE, float(lv.v)), rv
            if conv and rc == STRING:
                return lv, parse_integral(BYTE, rv.v)
            raise _Mismatch
        if lc == SHORT:
            if rc in (INTEGER, LONG):
                return J(rc, lv.v), rv
            if rc == FLOAT:
                return J(FLOAT, to_float(lv.v)), rv
            if rc == DOUBLE:
                return J(DOUBLE, float(lv.v)), rv
            if conv and rc == STRING:
                return lv, parse_integral(SHORT, rv.v)
            raise _Mismatch
        if lc == INTEGER:
            if rc == LONG:
                return J(LONG, lv.v), rv
            if rc == FLOAT:
                return J(FLOAT, to_float(lv.v)), rv
            if rc == DOUBLE:
                return J(DOUBLE, float(lv.v)), rv
            if conv and rc == STRING:
                return lv, parse_integral(INTEGER, rv.v)
            raise _Mismatch
        if lc == LONG:
            if rc == INTEGER:
                return lv, J(LONG, rv.v)
            if rc == FLOAT:
                return J(FLOAT, to_float(lv.v)), rv
            if rc == DOUBLE:
                return J(DOUBLE, float(lv.v)), rv
            if conv and rc == STRING:
                return lv, parse_integral(LONG, rv.v)
            raise _Mismatch
        if lc == FLOAT:
            if rc in (INTEGER, LONG):
                return lv, J(FLOAT, to_float(rv.v))
            if rc == DOUBLE:
                return J(DOUBLE, lv.v), rv
            if conv and rc == STRING:
                return lv, parse_floating(FLOAT, rv.v)
            raise _Mismatch
        if lc == DOUBLE:
            if rc in (INTEGER, LONG, FLOAT):
                return lv, J(DOUBLE, float(rv.v))
            if conv and rc == STRING:
                return lv, parse_floating(DOUBLE, rv.v)
            raise _Mismatch
        if conv and lc == STRING:
            if rc == BOOLEAN:
                return J(BOOLEAN, lv.v.lower() == "true"), rv
            if rc in INTEGRAL:
                return parse_integral(rc, lv.v), rv
            if rc in (FLOAT, DOUBLE):
                return parse_floating(rc, lv.v), rv
        raise _Mismatch

    def equal(self, lv: Any, rv: Any) -> bool | None:
        """``doCreateEqual``'s evaluate (both sides already evaluated)."""
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None:
            return True
        return self.compare("=", lv, rv)

    # -- booleans ---------------------------------------------------------------------

    def ev_bool(self, e: Expression) -> bool | None:
        if isinstance(e, Identifier):  # createBooleanCast
            v = self.ev(e)
            if v is None:
                return None
            if isinstance(v, Untyped):
                return v.text.lower() == "true"
            return v.v if v.cls == BOOLEAN else False
        if isinstance(e, BooleanLiteral):
            return e.value
        if isinstance(e, NullLiteral):
            return None
        if isinstance(e, And):
            return self.logic([e.left, e.right], decisive=False)
        if isinstance(e, Or):
            return self.logic([e.left, e.right], decisive=True)
        if isinstance(e, Not):
            v = self.ev_bool(e.operand)
            return None if v is None else not v
        if isinstance(e, Comparison):
            return self.comparison(e.op, e.left, e.right)
        if isinstance(e, Between):
            if e.negated:
                return self.logic_values(
                    [lambda: self.comparison("<", e.operand, e.low),
                     lambda: self.comparison(">", e.operand, e.high)], decisive=True)  # fmt: skip
            return self.logic_values(
                [lambda: self.comparison(">=", e.operand, e.low),
                 lambda: self.comparison("<=", e.operand, e.high)], decisive=False)  # fmt: skip
        if isinstance(e, IsNull):
            isnull = self.ev(e.operand) is None
            return not isnull if e.negated else isnull
        if isinstance(e, Like):
            v = self.ev(e.operand)
            if v is None:
                hit = None
            elif isinstance(v, Untyped) or v.cls == STRING:
                s = v.text if isinstance(v, Untyped) else v.v
                hit = like(e.pattern, e.escape).match(s) is not None
            else:
                hit = False
            return hit if hit is None or not e.negated else not hit
        if isinstance(e, In):
            v = self.ev(e.operand)
            if v is None or (isinstance(v, J) and v.cls != STRING):
                return None
            s = v.text if isinstance(v, Untyped) else v.v
            return (s in e.values) != e.negated
        raise AssertionError(f"not a boolean expression: {e!r}")

    def comparison(self, op: str, left: Expression, right: Expression) -> bool | None:
        if op in ("=", "<>"):
            lv, rv = self.ev(left), self.ev(right)  # both evaluated
            r = self.equal(lv, rv)
            return r if op == "=" or r is None else not r
        lv = self.ev(left)
        if lv is None:
            return None
        rv = self.ev(right)
        if rv is None:
            return None
        return self.compare(op, lv, rv)

    def logic(self, operands: list[Expression], decisive: bool) -> bool | None:
        return self.logic_values([lambda x=x: self.ev_bool(x) for x in operands], decisive)

    @staticmethod
    def logic_values(operands: list[Any], decisive: bool) -> bool | None:
        """``ORExpression`` (decisive TRUE) / ``ANDExpression`` (decisive FALSE) evaluate."""
        nulls = False
        for operand in operands:
            v = operand()
            if v is decisive:
                return decisive
            if v is None:
                nulls = True
        return None if nulls else not decisive

    # -- FilterImpl.match: BooleanExpression.matches ------------------------------------

    def matches(self, e: Expression) -> bool:
        if isinstance(e, Between):  # an AND / OR of two comparisons
            if e.negated:
                return self.matches(Comparison("<", e.operand, e.low)) or self.matches(
                    Comparison(">", e.operand, e.high)
                )
            return self.matches(Comparison(">=", e.operand, e.low)) and self.matches(
                Comparison("<=", e.operand, e.high)
            )
        if isinstance(e, And):
            return self.matches(e.left) and self.matches(e.right)
        if isinstance(e, Or):
            return self.matches(e.left) or self.matches(e.right)
        if isinstance(e, Comparison) and e.op == "=":
            lv, rv = self.ev(e.left), self.ev(e.right)
            if (lv is None) != (rv is None):
                return False
            if lv is None:
                return True
            return self.compare("=", lv, rv)
        return self.ev_bool(e) is True


class _Mismatch(Exception):
    pass


def double_value(x: J) -> float:
    return float(x.v)


def java_divide(x: float, y: float) -> float:
    if y == 0:
        if math.isnan(x) or x == 0:
            return math.nan
        return math.inf if (x < 0) == (math.copysign(1.0, y) < 0) else -math.inf
    return x / y


def java_remainder(x: float, y: float) -> float:
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or y == 0:
        return math.nan
    if math.isinf(y):
        return x
    return math.fmod(x, y)


def compare_to(a: J, b: J) -> int:
    """``a.compareTo(b)`` for two values of one class (its sign)."""
    if a.cls in (FLOAT, DOUBLE):
        return java_compare_fp(a.v, b.v, a.cls == DOUBLE)
    if a.cls == STRING:  # UTF-16 code units
        x, y = a.v.encode("utf-16-be"), b.v.encode("utf-16-be")
        return (x > y) - (x < y)
    return (a.v > b.v) - (a.v < b.v)


OPS = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


_REGEXP_CONTROL_CHARS = set(".\\[]^$?*+{}|():&<>=!")


def like(pattern: str, escape: str | None) -> re.Pattern[str]:
    """``LikeExpression``'s regex, built as Artemis builds it (``\\x`` and the hex code of a
    quoted or control character: Java and Python both read two hex digits after it)."""
    esc = -1 if escape is None else ord(escape)
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if esc == ord(c) and i + 1 < len(pattern) and pattern[i + 1] in ("_", "%", c):
            i += 1
            out.append("\\x" + format(ord(pattern[i]), "x"))
        elif c == "%":
            out.append(".*?")
        elif c == "_":
            out.append(".")
        elif c in _REGEXP_CONTROL_CHARS:
            out.append("\\x" + format(ord(c), "x"))
        else:
            out.append(c)
        i += 1
    return re.compile("\\A" + "".join(out) + "\\Z", re.DOTALL)


def _split(expr: Expression) -> tuple[Expression, bool]:
    if isinstance(expr, ConvertStrings):
        return expr.operand, True
    return expr, False


def evaluate(expr: Expression, message: dict[str, Any]) -> bool | None:
    """Three-valued result of the whole filter on ``message`` (None where it throws)."""
    e, convert = _split(expr)
    try:
        return Evaluator(message, convert).ev_bool(e)
    except Threw:
        return None


def matches(expr: Expression, message: dict[str, Any]) -> bool:
    """``FilterImpl.match``: the filter's ``matches()``, False where it throws."""
    e, convert = _split(expr)
    try:
        return Evaluator(message, convert).matches(e)
    except Threw:
        return False
