"""Random filters and messages for the differential filter tests (tests only).

:class:`FilterGen` builds valid filter ASTs (Artemis's parse-time checks pass) over a
small vocabulary of properties and header fields; :func:`messages` builds messages whose
properties are typed (all eight types, with awkward values: integer boundaries, -0.0,
NaN, Infinity, float 0.1, supplementary characters, numeric-looking strings) or untyped.
:func:`frame` turns messages into a Spark frame with the columns the filters read.

Used by ``test_filters_differential.py`` (compiler against the Python oracle) and
``test_filters_artemis.py`` (compiler against Artemis's own code).

Left out on purpose (documented differences, ``routing.broker.filters``): strings of
non-ASCII decimal digits and hexadecimal floating-point texts (``0x1p3``), which
``Integer.valueOf`` / ``Double.valueOf`` read under ``convert_string_expressions:`` and the
compiler does not; doubles whose Java 17 ``toString`` is not the shortest one (``1e23``),
which the oracle (not the compiler: Spark's cast is the JVM's own) would write differently.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
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

PROPS = ["a", "b", "c", "d.e", "it's", "NOT"]
HEADERS = ["AMQPriority", "AMQExpiration", "AMQTimestamp", "AMQDurable", "AMQUserID", "AMQAddress"]

# untyped texts
NUMERIC = ["5", "10", "-3", "0", "-0", "2.5", "-0.5", "1e3", ".5", "5.", "+7", "007", "4", "7",
           "9007199254740993", "9007199254740992", "9223372036854775807", "-9223372036854775808",
           "9223372036854775808", "1767225600000", "-0.0", "0.1", "2147483648"]  # fmt: skip
BOOLEAN = ["TRUE", "true", "True", "false", "FALSE", "yes", ""]
TEXT = ["abc", "ABC", "abd", "x_1", "x1", "x_", "a%b", "a.b", "a\\b", "[x]", "a\nb", "é", "alice",
        "DURABLE", "NON_DURABLE", "orders", " 5", "NaN", "Infinity", "1d", "0x10",
        "\U0001f600", "\uffff", "\ue000x"]  # fmt: skip
VALUES = [*NUMERIC, *BOOLEAN, *TEXT]

# typed texts, by type (SPEC §3.1): awkward values of each
TYPED: dict[str, list[str]] = {
    "boolean": ["true", "false", "TRUE", "False"],
    "byte": ["0", "-128", "127", "5", "-3", "7", "+7", "007", "4"],
    "short": ["-32768", "32767", "5", "20", "-1", "0", "7", "10"],
    "integer": ["-2147483648", "2147483647", "5", "7", "10", "0", "-3", "1000", "4"],
    "long": ["9223372036854775807", "-9223372036854775808", "9007199254740993", "5", "7", "10",
             "0", "-1", "2147483648", "1767225600000", "4"],
    "float": ["0.1", "2.5", "-0.0", "0.0", "NaN", "Infinity", "-Infinity", "3.4028235E38",
              "1.4E-45", "16777217", "7", "1e10", "100.00001", "5.0"],
    "double": ["0.1", "-0.0", "0.0", "NaN", "Infinity", "-Infinity", "1.7976931348623157E308",
               "4.9E-324", "9007199254740993", "7.0", "2.5", "1e20", "5", "10.5"],
    "string": ["7", "abc", "", "true", "TRUE", "10", "9", "a%b", "\U0001f600", "\uffff", "é",
               "NaN", " 5", "1.5", "x_1", "-0", "5", "1e3", "127"],
}  # fmt: skip

NUMBERS: list[int | float] = [0, 1, 2, 3, 4, 5, 7, 9, 10, 127, 128, 2.5, 0.5, 1e3, 1e300, 0.1, 100,
    0.0, 2**31 - 1, 2**31, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 2**64 + 5,
    9007199254740992.0, 1767225600000, 16777217]  # fmt: skip
ESCAPES = [None, None, "\\", "!", "%", "x"]


class FilterGen:
    """Random valid filter ASTs (valid: Artemis's parse-time checks pass).

    ``props``: the property names to use; ``convert``: how often a filter gets the
    ``convert_string_expressions:`` prefix. (Two identifiers meet in about one comparison in
    six: those compile to the largest expressions, a CASE over both types.)
    """

    def __init__(
        self,
        rng: random.Random,
        props: list[str] = PROPS,
        convert: float = 0.15,
        numbers: float = 0.6,
    ) -> None:
        self.r = rng
        self.props = props
        self.convert = convert
        self.numbers = numbers  # how often a numeric operand is a literal, not an identifier

    def filter(self, depth: int) -> Expression:
        e = self.boolean(depth)
        return ConvertStrings(e) if self.r.random() < self.convert else e

    def ident(self) -> Identifier:
        pool = self.props if self.r.random() < 0.7 else HEADERS
        return Identifier(self.r.choice(pool))

    def number(self) -> Expression:
        n = NumberLiteral(self.r.choice(NUMBERS))
        return Negate(n) if self.r.random() < 0.25 else n

    def numeric(self, depth: int) -> Expression:
        """An operand of < <= > >= BETWEEN: numbers, identifiers, arithmetic, negation."""
        k = self.r.random()
        if depth <= 0 or k < 0.5:
            return self.number() if self.r.random() < self.numbers else self.ident()
        if k < 0.88:
            op = self.r.choice("+-*/%+-")
            left: Expression = self.numeric(depth - 1)
            right: Expression = self.numeric(depth - 1)
            j = self.r.random()
            if j < 0.1:
                right = self.string()
            elif j < 0.18:
                left = self.string()  # 'x' + ... concatenates
            elif j < 0.22:
                right = BooleanLiteral(self.r.random() < 0.5)
            return Arithmetic(op, left, right)
        inner = self.numeric(depth - 1) if self.r.random() < 0.8 else self.string()
        return Negate(inner)

    def string(self) -> StringLiteral:
        return StringLiteral(self.r.choice(VALUES + TYPED["string"]))

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
        for ch in self.r.choice(VALUES + TYPED["string"] + TYPED["float"]):
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
        k = self.r.randrange(12)
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
            pool = VALUES + TYPED["string"] + TYPED["long"][:4]
            values = tuple(self.r.sample(pool, self.r.randint(1, 4)))
            return In(self.ident(), values, self.r.random() < 0.4)
        if k == 8:
            operand = self.r.choice([self.ident(), self.numeric(depth - 1), self.value(depth)])
            return IsNull(operand, self.r.random() < 0.5)
        if k == 9:
            return self.r.choice([BooleanLiteral(True), BooleanLiteral(False), NullLiteral()])
        if k == 10:  # two identifiers
            return Comparison(
                self.r.choice(["=", "<>", "<", "<=", ">", ">="]), self.ident(), self.ident()
            )
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


def random_properties(
    rng: random.Random, names: list[str], typed_share: float
) -> tuple[dict[str, str], dict[str, str]]:
    """Properties (and their types) for some of ``names``: typed with probability
    ``typed_share`` (a random type, one of its awkward values), else untyped."""
    props: dict[str, str] = {}
    types: dict[str, str] = {}
    for name in names:
        if rng.random() >= 0.85:
            continue
        if rng.random() < typed_share:
            type_name = rng.choice(list(TYPED))
            props[name] = rng.choice(TYPED[type_name])
            types[name] = type_name
        else:
            props[name] = rng.choice(rng.choice([NUMERIC, NUMERIC, BOOLEAN, TEXT]))
    return props, types


def messages(seed: int, n: int, typed_share: float = 0.6) -> list[dict[str, Any]]:
    """``n`` seeded random messages (typed_share 1.0: every property typed)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        props, types = random_properties(rng, [*PROPS, "AMQUserID", "AMQAddress"], typed_share)
        out.append(
            {
                "properties": props,
                "property_types": types,
                "priority": rng.choice([None, 0, 4, 5, 9]),
                "durable": rng.choice([None, True, False]),
                "expiration_ms": rng.choice([None, 1767225600000, 1767225601234, 0]),
                "sent_at_ms": rng.choice([None, 1767225600000, 1767225600999]),
                "user_id": rng.choice([None, None, "alice", "5", "", "true"]),
                "address": rng.choice([None, None, "orders", "a.b", "7"]),
            }
        )
    return out


def _ts(ms: int | None) -> datetime | None:
    return None if ms is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


SCHEMA = (
    "id int, properties map<string,string>, property_types map<string,string>, priority int, "
    "durable boolean, expiration timestamp, sent_at timestamp, user_id string, address string"
)


def rows(msgs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows of :data:`SCHEMA` (``id``: the message's index)."""
    return [
        (i, m.get("properties"), m.get("property_types"), m.get("priority"), m.get("durable"),
         _ts(m.get("expiration_ms")), _ts(m.get("sent_at_ms")), m.get("user_id"), m.get("address"))
        for i, m in enumerate(msgs)
    ]  # fmt: skip
