"""Typed message properties (SPEC §3.1): Artemis's type names and the text of each value.

A message row keeps every property as text in ``properties`` (Java's text form: ``42``,
``3.5``, ``true``) and, for a typed one, its JMS type in ``property_types``, by the
names Artemis's data export uses. A property without a type is untyped: a producer that
keeps no types, read by filters with the lake's lenient rule (:mod:`routing.broker.filters`).

What a typed value's text must look like is :data:`TEXT_PATTERNS` (and, for the integral
types, :data:`INTEGRAL_RANGES`); a row whose typed text does not read as its type, or that
names a type not in :data:`PROPERTY_TYPES`, is rejected (:mod:`routing.plan.normalise`).

Example::

    typed_value(42)          # ('42', 'long')
    typed_value(7.0)         # ('7.0', 'double')
    typed_value(True)        # ('true', 'boolean')
    typed_value("red")       # ('red', None): untyped
"""

from __future__ import annotations

import math
from decimal import Decimal

__all__ = [
    "BOOLEAN",
    "BYTE",
    "DOUBLE",
    "FLOAT",
    "INTEGER",
    "INTEGRAL_RANGES",
    "LONG",
    "PROPERTY_TYPES",
    "SHORT",
    "STRING",
    "TEXT_PATTERNS",
    "java_double",
    "typed_value",
]

BOOLEAN, BYTE, SHORT, INTEGER, LONG, FLOAT, DOUBLE, STRING = (
    "boolean",
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "string",
)
PROPERTY_TYPES = (BOOLEAN, BYTE, SHORT, INTEGER, LONG, FLOAT, DOUBLE, STRING)
"""The types of ``property_types`` (SPEC §3.1), Artemis's names for the JMS property types."""

INTEGRAL_RANGES = {
    BYTE: (-(2**7), 2**7 - 1),
    SHORT: (-(2**15), 2**15 - 1),
    INTEGER: (-(2**31), 2**31 - 1),
    LONG: (-(2**63), 2**63 - 1),
}
"""The values a typed integral property can hold (Java's ``byte`` .. ``long``)."""

_INTEGRAL = r"[+-]?[0-9]+"
_DECIMAL = r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
TEXT_PATTERNS = {
    BOOLEAN: r"(?i)true|false",
    BYTE: _INTEGRAL,
    SHORT: _INTEGRAL,
    INTEGER: _INTEGRAL,
    LONG: _INTEGRAL,
    FLOAT: _DECIMAL,
    DOUBLE: _DECIMAL,
}
"""The text a typed value must match, whole (Java's ``parseX`` grammar, decimal only; a
string's text is anything). Integral values must also be in :data:`INTEGRAL_RANGES`."""


def java_double(value: float) -> str:
    """Java's ``Double.toString`` of ``value``: ``7.0``, ``2.5``, ``1.0E20``, ``NaN``.

    Java writes plain decimals for magnitudes in [1e-3, 1e7) and ``d.dddE±n`` otherwise,
    with at least one digit after the point; the digits are the shortest that read back
    as the same double (Python's ``repr``, as Java 19 and later; Java 17 may add digits
    in rare cases, which read back as the same double all the same)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        if "e" in text:  # repr goes scientific below 1e-4: write the plain decimal
            text = format(value, ".20f").rstrip("0")
        return text if "." in text else text + ".0"
    # the shortest digits (repr's), written d.dddE<n>, one digit after the point at least
    _, digits, exponent = Decimal(repr(magnitude)).normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite value
    shown = "".join(map(str, digits))
    sign = "-" if value < 0 else ""
    return f"{sign}{shown[0]}.{shown[1:] or '0'}E{len(shown) - 1 + exponent}"


def typed_value(value: object) -> tuple[str, str | None]:
    """A property value as the lake holds it: its text, and its type (None: untyped).

    A JSON-like value: a string is untyped, a bool a ``boolean``, an int a ``long``, a
    float a ``double``; a dict ``{"type": T, "value": V}`` is a T whose text is V's
    (SPEC §3.1's names). Raises ValueError for anything else.
    """
    if isinstance(value, str):
        return value, None
    if isinstance(value, bool):
        return ("true" if value else "false"), BOOLEAN
    if isinstance(value, int):
        return str(value), LONG
    if isinstance(value, float):
        return java_double(value), DOUBLE
    if isinstance(value, dict) and set(value) == {"type", "value"}:
        kind, text = value["type"], value["value"]
        if kind not in PROPERTY_TYPES:
            raise ValueError(f"unknown property type {kind!r}; expected one of {PROPERTY_TYPES}")
        return (text if isinstance(text, str) else typed_value(text)[0]), kind
    raise ValueError(f"a property value is a string, number, boolean or a typed value: {value!r}")
