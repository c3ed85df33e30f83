"""Artemis filter expressions (SPEC §5.1) parsed to an AST: the grammar, pure Python.

Compiled to Spark Columns by :mod:`routing.plan.filters`.

The grammar is a port of Artemis's JavaCC selector grammar
(``artemis-selector/src/main/javacc/StrictParser.jj``): same tokens, same
precedence, same parse-time checks (``ComparisonExpression.checkLessThanOperand``
and friends), so a filter Artemis rejects is rejected here with a
:class:`FilterSyntaxError`, and one it accepts parses to the same tree shape.

Evaluation follows Artemis with ``convert_string_expressions`` on, because every
property in the lake is a string (SPEC §3.1). Decisions where SPEC is silent:

- A string is numeric when it matches ``[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?``:
  an integer within the long range is a long, anything else a double (no spaces, NaN,
  Infinity, hex or Java suffixes).
- Long against long compares exactly (beyond 2^53 too); with a double on either side the
  long is widened to a double, as Java does.
- Number against a non-numeric string, and two properties of which only one is numeric:
  UNKNOWN (SPEC; Artemis says FALSE). Two properties both numeric compare as numbers,
  neither numeric as strings (``<``/``>`` lexicographic, like ``String.compareTo``).
- A string literal compared with a string (``code = '007'``) is a string comparison.
- Booleans: ``Boolean.valueOf`` (only "true", any case, is TRUE), also for an identifier
  used as a condition; a boolean never equals a number (FALSE).
- Arithmetic: long when both sides are integers, double otherwise; ``/`` and ``%`` always
  double; a long overflow falls back to double arithmetic (Artemis wraps around); division
  by zero and any non-numeric operand are UNKNOWN (Artemis concatenates ``'a' + x``).
- ``x = NULL-property`` is UNKNOWN on both sides (Artemis: FALSE when only the right is null).
- LIKE on a non-string is FALSE; IN on a non-string is UNKNOWN (as Artemis).
- A blank filter is no filter (``FilterImpl.createFilter``); XPATH / XQUERY are refused.

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
    """An integer (long; beyond the long range it is used as a double) or a double literal."""

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
    """Unary minus (unary plus is dropped by the parser, as in Artemis)."""

    operand: Expression

    def __str__(self) -> str:
        return f"(- {self.operand})"


@dataclass(frozen=True)
class Arithmetic(Expression):
    """``+ - * / %``: long arithmetic for integers, double otherwise; ``/`` and ``%`` always double."""

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
        matched = True
        while matched:
            matched = False
            for prefix, (option, value) in _PREFIXES.items():
                if text.startswith(prefix, start, end):
                    start += len(prefix)
                    if option == "hyphenated":
                        hyphenated = value
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
        return self.as_boolean(e, span)

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
                pattern = self.string_literal()
                escape = None
                if self.at("ESCAPE"):
                    self.take()
                    etok = self.peek()
                    escape = self.string_literal()
                    if len(escape) != 1:
                        raise self.fail("a single-character ESCAPE string", etok)
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
            operand = self.unary_expr()
            if isinstance(operand, NumberLiteral):  # fold; also makes -9223372036854775808 a long
                return NumberLiteral(-operand.value)
            return Negate(operand)
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


def like_regex(pattern: str, escape: str | None) -> str:
    """The Java regex (for ``rlike``) that matches exactly what ``LIKE pattern ESCAPE escape`` matches.

    As Artemis: the escape character quotes the next character only when that is
    ``_``, ``%`` or the escape character itself; elsewhere it is an ordinary
    character. Every literal character that is not an ASCII letter or digit is
    written ``\\x{hex}``, so no regex metacharacter survives.
    """
    out = ["(?s)\\A"]
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if (
            escape is not None
            and c == escape
            and i + 1 < n
            and pattern[i + 1] in ("_", "%", escape)
        ):
            i += 1
            out.append(_regex_literal(pattern[i]))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(_regex_literal(c))
        i += 1
    out.append("\\z")
    return "".join(out)


def _regex_literal(c: str) -> str:
    if c.isascii() and c.isalnum():
        return c
    return f"\\x{{{ord(c):x}}}"
