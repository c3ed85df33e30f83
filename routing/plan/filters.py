"""Artemis filters (SPEC §5.1) compiled to Spark Columns.

The grammar, its AST and the evaluation rules (Artemis 2.44's, over typed properties, and
the lake's lenient rule for untyped ones) are in :mod:`routing.broker.filters`; this module
turns a parsed filter into a three-valued boolean Column. Compiled Columns use
``pyspark.sql.functions`` only; user text never reaches SQL text, property names are
literal map keys.

How it compiles. A value is a small decision tree (:class:`_Switch` over conditions, with
:class:`_Leaf` values of a static Java class at the leaves): a literal or a header is one
leaf; a property is a switch over its type in ``property_types`` (``t = 'long'`` ...,
``t IS NULL`` for untyped); an untyped leaf becomes, where its counterpart asks for a
number, a switch over its text (reads as a long, as a double, or stays a String).
Operations graft trees (a comparison of a property with a literal is one leaf rule per
type; two properties make a nested switch) and the rules at the leaves are Artemis's,
resolved at compile time from the two static classes. A boolean tree is flattened to
one ``CASE`` whose branches with the same result are merged (``t IN (...)``), so the
common shapes stay small: ``prop > 100`` is one ``CASE`` of four branches,
``prop = 'x'``, ``prop LIKE 'ord%'`` a plain test of the text (no typed number or boolean
has such a text), ``prop IN (...)`` one type test. Trees are built in a small expression
form (:data:`_IR`, plain tuples, so equal expressions are equal values), simplified as they
are built, and turned into Columns once (each distinct expression one Column: a property's
text and type are read by one expression each).

An evaluation that throws in Artemis (arithmetic on a boolean, negating a short, ...)
makes ``FilterImpl.match`` false. It is a leaf too (:data:`_THROW`), and a boolean
result is a pair (value, threw) combined with Artemis's evaluation order; ``threw`` is
folded away for filters that cannot throw. :func:`matches` compiles apart from
:func:`filter_column`: where NULL and FALSE are one (the filter, what AND / OR make of
it) a type mismatch needs no NULL guard.

Big values. A binary operation multiplies its operands' leaves; when that would grow too
big (arithmetic over several properties), the bigger operand is first collapsed into one
struct (class code, payloads, null, threw) computed once a row in a ``transform`` (a
``let``), its leaves then reading the struct's fields. A compiled filter still above
:data:`_INTERPRETED_ABOVE` nodes is evaluated interpreted inside generated code. Sizes
(``tests/test_filters.py`` keeps the common ones small): ``prop = 'x'`` 4 nodes,
``prop > 100`` about 30, a property compared with a property about 1000 (a CASE over both
types), several properties in arithmetic some thousands.

.. note:: Evolving
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

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
    like_regex,
    parse_filter,
)
from routing.broker.properties import INTEGER, INTEGRAL_RANGES, PROPERTY_TYPES

__all__ = ["filter_column", "matches"]

INT_MIN, INT_MAX = INTEGRAL_RANGES[INTEGER]

# --------------------------------------------------------------------------------------
# Expressions (_IR): hashable tuples, simplified as they are built, rendered to Columns once
# --------------------------------------------------------------------------------------

_IR = tuple
"""``("lit", type, key)``: a literal (``key``: the value, ``float.hex`` for floating point);
``("null", type)``; ``("map", column, key)``: ``try_element_at(column, lit(key))``;
``("col", name)``; ``("fn", name, args, params)``: a function of other expressions
(``args``) and plain parameters; ``("case", ((cond, value), ...), else)``."""


def _lit(type_: str, value: Any) -> _IR:
    if type_ in ("double", "float"):
        return ("lit", type_, float(value).hex())
    return ("lit", type_, value)


TRUE: _IR = ("lit", "boolean", True)
FALSE: _IR = ("lit", "boolean", False)
NULL_BOOL: _IR = ("null", "boolean")
NAN: _IR = _lit("double", math.nan)


def _is_lit(e: _IR) -> bool:
    return e[0] == "lit"


def _lit_value(e: _IR) -> Any:
    """The Python value of a literal (floats decoded)."""
    if e[1] in ("double", "float"):
        return float.fromhex(e[2])
    return e[2]


def _fn(name: str, *args: _IR, params: tuple[Any, ...] = ()) -> _IR:
    return ("fn", name, args, params)


def _eq(a: _IR, b: _IR) -> _IR:
    return _fn("=", a, b)


def _isnull(e: _IR) -> _IR:
    if e[0] == "lit":
        return FALSE
    if e[0] == "null":
        return TRUE
    return _fn("isnull", e)


def _not(e: _IR) -> _IR:
    if e == TRUE:
        return FALSE
    if e == FALSE:
        return TRUE
    if e[0] == "fn" and e[1] == "not":
        return e[2][0]
    return _fn("not", e)


def _and(a: _IR, b: _IR) -> _IR:
    """Three-valued AND (Kleene), simplified."""
    if a == FALSE or b == FALSE:
        return FALSE
    if a == TRUE:
        return b
    if b == TRUE or a == b:
        return a
    return _fn("and", a, b)


def _conjuncts(e: _IR) -> list[_IR]:
    if e[0] == "fn" and e[1] == "and":
        return _conjuncts(e[2][0]) + _conjuncts(e[2][1])
    return [e]


def _members(e: _IR) -> tuple[_IR, tuple[Any, ...]] | None:
    """``x = 'a'`` or ``x IN ('a', ...)`` with literal strings: (x, members)."""
    if e[0] == "fn" and e[1] == "=" and e[2][1][0] == "lit" and e[2][1][1] == "string":
        return e[2][0], (e[2][1][2],)
    if e[0] == "fn" and e[1] == "isin":
        return e[2][0], e[3]
    return None


def _disjuncts(e: _IR) -> list[_IR]:
    if e[0] == "fn" and e[1] == "or":
        return _disjuncts(e[2][0]) + _disjuncts(e[2][1])
    return [e]


def _or(a: _IR, b: _IR) -> _IR:
    """Three-valued OR (Kleene), simplified; equalities of one expression to string
    literals merge into one IN."""
    if a == TRUE or b == TRUE:
        return TRUE
    if a == FALSE:
        return b
    if b == FALSE or a == b:
        return a
    if a in _conjuncts(b):  # absorption: a OR (a AND x) = a
        return a
    if b in _conjuncts(a):
        return b
    terms: list[_IR] = []
    for term in _disjuncts(a) + _disjuncts(b):
        m = _members(term)
        for i, other in enumerate(terms):
            mo = _members(other)
            if m is not None and mo is not None and m[0] == mo[0]:
                terms[i] = _fn("isin", m[0], params=tuple(dict.fromkeys(mo[1] + m[1])))
                break
        else:
            if term not in terms:
                terms.append(term)
    out = terms[0]
    for term in terms[1:]:
        out = _fn("or", out, term)
    return out


def _case(branches: list[tuple[_IR, _IR]], otherwise: _IR) -> _IR:
    """``CASE WHEN c THEN v ... ELSE otherwise``, simplified: constant conditions dropped,
    neighbours with one value merged, a trailing branch equal to ELSE dropped, a CASE
    in ELSE inlined."""
    out: list[tuple[_IR, _IR]] = []
    for cond, value in branches:
        if cond in (FALSE, NULL_BOOL) or cond[0] == "null":
            continue
        if cond == TRUE:
            otherwise = value
            break
        if out and out[-1][1] == value:
            out[-1] = (_or(out[-1][0], cond), value)
        else:
            out.append((cond, value))
    else:
        if otherwise[0] == "case":  # inline: CASE ... ELSE CASE WHEN c THEN v ... END
            inner = list(otherwise[1])
            return _case(out + inner, otherwise[2]) if out else otherwise
    while out and out[-1][1] == otherwise:
        out.pop()
    if not out:
        return otherwise
    if len(out) == 1 and out[0][1] == TRUE and otherwise == FALSE:
        return (
            _and(out[0][0], TRUE) if _never_null(out[0][0]) else _fn("coalesce", out[0][0], FALSE)
        )
    return ("case", tuple(out), otherwise)


def _never_null(e: _IR) -> bool:
    """Conservative: True only for expressions that are never NULL."""
    if e[0] == "lit":
        return True
    if e[0] == "fn" and e[1] in ("isnull", "coalesce"):
        return e[1] == "isnull" or any(_never_null(a) for a in e[2])
    if e[0] == "fn" and e[1] in ("and", "or", "not"):
        return all(_never_null(a) for a in e[2])
    if e[0] == "case":
        return all(_never_null(v) for _, v in e[1]) and _never_null(e[2])
    return False


_CMP_FN: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

_RENDER: dict[str, Callable[..., Column]] = {
    **_CMP_FN,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "not": lambda a: ~a,
    "isnull": lambda a: a.isNull(),
    "coalesce": F.coalesce,
    "cast": lambda a, t: a.cast(t),
    "try_cast": lambda a, t: a.try_cast(t),
    "rlike": lambda a, pattern: a.rlike(pattern),
    "isin": lambda a, *members: a.isin(list(members)),
    "contains": lambda a, s: a.contains(s),
    "lower": F.lower,
    "concat": F.concat,
    "utf16": lambda a: F.encode(a, "UTF-16BE"),
    "pow": F.pow,
    "isnan": F.isnan,
    "neg": lambda a: -a,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "try_add": F.try_add,
    "try_subtract": F.try_subtract,
    "try_multiply": F.try_multiply,
    "try_divide": F.try_divide,
    "try_mod": F.try_mod,
    "pmod": F.pmod,
    "shiftleft": lambda a, n: F.shiftleft(a, n),
    "shiftright": lambda a, n: F.shiftright(a, n),
    "regexp_extract": lambda a, pattern, group: F.regexp_extract(a, pattern, group),
    "unix_millis": F.unix_millis,
    "field": lambda a, name: a.getField(name),
    "decimal_wrap64": lambda a: (
        F.pmod(a + F.lit(str(2**63)).cast("decimal(20,0)"), F.lit(str(2**64)).cast("decimal(20,0)"))
        - F.lit(str(2**63)).cast("decimal(20,0)")
    ).cast("bigint"),
}


class _Renderer:
    """_IR -> Column, each distinct expression built once (per compiled filter).

    ``("let", n, bound, body)`` is ``element_at(transform(array(bound), v -> body), 1)``:
    ``body`` reads the (struct) value ``bound`` through ``("var", n)`` without repeating it.
    """

    def __init__(self) -> None:
        self.memo: dict[Any, Column] = {}
        self._free: dict[int, tuple[_IR, frozenset[int]]] = {}

    def free(self, e: _IR) -> frozenset[int]:
        """The variables ``e`` reads that no let inside it binds."""
        hit = self._free.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        head = e[0]
        out: frozenset[int] = frozenset()
        if head == "var":
            out = frozenset((e[1],))
        elif head == "let":
            out = self.free(e[2]) | (self.free(e[3]) - {e[1]})
        elif head == "case":
            for cond, value in e[1]:
                out = out | self.free(cond) | self.free(value)
            out = out | self.free(e[2])
        elif head == "fn":
            for arg in e[2]:
                out = out | self.free(arg)
        self._free[id(e)] = (e, out)
        return out

    def __call__(self, e: _IR, scope: dict[int, Column] | None = None) -> Column:
        free = self.free(e)
        key: Any = (
            e if not free else (e, tuple(id(scope[v]) for v in sorted(free)) if scope else ())
        )
        col = self.memo.get(key)
        if col is None:
            col = self.memo[key] = self.build(e, scope or {})
        return col

    def build(self, e: _IR, scope: dict[int, Column]) -> Column:
        head = e[0]
        if head == "lit":
            type_, value = e[1], _lit_value(e)
            if type_ == "bigint":
                return F.lit(value).cast("bigint") if INT_MIN <= value <= INT_MAX else F.lit(value)
            if type_ == "float":
                return F.lit(value).cast("float")
            return F.lit(value)
        if head == "null":
            return F.lit(None).cast(e[1])
        if head == "map":
            return F.try_element_at(F.col(e[1]), F.lit(e[2]))
        if head == "col":
            return F.col(e[1])
        if head == "var":
            return scope[e[1]]
        if head == "let":
            n, body = e[1], e[3]
            bound = self(e[2], scope)
            return F.element_at(
                F.transform(F.array(bound), lambda v: self(body, {**scope, n: v})), 1
            )
        if head == "case":
            (cond, value), *rest = e[1]
            col = F.when(self(cond, scope), self(value, scope))
            for cond, value in rest:
                col = col.when(self(cond, scope), self(value, scope))
            return col if e[2][0] == "null" else col.otherwise(self(e[2], scope))
        if e[1] == "struct":
            return F.struct(
                *[self(a, scope).alias(name) for a, name in zip(e[2], e[3], strict=True)]
            )
        args = [self(a, scope) for a in e[2]]
        return _RENDER[e[1]](*args, *e[3])


# --------------------------------------------------------------------------------------
# Java classes and values
# --------------------------------------------------------------------------------------

BOOL, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, STRING, BIGDEC, UNTYPED = range(10)
_INTEGRAL = (BYTE, SHORT, INT, LONG)
_NUMBER = (*_INTEGRAL, FLOAT, DOUBLE, BIGDEC)
_TYPE_NAMES = dict(
    zip(PROPERTY_TYPES, (BOOL, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, STRING), strict=True)
)
"""``property_types``' names -> Java classes."""
_RANGES = {_TYPE_NAMES[name]: bounds for name, bounds in INTEGRAL_RANGES.items()}

# An untyped text reads as a number when it is an integer (a long if it fits) or a decimal
# with an optional exponent; no spaces, no NaN/Infinity, no Java suffixes (1d, 1f, 0x10).
_NUM_PATTERN = r"\A[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\z"
# Byte/Short/Integer/Long.valueOf (ASCII digits only; Java also takes other Unicode digits)
_INTEGER_PATTERN = r"\A[+-]?[0-9]+\z"
# Float/Double.valueOf: trimmed, [sign] NaN | Infinity | decimal [exponent] [fFdD] (no hex)
_JAVA_FLOAT_PATTERN = (
    r"\A[\x00-\x20]*([+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))"
    r"(?:(?<=[0-9.])[fFdD])?[\x00-\x20]*\z"
)


@dataclass(frozen=True)
class _Leaf:
    """A value of a static Java class.

    ``v``: the payload (bigint for the integral classes, float, double, string, boolean; a
    Python int for BIGDEC, which only literals are); NULL where the value is null, and
    ``isnull`` says where that is (``TRUE`` ... ``FALSE`` when never). ``dv``: for an
    integral value read from text, the same text cast to a double (the value rounded,
    ``-0.0`` for ``-0``), used where a comparison with a literal makes that exact.
    ``text``: the property text it was read from.
    """

    cls: int
    v: Any
    isnull: _IR = FALSE
    dv: _IR | None = None
    text: _IR | None = None


@dataclass(frozen=True)
class _Out:
    """A leaf of a boolean result: a three-valued expression."""

    v: _IR


@dataclass(frozen=True)
class _Special:
    name: str


_NULL = _Special("null")  # a null value known at compile time (NULL, arithmetic on NULL)
_THROW = _Special("throw")  # Artemis throws here: the filter does not match


@dataclass(frozen=True)
class _Switch:
    """``CASE`` over ``cases`` (condition, node); ``default`` where none holds (None: no
    row gets there). ``exclusive``: at most one condition holds, in any order."""

    cases: tuple[tuple[_IR, _Node], ...]
    default: _Node | None
    exclusive: bool


_Node = _Leaf | _Out | _Special | _Switch


def _switch(cases: list[tuple[_IR, _Node]], default: _Node | None, exclusive: bool) -> _Node:
    cases = [(c, n) for c, n in cases if c != FALSE]
    children = [n for _, n in cases] + ([default] if default is not None else [])
    if (
        children
        and all(n == children[0] for n in children[1:])
        and (default is not None or exclusive)
    ):
        return children[0]
    if not cases:
        return default if default is not None else _NULL
    return _Switch(tuple(cases), default, exclusive)


def _leaves(node: _Node) -> Iterator[_Node]:
    if isinstance(node, _Switch):
        for _, child in node.cases:
            yield from _leaves(child)
        if node.default is not None:
            yield from _leaves(node.default)
    else:
        yield node


def _throws(node: _Node) -> bool:
    return any(leaf is _THROW for leaf in _leaves(node))


_Choice = dict[tuple[Any, ...], int]


def _tmap(node: _Node, f: Callable[[Any, _Choice], _Node], chosen: _Choice | None = None) -> _Node:
    """Replace every leaf by ``f(leaf, chosen)``. ``chosen`` records the branch taken in
    each switch on the way down, so a switch met again (the same conditions: the same
    property, say) takes the same branch instead of branching again."""
    chosen = chosen if chosen is not None else {}
    if not isinstance(node, _Switch):
        return f(node, chosen)
    key = (node.cases, node.exclusive)
    if key in chosen:
        i = chosen[key]
        child = node.default if i < 0 else node.cases[i][1]
        assert child is not None
        return _tmap(child, f, chosen)
    cases = [
        (cond, _tmap(child, f, {**chosen, key: i})) for i, (cond, child) in enumerate(node.cases)
    ]
    default = None if node.default is None else _tmap(node.default, f, {**chosen, key: -1})
    return _switch(cases, default, node.exclusive)


def _graft(a: _Node, b: _Node, f: Callable[[Any, Any], _Node]) -> _Node:
    """Every pair of leaves (of ``a``, then of ``b`` under it) replaced by ``f(x, y)``."""
    return _tmap(a, lambda x, ch: _tmap(b, lambda y, _: f(x, y), ch))


def _flatten(node: _Node, f: Callable[[Any], _IR], null: _IR = NULL_BOOL) -> _IR:
    """One expression from a tree, ``f`` giving each leaf's. Branches of an exclusive
    switch with one result merge (``t IN (...)``); with no default, the largest group
    becomes the ELSE."""
    if not isinstance(node, _Switch):
        return f(node)
    results = [(cond, _flatten(child, f, null)) for cond, child in node.cases]
    if not node.exclusive:
        default = null if node.default is None else _flatten(node.default, f, null)
        return _case(results, default)
    groups: dict[_IR, list[_IR]] = {}
    for cond, result in results:
        groups.setdefault(result, []).append(cond)
    if node.default is not None:
        otherwise = _flatten(node.default, f, null)
        groups.pop(otherwise, None)  # exclusive: that branch gets ELSE's result anyway
    else:
        otherwise = max(groups, key=lambda r: len(groups[r]))
        del groups[otherwise]
    branches = []
    for result, conds in groups.items():
        cond = conds[0]
        for c in conds[1:]:
            cond = _or(cond, c)
        branches.append((cond, result))
    return _case(branches, otherwise)


@dataclass(frozen=True)
class _Bool:
    """A boolean result: its three-valued value and where its evaluation threw."""

    v: _IR
    threw: _IR = FALSE


def _result(tree: _Node) -> _Bool:
    """A tree of boolean results (``_Out``, ``_NULL``, ``_THROW``) as a :class:`_Bool`."""

    def value(leaf: Any) -> _IR:
        return leaf.v if isinstance(leaf, _Out) else NULL_BOOL

    v = _flatten(tree, value)
    if not _throws(tree):
        return _Bool(v)
    return _Bool(v, _flatten(tree, lambda leaf: TRUE if leaf is _THROW else FALSE, FALSE))


def _guard(value: _IR, *leaves: _Leaf) -> _IR:
    """``value`` where no leaf is null, else NULL (for results that are not null-strict)."""
    isnull = FALSE
    for leaf in leaves:
        isnull = _or(isnull, leaf.isnull)
    if isnull == FALSE:
        return value
    return _case([(isnull, NULL_BOOL)], value)


def _false(*leaves: _Leaf) -> _Out:
    """A type mismatch: FALSE, NULL where a value is null."""
    return _Out(_guard(FALSE, *leaves))


# -- Java numbers in Python (literals folded at compile time) ---------------------------


def _wrap(n: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((n + half) % (1 << bits)) - half


_F32_HALFWAY_OVER_MAX = 3.4028235677973366e38  # Float.MAX_VALUE + half an ulp: rounds to Infinity


def _f32_bits(f: float) -> int:
    return int(struct.unpack("<i", struct.pack("<f", f))[0])


def _f32(x: int | float) -> float:
    """The float nearest ``x`` (ties to even), as Java's ``(float)`` conversions."""
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return x
        if abs(x) >= _F32_HALFWAY_OVER_MAX:
            return math.copysign(math.inf, x)
        return float(struct.unpack("<f", struct.pack("<f", x))[0])
    if abs(x) >= 2**128 - 2**103:
        return math.copysign(math.inf, x)
    exact = Fraction(x)
    near = _f32(float(x))  # int -> double -> float may round twice: check the neighbours
    candidates = [near]
    for bits in (_f32_bits(near) - 1, _f32_bits(near) + 1):
        c = float(struct.unpack("<f", struct.pack("<i", bits))[0])
        if not (math.isinf(c) or math.isnan(c)):
            candidates.append(c)
    return min(candidates, key=lambda c: (abs(Fraction(c) - exact), _f32_bits(c) & 1))


def _literal_leaf(value: int | float) -> _Leaf:
    """``ConstantExpression``: an integer literal is an Integer if it fits, else a Long, else
    a BigDecimal, except that a BigDecimal whose low 64 bits (``longValue``) fit in an int
    becomes that Integer (``createFromDecimal``); a decimal literal is a Double."""
    if isinstance(value, float):
        return _Leaf(DOUBLE, _lit("double", value))
    if LONG_MIN <= value <= LONG_MAX:
        cls = INT if INT_MIN <= value <= INT_MAX else LONG
        return _Leaf(cls, _lit("bigint", value), dv=_lit("double", float(value)))
    low = _wrap(value, 64)
    if INT_MIN <= low <= INT_MAX:
        return _Leaf(INT, _lit("bigint", low), dv=_lit("double", float(low)))
    return _Leaf(BIGDEC, value)


def _lit_num(leaf: _Leaf) -> int | float | None:
    """The value of a literal leaf, None for a dynamic one."""
    if leaf.cls == BIGDEC:
        return int(leaf.v)
    if isinstance(leaf.v, tuple) and leaf.v[0] == "lit":
        value = _lit_value(leaf.v)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return None


# --------------------------------------------------------------------------------------
# Comparisons (ComparisonExpression.compare)
# --------------------------------------------------------------------------------------

_SAME, _AS_LONG, _AS_FLOAT, _AS_DOUBLE, _MISMATCH, _CONVERT_RIGHT, _CONVERT_LEFT = range(7)


_PROMOTE: dict[int, dict[int, int]] = {
    BOOL: {},
    BYTE: {SHORT: _AS_LONG, INT: _AS_LONG, LONG: _AS_LONG, FLOAT: _AS_FLOAT, DOUBLE: _AS_DOUBLE},
    SHORT: {INT: _AS_LONG, LONG: _AS_LONG, FLOAT: _AS_FLOAT, DOUBLE: _AS_DOUBLE},
    INT: {LONG: _AS_LONG, FLOAT: _AS_FLOAT, DOUBLE: _AS_DOUBLE},
    LONG: {INT: _AS_LONG, FLOAT: _AS_FLOAT, DOUBLE: _AS_DOUBLE},
    FLOAT: {INT: _AS_FLOAT, LONG: _AS_FLOAT, DOUBLE: _AS_DOUBLE},
    DOUBLE: {INT: _AS_DOUBLE, LONG: _AS_DOUBLE, FLOAT: _AS_DOUBLE},
}
"""``compare``'s chain of ``if``s (Artemis 2.44), left class -> right class -> how; a pair
not listed is FALSE. Note the asymmetries: Short vs Integer promotes, Integer vs Short is
FALSE; Long, Float and Double never promote a Byte or a Short."""


def _promotion(lc: int, rc: int, convert: bool) -> int:
    """How ``compare`` brings a left value of class ``lc`` and a right one of ``rc`` together."""
    if lc == rc:
        return _SAME
    if lc in _PROMOTE:
        how = _PROMOTE[lc].get(rc)
        if how is not None:
            return how
        return _CONVERT_RIGHT if convert and rc == STRING else _MISMATCH
    if lc == STRING and convert and rc in _PROMOTE:
        return _CONVERT_LEFT
    return _MISMATCH  # a String without the prefix, a BigDecimal against anything else


def _negzero(e: _IR) -> _IR:
    """For a zero ``e`` (float or double): TRUE if it is -0.0 (1 / -0.0 is -Infinity)."""
    if e[0] == "lit":
        return TRUE if math.copysign(1.0, _lit_value(e)) < 0 else FALSE
    return _fn("<", _fn("pow", e, _lit("double", -1.0)), _lit("double", 0.0))


@dataclass(frozen=True)
class _Fp:
    """A float or double operand: its expression and whether it can be zero / -0.0."""

    e: _IR
    zero: bool = True
    negzero: bool = True


def _fp_compare(op: str, x: _Fp, y: _Fp) -> _IR:
    """``Float/Double.compareTo``: as Spark compares (NaN equal to NaN and above everything)
    except that -0.0 is below 0.0."""
    plain = _fn(op, x.e, y.e)
    if not (x.zero and y.zero and (x.negzero or y.negzero)):
        return plain
    nx = _negzero(x.e) if x.negzero else FALSE
    ny = _negzero(y.e) if y.negzero else FALSE
    zero_result = {
        "=": lambda: _fn("=", nx, ny) if nx != FALSE and ny != FALSE else _not(_or(nx, ny)),
        "<>": lambda: _not(_fn("=", nx, ny)) if nx != FALSE and ny != FALSE else _or(nx, ny),
        "<": lambda: _and(nx, _not(ny)),
        "<=": lambda: _or(nx, _not(ny)),
        ">": lambda: _and(ny, _not(nx)),
        ">=": lambda: _or(ny, _not(nx)),
    }[op]()
    if zero_result == (TRUE if op in ("=", "<=", ">=") else FALSE):
        return plain  # Spark's answer for two zeros (equal) is Java's here
    both_zero = _and(_fn("=", x.e, _lit("double", 0.0)), _fn("=", y.e, _lit("double", 0.0)))
    if _is_lit(x.e):
        both_zero = _fn("=", y.e, _lit("double", 0.0))
    elif _is_lit(y.e):
        both_zero = _fn("=", x.e, _lit("double", 0.0))
    return _case([(both_zero, zero_result)], plain)


def _as_float(leaf: _Leaf) -> _Fp:
    """A Byte .. Long or Float operand as a float (``floatValue``)."""
    n = _lit_num(leaf)
    if n is not None:
        f = _f32(n)
        return _Fp(_lit("float", f), f == 0, math.copysign(1.0, f) < 0)
    if leaf.cls == FLOAT:
        return _Fp(leaf.v)
    return _Fp(_fn("cast", leaf.v, params=("float",)), negzero=False)


def _as_double(leaf: _Leaf) -> _Fp:
    """A number operand as a double (``doubleValue``)."""
    n = _lit_num(leaf)
    if n is not None:
        d = float(n)
        return _Fp(_lit("double", d), d == 0, math.copysign(1.0, d) < 0)
    if leaf.cls == DOUBLE:
        return _Fp(leaf.v)
    if leaf.cls == FLOAT:
        return _Fp(_fn("cast", leaf.v, params=("double",)))
    return _Fp(_fn("cast", leaf.v, params=("double",)), negzero=False)


def _double_view(dyn: _Leaf, c: int | float) -> _IR | None:
    """An expression of ``dyn`` that compares with the literal ``c`` (Spark's comparison)
    exactly as Java compares them, shared by the integral and double leaves of a property
    (one cast for both): an integral value's ``dv`` when ``c`` is an integer exact in a
    double with its neighbours, or a double other than -0.0 (``dv`` is -0.0 for ``-0``);
    a double value itself when ``c`` is not zero (no -0.0 question arises). None otherwise."""
    if dyn.cls in _INTEGRAL and dyn.dv is not None:
        if isinstance(c, int):
            return dyn.dv if abs(c) < 2**53 else None
        return dyn.dv if not (c == 0 and math.copysign(1.0, c) < 0) else None
    if dyn.cls == DOUBLE and c != 0:
        return dyn.v
    return None


def _numeric_compare(op: str, how: int, a: _Leaf, b: _Leaf) -> _IR:
    """Two numbers (not BigDecimal) after promotion, as ``compareTo`` compares them."""
    na, nb = _lit_num(a), _lit_num(b)
    # An integral or double value against a literal that is safe to compare in doubles:
    # the integral's ``dv`` (one cast, shared with the double branch of the same property)
    if how in (_AS_LONG, _AS_DOUBLE) or (how == _SAME and a.cls in (*_INTEGRAL, DOUBLE)):
        for dyn, lit, lit_left in ((a, nb, False), (b, na, True)):
            e = None if lit is None else _double_view(dyn, lit)
            if e is not None and lit is not None:
                c = _lit("double", float(lit))
                return _fn(op, c, e) if lit_left else _fn(op, e, c)
    if how == _AS_LONG or (how == _SAME and a.cls in _INTEGRAL):
        return _fn(op, a.v, b.v)
    if how == _AS_FLOAT or (how == _SAME and a.cls == FLOAT):
        return _fp_compare(op, _as_float(a), _as_float(b))
    return _fp_compare(op, _as_double(a), _as_double(b))


def _bool_compare(op: str, a: _IR, b: _IR) -> _IR:
    """``Boolean.compareTo`` (false < true); against a literal, ``x = TRUE`` is ``x``."""
    if op in ("=", "<>"):
        for x, y in ((a, b), (b, a)):
            if y in (TRUE, FALSE) and x not in (TRUE, FALSE):
                return x if (y == TRUE) == (op == "=") else _not(x)
    return _fn(op, a, b)


def _string_compare(op: str, a: _IR, b: _IR) -> _IR:
    """``String.compareTo``: UTF-16 code units; Spark orders UTF-8 bytes, which differs for
    supplementary characters against U+E000..U+FFFF, so order the UTF-16BE bytes."""
    if op in ("=", "<>"):
        return _fn(op, b, a) if _is_lit(a) and not _is_lit(b) else _fn(op, a, b)
    return _fn(op, _fn("utf16", a), _fn("utf16", b))


def _java_value_of(cls: int, s: _Leaf) -> _Node:
    """``Boolean/Byte/Short/Integer/Long/Float/Double.valueOf`` of a String leaf: a leaf of
    ``cls`` where the text parses, a ``nfe`` marker (NumberFormatException) elsewhere."""
    text = s.v
    if cls == BOOL:
        return _Leaf(BOOL, _eq(_fn("lower", text), _lit("string", "true")), s.isnull, text=s.text)
    if cls in _INTEGRAL:
        value = _fn("try_cast", text, params=("bigint",))
        ok = _fn("rlike", text, params=(_INTEGER_PATTERN,))
        lo, hi = _RANGES[cls]
        if cls != LONG:
            ok = _and(
                ok, _and(_fn(">=", value, _lit("bigint", lo)), _fn("<=", value, _lit("bigint", hi)))
            )
        else:
            ok = _and(ok, _not(_isnull(value)))
        return _switch([(ok, _Leaf(cls, value, s.isnull))], _Special("nfe"), exclusive=False)
    core = _fn("regexp_extract", text, params=(_JAVA_FLOAT_PATTERN, 1))
    ok = _fn("rlike", text, params=(_JAVA_FLOAT_PATTERN,))
    type_ = "float" if cls == FLOAT else "double"
    return _switch(
        [(ok, _Leaf(cls, _fn("try_cast", core, params=(type_,)), s.isnull))],
        _Special("nfe"),
        exclusive=False,
    )


class _Compiler:
    """AST -> trees -> one boolean Column; one instance per compiled filter (it memoises
    identifiers and the expressions it renders)."""

    def __init__(self, convert: bool = False) -> None:
        self.convert = convert
        self._idents: dict[str, _Node] = {}
        self.render = _Renderer()
        self.bindings: dict[int, _IR] = {}
        self.nulls_outside = False  # a mismatch need not say NULL: the caller handles nulls
        self.positive = False  # a result where NULL and FALSE are one (matches(), under AND/OR)

    # -- sharing big values (let) ---------------------------------------------------------

    def close(self, e: _IR) -> _IR:
        """``e`` inside the lets of the values it reads (each bound value is closed)."""
        for n in sorted(self.render.free(e), reverse=True):
            e = ("let", n, self.bindings[n], e)
        return e

    def collapse(self, tree: _Node) -> _Node:
        """A big value tree as one struct, computed once per row (a let): its class code,
        a payload for each class, where it is null and where it threw; the tree it gives
        back reads the struct's fields, so operations on it no longer copy the tree."""
        leaves = [x for x in _leaves(tree) if isinstance(x, _Leaf)]
        if not isinstance(tree, _Switch) or not leaves or any(x.cls == BIGDEC for x in leaves):
            return tree
        classes = sorted({x.cls for x in leaves})
        with_dv = [
            c
            for c in classes
            if c in _INTEGRAL and all(x.dv is not None for x in leaves if x.cls == c)
        ]
        isnull = _value_isnull(tree)
        throws = _throws(tree)
        names = (
            (["k"] if len(classes) > 1 else [])
            + [f"p{c}" for c in classes]
            + [f"d{c}" for c in with_dv]
            + (["n"] if isnull != FALSE else [])
            + (["t"] if throws else [])
        )

        def row(x: Any) -> _IR:
            """The struct of one leaf (one CASE of structs: the conditions once)."""
            leaf = x if isinstance(x, _Leaf) else None
            values: list[_IR] = []
            for name in names:
                kind, c = name[0], int(name[1:]) if name[1:] else -1
                if kind == "k":
                    values.append(_lit("int", leaf.cls) if leaf else ("null", "int"))
                elif kind in "pd":
                    null: _IR = ("null", "double" if kind == "d" else _PAYLOAD_TYPES[c])
                    value = (leaf.dv if kind == "d" else leaf.v) if leaf and leaf.cls == c else None
                    values.append(value if isinstance(value, tuple) else null)
                elif kind == "n":
                    values.append(leaf.isnull if leaf else (TRUE if x is _NULL else FALSE))
                else:
                    values.append(TRUE if x is _THROW else FALSE)
            return ("fn", "struct", tuple(values), tuple(names))

        fields = dict.fromkeys(names)
        struct = _flatten(tree, row, row(_NULL))
        n = len(self.bindings)
        self.bindings[n] = self.close(struct)
        var = ("var", n)

        def field(name: str) -> _IR:
            return _fn("field", var, params=(name,))

        isnull_ir = field("n") if "n" in fields else FALSE
        by_class = {
            c: _Leaf(c, field(f"p{c}"), isnull_ir, dv=field(f"d{c}") if f"d{c}" in fields else None)
            for c in classes
        }
        node: _Node
        if len(classes) == 1:
            node = by_class[classes[0]]
        else:
            cases = tuple((_eq(field("k"), _lit("int", c)), by_class[c]) for c in classes)
            node = _Switch(cases, _NULL, exclusive=True)
        if throws:
            node = _switch([(field("t"), _THROW)], node, exclusive=False)
        return node

    def prepare(self, a: _Node, b: _Node) -> tuple[_Node, _Node]:
        """The operands of a binary operation, the bigger collapsed first while the result
        (every leaf of one side against every leaf of the other) would be too big."""
        for _ in range(2):
            sa, sb = _tree_size(a), _tree_size(b)
            if sa * _leaf_count(b) + sb * _leaf_count(a) <= _SIZE_LIMIT:
                break
            if sa >= sb:
                a2 = self.collapse(a)
                if a2 is a:
                    b = self.collapse(b)
                a = a2
            else:
                b2 = self.collapse(b)
                if b2 is b:
                    a = self.collapse(a)
                b = b2
        return a, b

    # -- values ---------------------------------------------------------------------------

    def identifier(self, name: str) -> _Node:
        node = self._idents.get(name)
        if node is None:
            node = self._idents[name] = _header(name) or _property(name)
        return node

    def value(self, e: Expression) -> _Node:
        if isinstance(e, StringLiteral):
            return _Leaf(STRING, _lit("string", e.value))
        if isinstance(e, NumberLiteral):
            return _literal_leaf(e.value)
        if isinstance(e, BooleanLiteral):
            return _Leaf(BOOL, TRUE if e.value else FALSE)
        if isinstance(e, NullLiteral):
            return _NULL
        if isinstance(e, Identifier):
            return self.identifier(e.name)
        if isinstance(e, Negate):
            return _tmap(self.value(e.operand), lambda x, _: self.negate(x))
        if isinstance(e, Arithmetic):
            return self.arithmetic(e.op, self.value(e.left), self.value(e.right))
        b = self.boolean(e)
        leaf = _Leaf(BOOL, b.v, _isnull(b.v))
        return leaf if b.threw == FALSE else _switch([(b.threw, _THROW)], leaf, exclusive=False)

    def negate(self, x: Any) -> _Node:
        """``UnaryExpression.createNegate``."""
        if not isinstance(x, _Leaf):
            return x
        if x.cls == UNTYPED:
            return _tmap(_untyped_number(x), lambda y, _: self.negate(y))
        n = _lit_num(x)
        if x.cls == BIGDEC:
            assert n is not None
            return _Leaf(LONG, _lit("bigint", LONG_MIN)) if -n == LONG_MIN else _Leaf(BIGDEC, -n)
        if x.cls in (BYTE, SHORT):  # "Don't know how to negate"
            return _switch([(x.isnull, _NULL)], _THROW, exclusive=False)
        if x.cls in (INT, LONG):
            bits = 32 if x.cls == INT else 64
            if n is not None:
                v = _wrap(-int(n), bits)
                return _Leaf(x.cls, _lit("bigint", v), dv=_lit("double", float(v)))
            if x.cls == INT:
                return _Leaf(INT, _wrap32(_fn("neg", x.v)), x.isnull)
            lmin = _lit("bigint", LONG_MIN)
            return _Leaf(LONG, _case([(_eq(x.v, lmin), lmin)], _fn("neg", x.v)), x.isnull)
        if x.cls in (FLOAT, DOUBLE):
            if n is not None:
                return _Leaf(x.cls, _lit("float" if x.cls == FLOAT else "double", -n))
            return _Leaf(x.cls, _fn("neg", x.v), x.isnull)
        return _switch([(x.isnull, _NULL)], _NULL, exclusive=False)  # not a number: null

    # -- arithmetic (ArithmeticExpression) ------------------------------------------------

    def arithmetic(self, op: str, left: _Node, right: _Node) -> _Node:
        left, right = self.prepare(left, right)
        right_throws = _throws(right)

        def per_left(a: Any, chosen: _Choice) -> _Node:
            if not isinstance(a, _Leaf):
                return a  # NULL (the right side is not evaluated) or THROW
            node = _tmap(right, lambda b, _: self.arith_pair(op, a, b), chosen)
            if right_throws and a.isnull != FALSE:
                return _switch([(a.isnull, _NULL)], node, exclusive=False)
            return node

        return _tmap(left, per_left)

    def arith_pair(self, op: str, a: Any, b: Any) -> _Node:
        if not isinstance(b, _Leaf):
            return b
        if a.cls == UNTYPED:
            return _tmap(_untyped_number(a), lambda x, _: self.arith_pair(op, x, b))
        if b.cls == UNTYPED:
            return _tmap(_untyped_number(b), lambda y, _: self.arith_pair(op, a, y))
        isnull = _or(a.isnull, b.isnull)
        if op == "+" and a.cls == STRING:
            return _Leaf(STRING, _fn("concat", a.v, _java_string(b)), isnull)
        na, nb = self.as_number(a), self.as_number(b)
        node = _graft(na, nb, lambda x, y: self.numeric_op(op, x, y, isnull))
        if _throws(node) and isnull != FALSE:  # null operands: null, before asNumber
            return _switch([(isnull, _NULL)], node, exclusive=False)
        return node

    def as_number(self, x: _Leaf) -> _Node:
        """``asNumber``: a Number as it is; a String converted (with the prefix) or a throw."""
        if x.cls in _NUMBER:
            return x
        if x.cls == STRING and self.convert:
            has_point = _fn("contains", x.v, params=(".",))
            return _switch(
                [
                    (has_point, _tmap(_java_value_of(DOUBLE, x), lambda y, _: _nfe_throws(y))),
                ],
                _tmap(_java_value_of(LONG, x), lambda y, _: _nfe_throws(y)),
                exclusive=False,
            )
        return _THROW

    def numeric_op(self, op: str, a: Any, b: Any, isnull: _IR) -> _Node:
        if not isinstance(a, _Leaf) or not isinstance(b, _Leaf):
            return _THROW if _THROW in (a, b) else _NULL
        if op in ("/", "%") or FLOAT in (a.cls, b.cls) or DOUBLE in (a.cls, b.cls):
            x, y = _as_double(a).e, _as_double(b).e
            if op == "/":
                return _Leaf(DOUBLE, _java_divide(x, y), isnull)
            if op == "%":
                return _Leaf(DOUBLE, _java_remainder(x, y), isnull)
            if _is_lit(x) and _is_lit(y):
                v = _py_op(op, _lit_value(x), _lit_value(y))
                return _Leaf(DOUBLE, _lit("double", v))
            return _Leaf(DOUBLE, _fn(op, x, y), isnull)
        bits = 64 if LONG in (a.cls, b.cls) else 32
        x, y = _integral_operand(a, bits), _integral_operand(b, bits)
        cls = LONG if bits == 64 else INT
        if _is_lit(x) and _is_lit(y):
            v = _wrap(_py_op(op, _lit_value(x), _lit_value(y)), bits)
            return _Leaf(cls, _lit("bigint", v), dv=_lit("double", float(v)))
        if bits == 32:  # exact in a long, then the low 32 bits
            return _Leaf(INT, _wrap32(_fn(op, x, y)), isnull)
        return _Leaf(LONG, _wrap64(op, x, y), isnull)

    # -- comparisons ----------------------------------------------------------------------

    def compare(self, op: str, left: _Node, right: _Node) -> _Bool:
        if op == "<>":  # createNotEqual = NOT(createEqual)
            b = self.compare("=", left, right)
            return _Bool(_not(b.v), b.threw)
        if op == "=":
            return self.equal(left, right)
        left, right = self.prepare(left, right)
        right_throws = _throws(right)
        # two values that may be null, many leaves each: decide NULL once, around it all
        lnull, rnull = _value_isnull(left), _value_isnull(right)
        outside = not self.positive and lnull != FALSE and rnull != FALSE and _leaf_count(right) > 1

        def per_left(a: Any, chosen: _Choice) -> _Node:
            if not isinstance(a, _Leaf):
                return a  # null: the right side is not evaluated
            node = _tmap(right, lambda b, _: self.compare_pair(op, a, b), chosen)
            if right_throws and a.isnull != FALSE:
                return _switch([(a.isnull, _NULL)], node, exclusive=False)
            return node

        self.nulls_outside = outside
        try:
            b = _result(_tmap(left, per_left))
        finally:
            self.nulls_outside = False
        if outside:
            return _Bool(_case([(_or(lnull, rnull), NULL_BOOL)], b.v), b.threw)
        return b

    def equal(self, left: _Node, right: _Node) -> _Bool:
        """``doCreateEqual``: both sides evaluated; both null TRUE, the left null NULL, the
        right null FALSE; else ``equals`` or ``compare``."""
        left, right = self.prepare(left, right)
        lnull, rnull = _value_isnull(left), _value_isnull(right)
        self.nulls_outside = lnull != FALSE and rnull != FALSE
        try:
            tree = _graft(left, right, lambda a, b: self.equal_pair(a, b, lnull, rnull))
        finally:
            self.nulls_outside = False
        result = _result(tree)
        if lnull != FALSE and rnull != FALSE:  # both may be null: decide nulls first
            v = _case(
                [(lnull, _case([(rnull, TRUE)], NULL_BOOL)), (rnull, FALSE)],
                result.v,
            )
            return _Bool(v, result.threw)
        return result

    def equal_pair(self, a: Any, b: Any, lnull: _IR, rnull: _IR) -> _Node:
        if _THROW in (a, b):
            return _THROW
        if a is _NULL or b is _NULL:
            a_null = a is _NULL or a.isnull == TRUE
            b_null = b is _NULL or b.isnull == TRUE
            if a_null and b_null:
                return _Out(TRUE)
            if a_null:
                return _Out(_case([(b.isnull, TRUE)], NULL_BOOL))
            return _Out(_case([(a.isnull, TRUE)], FALSE))
        node = self.compare_pair("=", a, b)
        if lnull != FALSE and rnull != FALSE:
            return node  # nulls are decided around the whole comparison
        if rnull != FALSE:  # a value = a nullable one: FALSE where the right is null
            return _tmap(node, lambda o, _: _Out(_or_false(o.v)) if isinstance(o, _Out) else o)
        return node

    def compare_pair(self, op: str, a: Any, b: Any) -> _Node:
        """``compare(lv, rv)`` of two leaves, the lake's lenient rule for untyped ones."""
        if not isinstance(b, _Leaf):
            return b
        if a.cls == UNTYPED and b.cls == UNTYPED:  # numbers if both read as numbers
            return _graft(
                _untyped_number(a), _untyped_number(b), lambda x, y: self.compare_pair(op, x, y)
            )
        if a.cls == UNTYPED:
            return _tmap(_untyped_as(a, b.cls), lambda x, _: self.compare_pair(op, x, b))
        if b.cls == UNTYPED:
            return _tmap(_untyped_as(b, a.cls), lambda y, _: self.compare_pair(op, a, y))
        how = _promotion(a.cls, b.cls, self.convert)
        if how == _MISMATCH and op == "=":
            # a typed value whose text cannot be the string literal: FALSE is its text's
            # equality, the same expression as for a string or an untyped value (one test)
            for x, y in ((a, b), (b, a)):
                if (
                    y.cls == STRING
                    and _is_lit(y.v)
                    and x.text is not None
                    and not re.fullmatch(_TYPED_TEXT[x.cls], _lit_value(y.v))
                ):
                    return _Out(_fn("=", x.text, y.v))
        if how == _MISMATCH:
            return self.mismatch(a, b)
        if how == _CONVERT_RIGHT:
            return _tmap(_java_value_of(a.cls, b), lambda y, _: self.converted(op, a, y, a, b))
        if how == _CONVERT_LEFT:
            return _tmap(_java_value_of(b.cls, a), lambda x, _: self.converted(op, x, b, a, b))
        if a.cls == BIGDEC:  # BigDecimal.compareTo (literals only)
            c = (int(a.v) > int(b.v)) - (int(a.v) < int(b.v))
            return _Out(TRUE if _CMP_INT[op](c) else FALSE)
        if a.cls == BOOL:
            return _Out(_bool_compare(op, a.v, b.v))
        if a.cls == STRING:
            return _Out(_string_compare(op, a.v, b.v))
        return _Out(_numeric_compare(op, how, a, b))

    def mismatch(self, *leaves: _Leaf) -> _Out:
        """FALSE (NULL where a value is null, unless that is decided outside or moot)."""
        return _Out(FALSE) if self.nulls_outside or self.positive else _false(*leaves)

    def converted(self, op: str, a: Any, b: Any, *sources: _Leaf) -> _Node:
        if isinstance(a, _Special) or isinstance(b, _Special):  # NumberFormatException
            return self.mismatch(*sources)
        return self.compare_pair(op, a, b)

    # -- boolean expressions --------------------------------------------------------------

    def condition(self, e: Expression, positive: bool = False) -> _Bool:
        """A boolean context (AND / OR / NOT operand, the whole filter): identifiers are cast
        (``createBooleanCast``: a Boolean as it is, anything else FALSE).

        ``positive``: only where the result is TRUE matters (the whole filter for
        :func:`matches`, and what AND / OR combine of it), so a mismatch may be FALSE
        where the value is null (no NULL guard)."""
        if isinstance(e, Identifier):
            b = _result(_tmap(self.value(e), lambda x, _: _boolean_cast(x, positive)))
            return _Bool(self.close(b.v), self.close(b.threw))
        return self.boolean(e, positive)

    def boolean(self, e: Expression, positive: bool = False) -> _Bool:
        saved = self.positive
        self.positive = False
        try:
            b = self._boolean(e, positive)
        finally:
            self.positive = saved
        return _Bool(self.close(b.v), self.close(b.threw))

    def _boolean(self, e: Expression, positive: bool) -> _Bool:
        if isinstance(e, BooleanLiteral):
            return _Bool(TRUE if e.value else FALSE)
        if isinstance(e, NullLiteral):
            return _Bool(NULL_BOOL)
        if isinstance(e, And):
            return _bool_and(self.condition(e.left, positive), self.condition(e.right, positive))
        if isinstance(e, Or):
            return _bool_or(self.condition(e.left, positive), self.condition(e.right, positive))
        if isinstance(e, Not):
            b = self.condition(e.operand)
            return _Bool(_not(b.v), b.threw)
        if isinstance(e, Comparison):
            left, right = self.value(e.left), self.value(e.right)
            self.positive = positive and e.op != "<>"
            return self.compare(e.op, left, right)
        if isinstance(e, Between):
            return self.between(e, positive)
        if isinstance(e, IsNull):  # doCreateEqual(x, NULL) and NOT of it
            tree = _tmap(self.value(e.operand), lambda x, _: _is_null_leaf(x))
            b = _result(tree)
            return _Bool(_not(b.v), b.threw) if e.negated else b
        if isinstance(e, Like):
            regex = like_regex(e.pattern, e.escape)
            safe = _like_misses_typed_text(e.pattern, e.escape)
            x = self.value(e.operand)
            moot = positive and not e.negated
            b = _result(_tmap(x, lambda leaf, _: _like_leaf(leaf, regex, safe, moot)))
            return _Bool(_not(b.v), b.threw) if e.negated else b
        if isinstance(e, In):
            members = tuple(dict.fromkeys(e.values))
            b = _result(_tmap(self.value(e.operand), lambda x, _: _in_leaf(x, members)))
            return _Bool(_not(b.v), b.threw) if e.negated else b
        if isinstance(e, (StringLiteral, NumberLiteral, Identifier, Negate, Arithmetic)):
            raise TypeError(f"filter_column: {e} is not a boolean expression")
        if isinstance(e, ConvertStrings):
            raise TypeError(f"filter_column: {e} may only be the whole filter")
        raise TypeError(f"filter_column: unknown expression node {e!r}")

    def between(self, e: Between, positive: bool) -> _Bool:
        """``createBetween`` = ``x >= low AND x <= high``; NOT BETWEEN = ``x < low OR x > high``.
        With static bounds both comparisons are made leaf by leaf in one CASE."""
        ops = ("<", ">") if e.negated else (">=", "<=")
        x, low, high = self.value(e.operand), self.value(e.low), self.value(e.high)
        self.positive = positive  # AND / OR of the two comparisons
        if (
            isinstance(low, _Leaf)
            and isinstance(high, _Leaf)
            and _lit_num(low) is not None
            and _lit_num(high) is not None
        ):
            combine = _or if e.negated else _and

            def per_leaf(a: Any, _: _Choice) -> _Node:
                if not isinstance(a, _Leaf):
                    return a
                if a.cls == UNTYPED:
                    return _tmap(_untyped_as(a, low.cls), per_leaf)
                t1 = self.compare_pair(ops[0], a, low)
                t2 = self.compare_pair(ops[1], a, high)
                if isinstance(t1, _Out) and isinstance(t2, _Out):
                    return _Out(combine(t1.v, t2.v))
                return _graft(
                    t1,
                    t2,
                    lambda p, q: (
                        _Out(combine(p.v, q.v))
                        if isinstance(p, _Out) and isinstance(q, _Out)
                        else (p if not isinstance(p, _Out) else q)
                    ),
                )

            return _result(_tmap(x, per_leaf))
        first = self.compare(ops[0], x, low)
        second = self.compare(ops[1], x, high)
        return _bool_or(first, second) if e.negated else _bool_and(first, second)


_CMP_INT: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


def _bool_and(a: _Bool, b: _Bool) -> _Bool:
    """``ANDExpression.evaluate``: stops at the first FALSE operand."""
    threw = _or(a.threw, _and(_fn("coalesce", a.v, TRUE), b.threw)) if b.threw != FALSE else a.threw
    return _Bool(_and(a.v, b.v), threw)


def _bool_or(a: _Bool, b: _Bool) -> _Bool:
    """``ORExpression.evaluate``: stops at the first TRUE operand."""
    threw = (
        _or(a.threw, _and(_not(_fn("coalesce", a.v, FALSE)), b.threw))
        if b.threw != FALSE
        else a.threw
    )
    return _Bool(_or(a.v, b.v), threw)


def _or_false(e: _IR) -> _IR:
    """``coalesce(e, FALSE)``, simplified (a guarded constant is that constant)."""
    if _never_null(e):
        return e
    if (
        e[0] == "case"
        and all(v in (FALSE, NULL_BOOL) for _, v in e[1])
        and e[2]
        in (
            FALSE,
            NULL_BOOL,
        )
    ):
        return FALSE
    return _fn("coalesce", e, FALSE)


_SIZE_LIMIT = 3000
"""Above this many expression nodes (counted as Spark sees them, repeats included) an
operation collapses its bigger operand into a struct computed once (:meth:`_Compiler.collapse`)."""

_PAYLOAD_TYPES = {
    BOOL: "boolean",
    BYTE: "bigint",
    SHORT: "bigint",
    INT: "bigint",
    LONG: "bigint",
    FLOAT: "float",
    DOUBLE: "double",
    STRING: "string",
    UNTYPED: "string",
}


def _ir_size(e: _IR, memo: dict[int, int]) -> int:
    """Nodes in ``e`` counted as Spark sees them (a shared subexpression once per use)."""
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    head = e[0]
    if head == "case":
        n = 1 + sum(_ir_size(c, memo) + _ir_size(v, memo) for c, v in e[1]) + _ir_size(e[2], memo)
    elif head == "fn":
        n = 1 + sum(_ir_size(a, memo) for a in e[2])
    elif head == "let":
        n = 1 + _ir_size(e[2], memo) + _ir_size(e[3], memo)
    else:
        n = 1
    memo[id(e)] = n
    return n


def _tree_size(node: _Node) -> int:
    memo: dict[int, int] = {}

    def size(x: _Node) -> int:
        if isinstance(x, _Switch):
            total = sum(_ir_size(c, memo) + size(child) for c, child in x.cases)
            return total + (size(x.default) if x.default is not None else 0)
        if isinstance(x, _Leaf):
            payload = _ir_size(x.v, memo) if isinstance(x.v, tuple) else 1
            return payload + _ir_size(x.isnull, memo)
        if isinstance(x, _Out):
            return _ir_size(x.v, memo)
        return 1

    return size(node)


def _leaf_count(node: _Node) -> int:
    return sum(1 for _ in _leaves(node))


def _nfe_throws(x: Any) -> _Node:
    """In ``asNumber`` a failed conversion throws (in ``compare`` it is FALSE)."""
    return _THROW if isinstance(x, _Special) else x


def _value_isnull(node: _Node) -> _IR:
    """Where a value is null (a thrown evaluation counts as not null: it does not matter)."""

    def f(leaf: Any) -> _IR:
        if isinstance(leaf, _Leaf):
            return leaf.isnull
        return TRUE if leaf is _NULL else FALSE

    return _flatten(node, f, FALSE)


def _is_null_leaf(x: Any) -> _Node:
    if isinstance(x, _Leaf):
        return _Out(x.isnull)
    return _Out(TRUE) if x is _NULL else x


def _boolean_cast(x: Any, moot: bool) -> _Node:
    """``createBooleanCast`` (``moot``: NULL and FALSE are one here)."""
    if not isinstance(x, _Leaf):
        return x
    if x.cls == BOOL:
        return _Out(x.v)
    if x.cls == UNTYPED:  # the lenient rule: Boolean.valueOf
        return _Out(_eq(_fn("lower", x.v), _lit("string", "true")))
    return _Out(FALSE) if moot else _false(x)


def _like_leaf(x: Any, regex: str, safe: bool, moot: bool) -> _Node:
    """``LikeExpression``: a String matches or not; anything else is FALSE. ``safe``: the
    pattern matches no typed number's or boolean's text, so their text can be matched too.
    ``moot``: NULL and FALSE are one here."""
    if not isinstance(x, _Leaf):
        return x
    if x.cls in (STRING, UNTYPED):
        return _Out(_fn("rlike", x.v, params=(regex,)))
    if safe and x.text is not None:
        return _Out(_fn("rlike", x.text, params=(regex,)))
    return _Out(FALSE) if moot else _false(x)


def _in_leaf(x: Any, members: tuple[str, ...]) -> _Node:
    """``createInExpression``: a String is in the list or not; anything else is NULL."""
    if not isinstance(x, _Leaf):
        return x
    if x.cls in (STRING, UNTYPED):
        return _Out(_fn("isin", x.v, params=members))
    return _Out(NULL_BOOL)


_JAVA_DECIMAL_TEXT = r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
_TYPED_TEXT = {
    BOOL: r"(?i:true|false)",
    **dict.fromkeys(_INTEGRAL, r"[+-]?[0-9]+"),
    FLOAT: _JAVA_DECIMAL_TEXT,
    DOUBLE: _JAVA_DECIMAL_TEXT,
    STRING: r"(?s:.*)",
    UNTYPED: r"(?s:.*)",
}
"""What a typed value's text can be (SPEC §3.1: normalise rejects anything else)."""

# letters of the typed texts: true / false (any case), NaN, Infinity, digits, sign, point, e
_TYPED_TEXT_CHARS = frozenset("0123456789+-.eENaInfityTRUFALSrulsTRUEFALSE")


def _like_misses_typed_text(pattern: str, escape: str | None) -> bool:
    """True if the pattern has a literal character no typed non-string text has."""
    if escape is not None and not 0x10 <= ord(escape) <= 0xFF and escape * 2 in pattern:
        return False  # Artemis's regex has other literal characters then (like_regex)
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if (
            escape is not None
            and c == escape
            and i + 1 < len(pattern)
            and pattern[i + 1] in ("_", "%", escape)
        ):
            i += 1
            c = pattern[i]
        elif c in "%_":
            i += 1
            continue
        if c not in _TYPED_TEXT_CHARS:
            return True
        i += 1
    return False


def _untyped_number(x: _Leaf) -> _Node:
    """An untyped text where a number is wanted: a Long if it is an integer in range, a
    Double if it reads as a decimal, else the String it is. (One regex a row: the String
    first; in the first two branches the text is not null.)"""
    text = x.v
    numeric = _fn("rlike", text, params=(_NUM_PATTERN,))
    lv = _fn("try_cast", text, params=("bigint",))
    dv = _fn("try_cast", text, params=("double",))
    return _switch(
        [
            (_not(numeric), _Leaf(STRING, text, FALSE, text=x.text)),
            (_not(_isnull(lv)), _Leaf(LONG, lv, FALSE, dv=dv, text=x.text)),
        ],
        _Leaf(DOUBLE, dv, x.isnull, text=x.text),
        exclusive=False,
    )


def _untyped_as(x: _Leaf, counterpart: int) -> _Node:
    """An untyped value against a value of class ``counterpart`` (the lenient rule)."""
    if counterpart == BOOL:
        return _Leaf(BOOL, _eq(_fn("lower", x.v), _lit("string", "true")), x.isnull, text=x.text)
    if counterpart == STRING:
        return _Leaf(STRING, x.v, x.isnull, text=x.text)
    return _untyped_number(x)  # a number, or another untyped value


def _java_string(x: _Leaf) -> _IR:
    """``String.valueOf`` of a value (``"a" + x``): Spark casts numbers as Java's toString."""
    if x.cls == BIGDEC:
        return _lit("string", str(int(x.v)))
    if x.cls in (STRING, UNTYPED):
        return x.v
    n = _lit_num(x)
    if n is not None and x.cls in _INTEGRAL:
        return _lit("string", str(int(n)))
    return _fn("cast", x.v, params=("string",))


def _integral_operand(x: _Leaf, bits: int) -> _IR:
    """``intValue()`` / ``longValue()`` of an integral or BigDecimal operand."""
    if x.cls == BIGDEC:
        return _lit("bigint", _wrap(int(x.v), bits))
    return x.v


def _py_op(op: str, x: Any, y: Any) -> Any:
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    return x * y


def _wrap32(e: _IR) -> _IR:
    """The low 32 bits of a bigint, sign-extended (Java int arithmetic)."""
    if _is_lit(e):
        v = _wrap(int(_lit_value(e)), 32)
        return _lit("bigint", v)
    return _fn("shiftright", _fn("shiftleft", e, params=(32,)), params=(32,))


_TRY = {"+": "try_add", "-": "try_subtract", "*": "try_multiply"}


def _wrap64(op: str, x: _IR, y: _IR) -> _IR:
    """Java long arithmetic: exact unless it overflows, then wrapped around. Spark's own
    operators fail on an overflow and ``try_`` ones give NULL: then the exact result in
    decimal(38,0), reduced modulo 2^64."""
    dec = "decimal(20,0)"
    exact = _fn(op, _fn("cast", x, params=(dec,)), _fn("cast", y, params=(dec,)))
    return _fn("coalesce", _fn(_TRY[op], x, y), _fn("decimal_wrap64", exact))


def _java_divide(x: _IR, y: _IR) -> _IR:
    """Java's double division: x / ±0.0 is x * ±Infinity (±Infinity, NaN for 0 or NaN),
    never NULL; Spark's division by zero is NULL (``try_divide``) or an error."""
    if _is_lit(x) and _is_lit(y):
        return _lit("double", _py_divide(_lit_value(x), _lit_value(y)))
    if _is_lit(y) and _lit_value(y) != 0:
        return _fn("try_divide", x, y)
    by_zero = _fn("*", x, _fn("pow", y, _lit("double", -1.0)))
    if _is_lit(y):
        return by_zero
    return _fn("coalesce", _fn("try_divide", x, y), by_zero)


def _py_divide(x: float, y: float) -> float:
    if y == 0:
        if math.isnan(x) or x == 0:
            return math.nan
        return math.inf if (x < 0) == (math.copysign(1.0, y) < 0) else -math.inf
    return x / y


def _java_remainder(x: _IR, y: _IR) -> _IR:
    """Java's double ``%`` (the dividend's sign; x % ±0.0 is NaN, never NULL)."""
    if _is_lit(x) and _is_lit(y):
        a, b = _lit_value(x), _lit_value(y)
        if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
            return NAN
        return _lit("double", a if math.isinf(b) else math.fmod(a, b))
    if _is_lit(y):
        return _fn("*", x, NAN) if _lit_value(y) == 0 else _fn("try_mod", x, y)
    return _fn("coalesce", _fn("try_mod", x, y), _fn("*", _fn("*", x, y), NAN))


# --------------------------------------------------------------------------------------
# Identifiers: message properties and header fields
# --------------------------------------------------------------------------------------


def _property(name: str) -> _Node:
    """``properties[name]`` typed by ``property_types[name]`` (literal keys, safe for any
    name): a switch over the eight types and untyped (no entry); a type name outside the
    eight (which normalise rejects) gives an unspecified result."""
    text = ("map", "properties", name)
    t = ("map", "property_types", name)
    isnull = _isnull(text)
    lv = _fn("try_cast", text, params=("bigint",))
    dv = _fn("try_cast", text, params=("double",))
    leaves = {
        BOOL: _Leaf(BOOL, _eq(_fn("lower", text), _lit("string", "true")), isnull, text=text),
        FLOAT: _Leaf(FLOAT, _fn("try_cast", text, params=("float",)), isnull, text=text),
        DOUBLE: _Leaf(DOUBLE, dv, isnull, text=text),
        STRING: _Leaf(STRING, text, isnull, text=text),
        **{k: _Leaf(k, lv, isnull, dv=dv, text=text) for k in _INTEGRAL},
    }
    cases: list[tuple[_IR, _Node]] = [(_isnull(t), _Leaf(UNTYPED, text, isnull, text=text))]
    for type_name, cls in _TYPE_NAMES.items():
        cases.append((_eq(t, _lit("string", type_name)), leaves[cls]))
    return _Switch(tuple(cases), None, exclusive=True)


def _header(name: str) -> _Node | None:
    """Header fields of FilterImpl, with the SPEC §3.1 defaults; None for a property."""
    if name == "AMQPriority":  # (int) getPriority()
        v = _fn("coalesce", _fn("cast", ("col", "priority"), params=("bigint",)), _lit("bigint", 4))
        return _Leaf(INT, v)
    if name == "AMQExpiration":  # getExpiration(): a long, 0 for never
        exp = ("col", "expiration")
        v = _case([(_isnull(exp), _lit("bigint", 0))], _fn("unix_millis", exp))
        return _Leaf(LONG, v)
    if name == "AMQTimestamp":  # getTimestamp(): a long
        sent = ("col", "sent_at")
        return _Leaf(LONG, _fn("unix_millis", sent), _isnull(sent))
    if name == "AMQDurable":
        durable = _fn("=", ("col", "durable"), FALSE)
        v = _case([(durable, _lit("string", "NON_DURABLE"))], _lit("string", "DURABLE"))
        return _Leaf(STRING, v)
    if name in ("AMQUserID", "AMQAddress"):  # a null header falls back to the property
        column = ("col", "user_id" if name == "AMQUserID" else "address")
        return _switch(
            [(_not(_isnull(column)), _Leaf(STRING, column))], _property(name), exclusive=False
        )
    return None


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def _blank(text: str) -> bool:
    return all(c <= " " for c in text)


def _compile(filter: str | Expression, positive: bool = False) -> tuple[_Compiler, _Bool] | None:
    if isinstance(filter, str):
        if _blank(filter):
            return None
        filter = parse_filter(filter)
    if not isinstance(filter, Expression):
        raise TypeError(
            f"filter_column: filter must be a str or an Expression, got {type(filter).__name__}"
        )
    convert = isinstance(filter, ConvertStrings)
    if convert:
        assert isinstance(filter, ConvertStrings)
        filter = filter.operand
    compiler = _Compiler(convert)
    return compiler, compiler.condition(filter, positive)


_INTERPRETED_ABOVE = 3000
"""A compiled filter of more expression nodes than this (deep arithmetic over several
properties: rare shapes) is evaluated by Spark's interpreter inside generated code (wrapped
in a ``transform``, for which Spark generates no code), so that a projection of queue
filters stays within the 64 KB a generated Java method may have. Interpreted, such a
filter costs several times more a row; below the limit (two properties compared: about
1000 nodes) code is generated. Whole-stage code of many large filters can still pass
64 KB: Spark then falls back to code generated expression by expression (except in its
test mode, ``SPARK_TESTING``, where it fails)."""


def _column(compiler: _Compiler, e: _IR) -> Column:
    if _ir_size(e, {}) > _INTERPRETED_ABOVE:
        n = len(compiler.bindings)
        e = ("let", n, TRUE, e)
    return compiler.render(e)


def filter_column(filter: str | Expression) -> Column:
    """Compile a filter to a three-valued boolean Column: True, False or NULL (unknown).

    NULL also where Artemis's evaluation throws (``FilterImpl.match`` is then false; a
    NOT around the filter does not make it true). Reads the message columns of SPEC §3.1
    by name (``properties``, ``property_types``, ``priority``, ``expiration``,
    ``durable``, ``sent_at``, ``user_id``, ``address``), only those the filter mentions
    (a property: both maps). A blank string is "no filter" (as
    ``FilterImpl.createFilter``) and gives ``lit(True)``.

    :param filter: filter text or an AST from :func:`parse_filter`.
    :return: a boolean Column.
    :raises FilterSyntaxError: if the text does not parse.

    Example::

        df.select(filter_column("price > 100 AND color IN ('red', 'green')").alias("hit"))
    """
    compiled = _compile(filter)
    if compiled is None:
        return F.lit(True)
    compiler, b = compiled
    v = b.v if b.threw == FALSE else _case([(b.threw, NULL_BOOL)], b.v)
    return _column(compiler, v)


def matches(filter: str | Expression | None) -> Column:
    """True exactly where ``FilterImpl.match`` is: the filter is TRUE and did not throw
    (``coalesce(filter_column(filter), FALSE)``).

    :param filter: filter text, an AST, or None (no filter: every row matches).
    :return: a non-null boolean Column.

    Example::

        queue_rows = messages.where(matches(queue.filter))
    """
    if filter is None:
        return F.lit(True)
    compiled = _compile(filter, positive=True)
    if compiled is None:
        return F.lit(True)
    compiler, b = compiled
    v = b.v if b.threw == FALSE else _case([(b.threw, FALSE)], b.v)
    return _column(compiler, _or_false(v))
