"""Artemis filter expressions (SPEC §5.1) parsed to an AST: the grammar, pure Python.

Compiled to Spark Columns by :mod:`routing.plan.filters`.

The grammar is a port of Artemis's JavaCC selector grammar
(``artemis-selector/src/main/javacc/StrictParser.jj``): same tokens, same
precedence, same parse-time checks (``ComparisonExpression.checkLessThanOperand``
and friends), so a filter Artemis rejects is rejected here with a
:class:`FilterSyntaxError`, and one it accepts parses to the same tree shape.

Evaluation (compiled by :mod:`routing.plan.filters`) is Artemis 2.44's
(``ComparisonExpression``, ``UnaryExpression``, ``ArithmeticExpression``, ``LogicExpression``,
``ConstantExpression``, ``FilterImpl.match``): every value has a Java class, and the class
decides. ``tests/test_filters_artemis.py`` checks the compiler against Artemis's own code.

Values:

- A typed property (``property_types``, SPEC §3.1) is the object its type names: Boolean
  (``true``/``false``, any case), Byte, Short, Integer, Long, Float (the float nearest the
  text: a float 0.1 is not the double 0.1), Double, String.
- Literals: an integer is an Integer if it fits in an int, else a Long, else a BigDecimal,
  except that a BigDecimal whose low 64 bits (``longValue``) fit in an int becomes that
  Integer (``createFromDecimal``: ``18446744073709551616`` is the Integer 0); hex and octal
  alike (beyond a long: refused); a literal with a point or an exponent is a Double. The
  parser keeps ``-5`` a negation of 5, evaluated, so ``-2147483648`` is a Long and
  ``-9223372036854775808`` a Long (negating that BigDecimal gives Long.MIN_VALUE).
- Header fields (``FilterImpl.getHeaderFieldValue``, on this project's columns):
  ``AMQPriority`` an Integer (null priority: 4), ``AMQTimestamp`` a Long (null ``sent_at``:
  null), ``AMQExpiration`` a Long (null: 0), ``AMQDurable`` the String ``DURABLE`` or
  ``NON_DURABLE`` (null durable: durable), ``AMQUserID`` / ``AMQAddress`` the String of
  ``user_id`` / ``address``, or where that is null the property of that name (typed or
  not). ``AMQSize``, ``AMQGroupID`` and any other name are properties.

Comparisons (``compare``, ``doCreateEqual``):

- Classes promote as ``compare``'s chain of ifs, asymmetries included: Byte meets
  Short/Integer/Long as an integer, Float as a float, Double as a double; Short the same
  but for Byte; Integer meets Long, Float, Double; Long takes an Integer, meets a Float as a
  float (the long rounded to a float) and a Double as a double; Float takes an Integer or
  Long as a float and meets a Double as a double; Double takes Integer, Long, Float. Any
  other pair of classes is a mismatch, FALSE (not unknown): Integer vs Short, Long vs Byte,
  Double vs Short, a String vs a number, a Boolean vs anything but a Boolean. One class:
  ``compareTo`` (false < true; Float and Double put -0.0 below 0.0 and NaN equal to itself,
  above everything; String by UTF-16 code units; BigDecimal by value).
- ``=`` evaluates both sides: both null is TRUE, the left null NULL, the right null FALSE.
  ``<>`` is NOT (``=``). ``<``, ``<=``, ``>``, ``>=``: NULL if the left is null (the right
  is then not evaluated) or the right is. ``IS [NOT] NULL`` is never unknown; ``BETWEEN``
  is ``x >= low AND x <= high``, ``NOT BETWEEN`` is ``x < low OR x > high``; NOT NULL is
  NULL; AND / OR are three-valued.
- LIKE on a non-String is FALSE; IN on a non-String is NULL; an identifier used as a
  condition (``createBooleanCast``) is its Boolean, FALSE for any other class.

Arithmetic (``ArithmeticExpression``, ``UnaryExpression.createNegate``):

- ``+ - *`` in ints (32 bits, wrapping around) unless an operand is a Long (64 bits,
  wrapping) or a Float or Double (doubles); Byte, Short and BigDecimal count as ints
  (``intValue``). ``/`` and ``%`` always in doubles, Java's: x / ±0.0 is ±Infinity (NaN for
  0 or NaN), x % 0.0 is NaN. ``+`` with a String on the left concatenates Java's
  ``toString`` of the right (``'a' + 7.0`` is ``'a7.0'``, ``'a' + TRUE`` is ``'atrue'``);
  any other operand that is not a Number throws.
- Unary minus: an Integer or Long wraps (-MIN is MIN), a Float or Double flips its sign
  (``-0.0``), a BigDecimal negates; a Short or Byte throws ("Don't know how to negate");
  anything else is NULL.

Exceptions: ``FilterImpl.match`` catches them, so a filter whose evaluation throws does not
match (:func:`~routing.plan.filters.matches` is FALSE there, the three-valued
``filter_column`` NULL). Artemis's evaluation order decides whether a throwing operand is
reached: AND stops at its first FALSE operand, OR at its first TRUE, a comparison or an
arithmetic operation skips its right side when the left is null, ``=`` evaluates both. So
``a = 1 OR b - 1 > 0`` with a String ``b`` matches where ``a = 1`` and nowhere else.

``convert_string_expressions:`` (:class:`ConvertStrings`): a String compared with a
Boolean, Byte, ..., Double (on either side) is converted with ``Boolean.valueOf``,
``Byte.valueOf``, ..., ``Double.valueOf``, and a NumberFormatException makes the comparison
FALSE; a String operand of arithmetic is ``Double.valueOf`` when it contains a point, else
``Long.valueOf``, and throws when that fails. Two approximations of Java's parsers: the
integral ``valueOf`` take ASCII digits only (Java also takes other Unicode decimal digits),
and ``Float/Double.valueOf`` take Java's decimal grammar (trimmed of characters up to
U+0020, a sign, NaN, Infinity, digits with a point and an exponent, an f/F/d/D suffix) but
not its hexadecimal one (``0x1p3``): such texts are a NumberFormatException here.

Untyped properties, the lake's lenient rule (SPEC §3.1): an untyped value is a String,
except where its counterpart asks for a number or a boolean:

- against a number (a typed number, a numeric literal or header, an arithmetic result) or
  another untyped value, it is a Long when its text is an integer in the long range, a
  Double when it reads as ``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`` (no spaces,
  NaN, Infinity, hex or Java suffixes), and otherwise the String it is: a mismatch, FALSE
  (with ``convert_string_expressions:``, converted as any String). So two untyped values
  compare as numbers if both read as numbers, as strings if neither, and are FALSE if one
  only; and an untyped integer meets a Short as a Long does (FALSE);
- against a boolean: ``Boolean.valueOf`` (only "true", any case, is TRUE);
- against a string (a literal, a typed string, a string header): a String;
- in arithmetic (either side, and unary minus): the Long or Double it reads as, else a
  String (``+`` with it on the left concatenates, anything else throws). An untyped integer
  is a Long and wraps around as one: Artemis's arithmetic, chosen over the exact long
  arithmetic falling back to doubles this lake had before typed properties;
- LIKE and IN see the String; as a condition it is ``Boolean.valueOf``.

Also: a type name outside the eight (normalise rejects such rows) gives an unspecified
result; a blank filter is no filter (``FilterImpl.createFilter``); XPATH / XQUERY are
refused (they need the body).

Compiled Columns use ``pyspark.sql.functions`` only; user text never reaches SQL
text, property names are literal map keys.

.. note:: Evolving
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "HEADER_FIELDS",
    "And",
    "Arithmetic",
    "Between",
    "BooleanLiteral",
    "Comparison",
    "ConvertStrings",
    "Expression",
    "FilterSyntaxError",
    "Identifier",
    "In",
    "IsNull",
    "Like",
    "Negate",
    "Not",
    "NullLiteral",
    "NumberLiteral",
    "Or",
    "StringLiteral",
    "like_regex",
    "like_regex_error",
    "parse_filter",
]

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

#: Header identifiers of ``FilterImpl`` that this job supports (case-sensitive, as in Artemis).
HEADER_FIELDS = frozenset(
    {"AMQPriority", "AMQExpiration", "AMQDurable", "AMQTimestamp", "AMQUserID", "AMQAddress"}
)

_KEYWORDS = frozenset(
    {
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "LIKE",
        "ESCAPE",
        "IN",
        "IS",
        "TRUE",
        "FALSE",
        "NULL",
        "XPATH",
        "XQUERY",
    }
)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class FilterSyntaxError(ValueError):
    """A filter string Artemis would refuse (``FilterImpl.createFilter`` throws).

    :param text: the whole filter string.
    :param position: 0-based character offset of the offending token in ``text``.
    :param expected: what the parser wanted there.
    :param found: the text found there ("" at the end of the input).
    """

    def __init__(self, text: str, position: int, expected: str, found: str = "") -> None:
        self.text = text
        self.position = position
        self.expected = expected
        self.found = found
        shown = f"'{found}'" if found else "end of input"
        super().__init__(f"at position {position}: expected {expected}, found {shown}")

    def __reduce__(self):  # keep it picklable (Spark ships exceptions around)
        return (type(self), (self.text, self.position, self.expected, self.found))


# --------------------------------------------------------------------------------------
# AST (frozen dataclasses; ``str(node)`` renders filter text that parses back to ``node``)
# --------------------------------------------------------------------------------------

_ID_RE = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*", re.ASCII)


class Expression:
    """Base class of filter AST nodes; ``str()`` gives equivalent filter text."""

    __slots__ = ()


@dataclass(frozen=True)
class StringLiteral(Expression):
    """``'text'`` (``''`` inside stands for one quote)."""

    value: str

    def __str__(self) -> str:
        return "'" + self.value.replace("'", "''") + "'"


@dataclass(frozen=True)
class NumberLiteral(Expression):
    """An integer or a double literal, as written (the parser makes no negative ones: ``-5`` is
    ``Negate(NumberLiteral(5))``, as in Artemis). Its Java class follows
    ``ConstantExpression``: an integer is an Integer when it fits in an int, else a Long,
    else a BigDecimal (see the module docstring); a literal with a point or an exponent is a Double."""

    value: int | float

    def __str__(self) -> str:
        v = self.value
        if isinstance(v, float):
            if math.isinf(v):
                return "-1e999" if v < 0 else "1e999"
            return repr(v)
        return str(v)


@dataclass(frozen=True)
class BooleanLiteral(Expression):
    """``TRUE`` / ``FALSE``."""

    value: bool

    def __str__(self) -> str:
        return "TRUE" if self.value else "FALSE"


@dataclass(frozen=True)
class NullLiteral(Expression):
    """``NULL`` (a boolean constant in Artemis: ``ConstantExpression.NULL``)."""

    def __str__(self) -> str:
        return "NULL"


@dataclass(frozen=True)
class Identifier(Expression):
    """A header field (:data:`HEADER_FIELDS`) or else a message property."""

    name: str

    def __str__(self) -> str:
        if _ID_RE.fullmatch(self.name) and self.name.upper() not in _KEYWORDS:
            return self.name
        return '"' + self.name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Negate(Expression):
    """Unary minus, also of a literal (unary plus is dropped by the parser, as in Artemis)."""

    operand: Expression

    def __str__(self) -> str:
        return f"(- {self.operand})"


@dataclass(frozen=True)
class Arithmetic(Expression):
    """``+ - * / %`` (``ArithmeticExpression``): int, long or double arithmetic by the operands'
    classes, ``/`` and ``%`` always double; ``+`` with a String on the left concatenates."""

    op: str
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Comparison(Expression):
    """``= <> < <= > >=``."""

    op: str
    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Like(Expression):
    """``[NOT] LIKE 'pattern' [ESCAPE 'c']``."""

    operand: Expression
    pattern: str
    escape: str | None = None
    negated: bool = False

    def __str__(self) -> str:
        kw = "NOT LIKE" if self.negated else "LIKE"
        esc = f" ESCAPE {StringLiteral(self.escape)}" if self.escape is not None else ""
        return f"({self.operand} {kw} {StringLiteral(self.pattern)}{esc})"


@dataclass(frozen=True)
class In(Expression):
    """``identifier [NOT] IN ('a', 'b', ...)`` (string members only, as the grammar)."""

    operand: Identifier
    values: tuple[str, ...]
    negated: bool = False

    def __str__(self) -> str:
        kw = "NOT IN" if self.negated else "IN"
        members = ", ".join(str(StringLiteral(v)) for v in self.values)
        return f"({self.operand} {kw} ({members}))"


@dataclass(frozen=True)
class Between(Expression):
    """``x [NOT] BETWEEN low AND high`` = ``x >= low AND x <= high`` (negated: ``x < low OR x > high``)."""

    operand: Expression
    low: Expression
    high: Expression
    negated: bool = False

    def __str__(self) -> str:
        kw = "NOT BETWEEN" if self.negated else "BETWEEN"
        return f"({self.operand} {kw} {self.low} AND {self.high})"


@dataclass(frozen=True)
class IsNull(Expression):
    """``x IS [NOT] NULL`` (never unknown)."""

    operand: Expression
    negated: bool = False

    def __str__(self) -> str:
        return f"({self.operand} IS {'NOT ' if self.negated else ''}NULL)"


@dataclass(frozen=True)
class Not(Expression):
    """``NOT x``; binds tighter than comparisons, as in Artemis."""

    operand: Expression

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True)
class And(Expression):
    """Three-valued ``AND``."""

    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True)
class Or(Expression):
    """Three-valued ``OR``."""

    left: Expression
    right: Expression

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True)
class ConvertStrings(Expression):
    """A filter written with the ``convert_string_expressions:`` prefix (the root only).

    Artemis then converts a String compared with a number or a boolean (``Integer.valueOf``
    and friends) and a String operand of arithmetic (``Long.valueOf`` / ``Double.valueOf``).
    """

    operand: Expression

    def __str__(self) -> str:
        return f"convert_string_expressions:{self.operand}"


#: Nodes Artemis types as ``BooleanExpression`` (valid operands of AND / OR / NOT).
_BOOLEAN_NODES = (Comparison, Like, In, Between, IsNull, Not, And, Or, BooleanLiteral, NullLiteral)
_CONSTANTS = (StringLiteral, NumberLiteral, BooleanLiteral, NullLiteral)


# --------------------------------------------------------------------------------------
# Tokens (StrictParser.jj / HyphenatedParser.jj, longest match, IGNORE_CASE, ASCII letters)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    kind: str  # a keyword, DECIMAL, HEX, OCTAL, FLOAT, STRING, ID, QUOTED_ID, OP or EOF
    text: str
    pos: int

    @property
    def end(self) -> int:
        return self.pos + len(self.text)


_WS = " \t\n\r\f"
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\r|\n)")  # needs its line end, as in the .jj
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_NUMBER_TOKENS = (  # declaration order breaks ties of equal length
    ("DECIMAL", re.compile(r"[1-9][0-9]*[lL]?")),
    ("HEX", re.compile(r"0[xX][0-9a-fA-F]+")),
    ("OCTAL", re.compile(r"0[0-7]*")),
    (
        "FLOAT",
        re.compile(
            r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
        ),
    ),
)
_STRING = re.compile(r"'(?:''|[^'])*'")
_QUOTED_ID = re.compile(r'"(?:""|[^"])*"')
_STRICT_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*", re.ASCII)
_HYPHEN_ID = re.compile(r"[A-Za-z_$][A-Za-z0-9_$\-]*", re.ASCII)
_OPS = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",")


def _tokenize(text: str, start: int, end: int, hyphenated: bool) -> list[_Token]:
    """Split ``text[start:end]`` into tokens; positions are offsets in ``text``."""
    tokens: list[_Token] = []
    ident = _HYPHEN_ID if hyphenated else _STRICT_ID
    i = start
    while i < end:
        c = text[i]
        if c in _WS:
            i += 1
            continue
        m = _LINE_COMMENT.match(text, i, end) or _BLOCK_COMMENT.match(text, i, end)
        if m:
            i = m.end()
            continue
        best: tuple[str, str] | None = None
        for kind, rx in _NUMBER_TOKENS:
            m = rx.match(text, i, end)
            if m and (best is None or len(m.group()) > len(best[1])):
                best = (kind, m.group())
        if best is None:
            m = ident.match(text, i, end)
            if m:
                word = m.group()
                best = (word.upper() if word.upper() in _KEYWORDS else "ID", word)
        if best is None and c == "'":
            m = _STRING.match(text, i, end)
            if not m:
                raise FilterSyntaxError(text, i, "a string literal closed by '", "")
            best = ("STRING", m.group())
        if best is None and c == '"' and not hyphenated:
            m = _QUOTED_ID.match(text, i, end)
            if not m:
                raise FilterSyntaxError(text, i, 'a quoted identifier closed by "', "")
            best = ("QUOTED_ID", m.group())
        if best is None:
            for op in _OPS:
                if text.startswith(op, i) and i + len(op) <= end:
                    best = ("OP", op)
                    break
        if best is None:
            raise FilterSyntaxError(text, i, "an operator, literal or identifier", c)
        tokens.append(_Token(best[0], best[1], i))
        i += len(best[1])
    tokens.append(_Token("EOF", "", end))
    return tokens


# --------------------------------------------------------------------------------------
# Parser (recursive descent over the .jj productions)
# --------------------------------------------------------------------------------------

_PREFIXES = {  # SelectorParser.parse: options in front of the selector
    "convert_string_expressions:": ("convert", True),
    "hyphenated_props:": ("hyphenated", True),
    "no_convert_string_expressions:": ("convert", False),
    "no_hyphenated_props:": ("hyphenated", False),
}


class _Parser:
    """One parse of one filter string."""

    def __init__(self, text: str) -> None:
        self.text = text
        start, end = 0, len(text)
        # FilterImpl.createFilter trims (String.trim: every char <= U+0020) before parsing.
        while start < end and text[start] <= " ":
            start += 1
        while end > start and text[end - 1] <= " ":
            end -= 1
        hyphenated = False
        self.convert = False
        matched = True
        while matched:
            matched = False
            for prefix, (option, value) in _PREFIXES.items():
                if text.startswith(prefix, start, end):
                    start += len(prefix)
                    if option == "hyphenated":
                        hyphenated = value
                    else:
                        self.convert = value
                    matched = True
                    break
        self.tokens = _tokenize(text, start, end, hyphenated)
        self.i = 0

    # -- token helpers ----------------------------------------------------------------

    def peek(self, k: int = 0) -> _Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def at(self, kind: str, text: str | None = None, k: int = 0) -> bool:
        t = self.peek(k)
        return t.kind == kind and (text is None or t.text == text)

    def at_op(self, *ops: str) -> bool:
        t = self.peek()
        return t.kind == "OP" and t.text in ops

    def take(self) -> _Token:
        t = self.peek()
        self.i += 1
        return t

    def fail(self, expected: str, token: _Token | None = None) -> FilterSyntaxError:
        t = token or self.peek()
        return FilterSyntaxError(self.text, t.pos, expected, t.text)

    def expect_op(self, op: str) -> _Token:
        if not self.at_op(op):
            raise self.fail(f"'{op}'")
        return self.take()

    def expect_kw(self, kw: str) -> _Token:
        if not self.at(kw):
            raise self.fail(kw)
        return self.take()

    def semantic(self, span: tuple[int, int], expected: str) -> FilterSyntaxError:
        """An error about the expression made of tokens ``span[0]`` up to (excluding) ``span[1]``."""
        first = self.tokens[span[0]]
        last = self.tokens[max(span[0], span[1] - 1)]
        return FilterSyntaxError(self.text, first.pos, expected, self.text[first.pos : last.end])

    # -- parse-time checks of ComparisonExpression / the parser ------------------------

    def as_boolean(self, e: Expression, span: tuple[int, int]) -> Expression:
        """``asBooleanExpression``: booleans pass, identifiers are cast, anything else is an error."""
        if isinstance(e, (*_BOOLEAN_NODES, Identifier)):
            return e
        raise self.semantic(span, "a boolean expression")

    def check_ordering_operand(self, e: Expression, span: tuple[int, int]) -> None:
        """``checkLessThanOperand``: only numbers and non-boolean expressions can be ordered."""
        if isinstance(e, _CONSTANTS) and not isinstance(e, NumberLiteral):
            raise self.semantic(span, "a numeric expression or an identifier")
        if isinstance(e, _BOOLEAN_NODES):
            raise self.semantic(span, "a numeric expression or an identifier")

    def check_equal_operand(self, e: Expression, span: tuple[int, int]) -> None:
        """``checkEqualOperand``: ``= NULL`` is refused (IS NULL is the way)."""
        if isinstance(e, NullLiteral):
            raise self.semantic(span, "an expression other than NULL (use IS NULL)")

    def spanned(self, production: Callable[[], Expression]) -> tuple[Expression, tuple[int, int]]:
        """Run a production; also return the token span it consumed (for error messages)."""
        start = self.i
        e = production()
        return e, (start, self.i)

    # -- productions -------------------------------------------------------------------

    def selector(self) -> Expression:
        e, span = self.spanned(self.or_expr)
        if not self.at("EOF"):
            raise self.fail("an operator or end of input")
        e = self.as_boolean(e, span)
        return ConvertStrings(e) if self.convert else e

    def or_expr(self) -> Expression:
        left, lspan = self.spanned(self.and_expr)
        while self.at("OR"):
            self.take()
            right, rspan = self.spanned(self.and_expr)
            left = Or(self.as_boolean(left, lspan), self.as_boolean(right, rspan))
        return left

    def and_expr(self) -> Expression:
        left, lspan = self.spanned(self.equality_expr)
        while self.at("AND"):
            self.take()
            right, rspan = self.spanned(self.equality_expr)
            left = And(self.as_boolean(left, lspan), self.as_boolean(right, rspan))
        return left

    def equality_expr(self) -> Expression:
        left, lspan = self.spanned(self.comparison_expr)
        while True:
            if self.at_op("=", "<>"):
                op = self.take().text
                right, rspan = self.spanned(self.comparison_expr)
                self.check_equal_operand(left, lspan)
                self.check_equal_operand(right, rspan)
                if (
                    isinstance(left, (BooleanLiteral, NullLiteral))
                    and isinstance(right, _CONSTANTS)
                    and not isinstance(right, (BooleanLiteral, NullLiteral))
                ):  # checkEqualOperandCompatibility
                    raise self.semantic(
                        rspan, "a boolean literal (compared with a boolean literal)"
                    )
                left = Comparison(op, left, right)
            elif self.at("IS"):
                self.take()
                negated = False
                if self.at("NOT"):
                    self.take()
                    negated = True
                if not self.at("NULL"):
                    raise self.fail("NULL" if negated else "NULL or NOT NULL")
                self.take()
                left = IsNull(left, negated)
            else:
                return left
            lspan = (lspan[0], self.i)

    def comparison_expr(self) -> Expression:
        left, lspan = self.spanned(self.add_expr)
        while True:
            negated = False
            if self.at("NOT") and self.peek(1).kind in ("LIKE", "BETWEEN", "IN"):
                self.take()
                negated = True
            if self.at_op("<", "<=", ">", ">="):
                op = self.take().text
                right, rspan = self.spanned(self.add_expr)
                self.check_ordering_operand(left, lspan)
                self.check_ordering_operand(right, rspan)
                left = Comparison(op, left, right)
            elif self.at("LIKE"):
                self.take()
                ptok = self.peek()
                pattern = self.string_literal()
                escape = None
                if self.at("ESCAPE"):
                    self.take()
                    etok = self.peek()
                    escape = self.string_literal()
                    if len(escape.encode("utf-16-le")) != 2:  # one Java char
                        raise self.fail("a single-character ESCAPE string", etok)
                problem = like_regex_error(pattern, escape)
                if problem is not None:  # Pattern.compile throws in LikeExpression
                    raise FilterSyntaxError(
                        self.text, ptok.pos, "a LIKE pattern Java can compile", ptok.text
                    )
                left = Like(left, pattern, escape, negated)
            elif self.at("BETWEEN"):
                self.take()
                low, low_span = self.spanned(self.add_expr)
                self.expect_kw("AND")
                high, high_span = self.spanned(self.add_expr)
                self.check_ordering_operand(left, lspan)
                self.check_ordering_operand(low, low_span)
                self.check_ordering_operand(high, high_span)
                left = Between(left, low, high, negated)
            elif self.at("IN"):
                if not isinstance(left, Identifier):
                    raise self.semantic(lspan, "an identifier before IN")
                self.take()
                self.expect_op("(")
                values = [self.string_literal()]
                while self.at_op(","):
                    self.take()
                    values.append(self.string_literal())
                if not self.at_op(")"):
                    raise self.fail("',' or ')'")
                self.take()
                left = In(left, tuple(values), negated)
            else:
                return left
            lspan = (lspan[0], self.i)

    def add_expr(self) -> Expression:
        left = self.mult_expr()
        while self.at_op("+", "-"):
            op = self.take().text
            left = Arithmetic(op, left, self.mult_expr())
        return left

    def mult_expr(self) -> Expression:
        left = self.unary_expr()
        while self.at_op("*", "/", "%"):
            op = self.take().text
            left = Arithmetic(op, left, self.unary_expr())
        return left

    def unary_expr(self) -> Expression:
        if self.at_op("+"):
            self.take()
            return self.unary_expr()  # Artemis returns the operand unchanged
        if self.at_op("-"):
            self.take()
            return Negate(self.unary_expr())  # not folded: Artemis negates at evaluation
        if self.at("NOT"):
            self.take()
            operand, span = self.spanned(self.unary_expr)
            return Not(self.as_boolean(operand, span))
        if self.at("XPATH") or self.at("XQUERY"):
            raise self.fail("an expression (XPATH and XQUERY filters are not supported)")
        return self.primary_expr()

    def primary_expr(self) -> Expression:
        t = self.peek()
        if t.kind == "OP" and t.text == "(":
            self.take()
            e = self.or_expr()
            self.expect_op(")")
            return e
        if t.kind == "ID":
            self.take()
            return Identifier(t.text)
        if t.kind == "QUOTED_ID":
            self.take()
            return Identifier(t.text[1:-1].replace('""', '"'))
        if t.kind == "STRING":
            return StringLiteral(self.string_literal())
        if t.kind in ("TRUE", "FALSE"):
            self.take()
            return BooleanLiteral(t.kind == "TRUE")
        if t.kind == "NULL":
            self.take()
            return NullLiteral()
        if t.kind == "DECIMAL":
            self.take()
            return NumberLiteral(int(t.text.rstrip("lL")))  # beyond a long: used as a double
        if t.kind in ("HEX", "OCTAL"):
            self.take()
            value = int(t.text[2:], 16) if t.kind == "HEX" else int(t.text, 8)
            if value > LONG_MAX:  # Long.parseLong throws in ConstantExpression
                raise self.fail(
                    f"a{' hexadecimal' if t.kind == 'HEX' else 'n octal'} literal that fits in a long",
                    t,
                )
            return NumberLiteral(value)
        if t.kind == "FLOAT":
            self.take()
            return NumberLiteral(float(t.text))
        raise self.fail("an expression")

    def string_literal(self) -> str:
        t = self.peek()
        if t.kind != "STRING":
            raise self.fail("a string literal")
        self.take()
        return t.text[1:-1].replace("''", "'")


@functools.lru_cache(maxsize=1024)
def parse_filter(text: str) -> Expression:
    """Parse an Artemis filter string into an immutable AST.

    Accepts what Artemis's ``SelectorParser`` accepts (including its
    ``hyphenated_props:`` / ``convert_string_expressions:`` prefixes) except
    ``XPATH`` / ``XQUERY``, which need the message body.

    :param text: the filter, e.g. ``"color = 'red' AND price > 100"``.
    :return: the root :class:`Expression`.
    :raises FilterSyntaxError: with the 0-based position and what was expected.

    Example::

        >>> parse_filter("a = 1")
        Comparison(op='=', left=Identifier(name='a'), right=NumberLiteral(value=1))
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_filter: text must be a str, got {type(text).__name__}")
    return _Parser(text).selector()


# --------------------------------------------------------------------------------------
# LIKE patterns (ComparisonExpression.LikeExpression)
# --------------------------------------------------------------------------------------


_LIKE_CONTROL = frozenset(".\\[]^$?*+{}|():&<>=!")
"""The characters ``LikeExpression`` writes as ``\\x`` and their hex code."""


def like_regex(pattern: str, escape: str | None) -> str:
    """The Java regex (for ``rlike``) of ``LIKE pattern ESCAPE escape``: the one Artemis's
    ``LikeExpression`` builds, character for character (``(?s)`` for its DOTALL flag).

    The escape character quotes the next character only when that is ``_``, ``%`` or the
    escape character itself (elsewhere it is an ordinary character); a quoted character
    and a regex metacharacter are written ``\\x`` and their hexadecimal code. Java's
    ``\\x`` reads two hex digits, so Artemis's regex says something else for an escape
    character quoting itself outside U+0010..U+00FF: with ESCAPE '€', ``€€`` is U+0020 then
    "ac" (and below U+0010 the next character completes the code, or the filter is
    refused: :func:`like_regex_error`). Spark's ``rlike`` is Java's regex too.
    """
    out = ["(?s)\\A"]
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == escape and i + 1 < n and pattern[i + 1] in ("_", "%", c):
            i += 1
            out.append(f"\\x{ord(pattern[i]):x}")
        elif c == "%":
            out.append(".*?")
        elif c == "_":
            out.append(".")
        elif c in _LIKE_CONTROL:
            out.append(f"\\x{ord(c):x}")
        else:
            out.append(c)
        i += 1
    out.append("\\z")
    return "".join(out)


_HEX = frozenset("0123456789abcdefABCDEF")


def like_regex_error(pattern: str, escape: str | None) -> str | None:
    """Why Java cannot compile :func:`like_regex`'s regex (Artemis then refuses the
    filter), or None: a ``\\x`` not followed by two hex digits (an escape character below
    U+0010 quoting itself, before a character that is no hex digit)."""
    regex = like_regex(pattern, escape)
    i = regex.find("\\x")
    while i >= 0:  # every backslash in the regex starts a sequence of like_regex's own
        if not (regex[i + 2 : i + 3] in _HEX and regex[i + 3 : i + 4] in _HEX):
            return f"an illegal hexadecimal escape in Artemis's regex {regex!r}"
        i = regex.find("\\x", i + 2)
    return None
