"""Small checks for ``broker.xml`` values, one concern each (SPEC §4).

Every check raises :class:`ConfigError` with a message that names the element,
the value found and what was expected, because the job turns it into exit
status 2 and the operator only sees that message. ``ConfigError`` lives here
(and is re-exported by :mod:`routing.broker.config`) so that :mod:`routing.broker.settings`
can raise it without an import cycle.

Value grammars follow Artemis's ``FileConfigurationParser`` / ``XMLUtil``:
integers are Java ``Integer.parseInt``, durations are plain Java longs
(``Long.parseLong``: no units, no decimals), multipliers are Java doubles.
Booleans are stricter than Artemis (``Boolean.parseBoolean`` reads any word
but ``true`` as ``false``): SPEC §4 makes a non-boolean an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from routing.broker.filters import FilterSyntaxError, parse_filter
from routing.broker.layout import address_dir

__all__ = [
    "DIVERT_ROUTING_TYPES",
    "MAX_TABLE_DIR_BYTES",
    "ConfigError",
    "validate_address_name",
    "validate_boolean",
    "validate_divert_routing_type",
    "validate_double",
    "validate_filter",
    "validate_int",
    "validate_long",
    "validate_match",
    "validate_name",
    "validate_unique_names",
    "validate_wildcard_characters",
]


class ConfigError(ValueError):
    """An invalid ``broker.xml``: the job stops with exit status 2 before writing."""


DIVERT_ROUTING_TYPES = ("ANYCAST", "MULTICAST", "PASS", "STRIP")

_INT_RE = re.compile(r"[+-]?[0-9]+")
# Java Double.parseDouble's decimal form (optional f/d suffix); NaN, Infinity and
# hexadecimal floats are refused because no delay computation can use them.
_DOUBLE_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def validate_boolean(text: str, where: str) -> bool:
    """``true`` / ``false`` (any case, surrounding blanks ignored), else ConfigError.

    :param text: the element's text
    :param where: the element, e.g. ``"divert 'd1': <exclusive>"``
    :return: the boolean
    """
    value = text.strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ConfigError(f"{where}: expected true or false, found {text.strip()!r}")


def _validate_integer(text: str, where: str, lo: int, hi: int, kind: str) -> int:
    value = text.strip()
    if not _INT_RE.fullmatch(value):
        raise ConfigError(f"{where}: expected {kind}, found {value!r}")
    number = int(value)
    if not lo <= number <= hi:
        raise ConfigError(f"{where}: {value} is out of range for {kind} ({lo}..{hi})")
    return number


def validate_int(text: str, where: str) -> int:
    """A Java ``int`` written in decimal (e.g. ``max-delivery-attempts``)."""
    return _validate_integer(text, where, _INT_MIN, _INT_MAX, "a 32-bit integer")


def validate_long(text: str, where: str) -> int:
    """A Java ``long`` written in decimal (durations in milliseconds)."""
    return _validate_integer(text, where, _LONG_MIN, _LONG_MAX, "a whole number of milliseconds")


def validate_double(text: str, where: str) -> float:
    """A finite Java ``double`` in decimal notation (``1.5``, ``2``, ``1e1``, ``2.0d``)."""
    value = text.strip()
    if not _DOUBLE_RE.fullmatch(value):
        raise ConfigError(f"{where}: expected a decimal number, found {value!r}")
    return float(value.rstrip("fFdD"))


def validate_name(value: str | None, where: str, what: str = "name") -> str:
    """A required, non-empty attribute or element (``name``, ``match``, ``address``)."""
    if value is None:
        raise ConfigError(f"{where}: missing {what}")
    if value == "":
        raise ConfigError(f"{where}: {what} is empty")
    return value


MAX_TABLE_DIR_BYTES = 255
"""The longest folder name, in bytes, that the file systems a lake lives on hold (ext4,
XFS, APFS; NAME_MAX on Linux): an address's table folder (``dir(address)``) must fit."""


def validate_address_name(value: str | None, where: str, what: str = "<address>") -> str:
    """A required address name whose table folder the lake's file system can hold.

    An address the job writes to gets a folder ``addresses/<dir(address)>`` (SPEC §3), in
    which every byte outside ``A-Z a-z 0-9 . _ -`` takes three (``=XX``): a 30-character
    CJK name (90 bytes of UTF-8) needs 270. Refused here, before anything is written, not
    when a batch's first copy to it fails after other tables committed."""
    name = validate_name(value, where, what)
    folder = len(address_dir(name).encode())
    if folder > MAX_TABLE_DIR_BYTES:
        shown = name if len(name) <= 40 else name[:39] + "…"
        raise ConfigError(
            f"{where}: address '{shown}' is too long for a table folder: its folder name "
            f"takes {folder} bytes, at most {MAX_TABLE_DIR_BYTES} fit (characters outside "
            "A-Z a-z 0-9 . _ - take 3 bytes each)"
        )
    return name


def validate_divert_routing_type(value: str, divert: str) -> str:
    """One of ANYCAST, MULTICAST, PASS, STRIP (case-sensitive, as Artemis's validator)."""
    if value not in DIVERT_ROUTING_TYPES:
        raise ConfigError(
            f"divert '{divert}': unknown routing-type '{value}'; "
            "expected ANYCAST, MULTICAST, PASS or STRIP"
        )
    return value


def validate_routing_type(value: str, where: str) -> str:
    """ANYCAST or MULTICAST (case-sensitive: Artemis's ``RoutingType.valueOf``)."""
    if value not in ("ANYCAST", "MULTICAST"):
        raise ConfigError(f"{where}: unknown routing type '{value}'; expected ANYCAST or MULTICAST")
    return value


def validate_wildcard_characters(delimiter: str, any_words: str, single_word: str) -> None:
    """Each wildcard character is one character and the three differ.

    Artemis does not check distinctness, but a delimiter equal to a wildcard
    makes every match ambiguous, so it is refused here.
    """
    chars = {"delimiter": delimiter, "any-words": any_words, "single-word": single_word}
    for element, char in chars.items():
        if not isinstance(char, str) or len(char) != 1:
            raise ConfigError(
                f"<wildcard-addresses>: <{element}> must be exactly one character, found {char!r}"
            )
    if len(set(chars.values())) != 3:
        raise ConfigError(
            "<wildcard-addresses>: <delimiter>, <any-words> and <single-word> must differ, found "
            f"{delimiter!r}, {any_words!r}, {single_word!r}"
        )


def validate_match(match: str, any_words: str) -> None:
    """The any-words wildcard (``WildcardConfig.any_words``) may only be the last
    character of a match.

    Artemis ``Match.verify``: a match containing ``#`` anywhere but at its end
    is illegal (``orders.#.eu``, ``#.x``).
    """
    if any_words in match and match.index(any_words) < len(match) - 1:
        raise ConfigError(f"address-setting match '{match}': '{any_words}' must be the last word")


def validate_filter(text: str, where: str) -> None:
    """The filter parses with the job's Artemis filter grammar (pure Python: loading a
    configuration never imports PySpark)."""
    try:
        parse_filter(text)
    except FilterSyntaxError as exc:
        raise ConfigError(f'{where}: filter "{text}" does not parse: {exc}') from exc


def validate_unique_names(queues: Iterable[tuple[str, str]], diverts: Iterable[str]) -> None:
    """Queue and divert names share one namespace (Artemis binding names).

    :param queues: ``(queue name, address)`` pairs, one per distinct queue
    :param diverts: divert names in declaration order
    :raises ConfigError: for a name used twice, naming both users
    """
    owner: dict[str, str] = {}
    for name, address in queues:
        if name in owner:
            raise ConfigError(
                f"queue '{name}' on address '{address}': name already used by the queue "
                f"on address '{owner[name]}'"
            )
        owner[name] = address
    seen: set[str] = set()
    for name in diverts:
        if name in seen:
            raise ConfigError(f"divert '{name}': name already used by another divert")
        if name in owner:
            raise ConfigError(
                f"divert '{name}': name already used by queue '{name}' on address '{owner[name]}'"
            )
        seen.add(name)
