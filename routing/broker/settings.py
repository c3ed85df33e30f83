"""Address settings and the hierarchical repository that resolves them (SPEC §4).

Ports the behaviour (not the code) of Artemis's ``HierarchicalObjectRepository``,
``Match`` and ``AddressSettings.mergeCopy``:

- a match is an exact name, or a pattern where the *delimiter* (``.``) separates
  words, *single-word* (``*``) is exactly one non-empty word and *any-words*
  (``#``) is zero or more words and may only come last; ``a.#`` matches ``a``;
- for an address, every entry that matches is ordered most specific first:
  the exact entry, then the literal entry (``literal-match-markers``), then the
  patterns sorted by Artemis's ``MatchComparator``;
- the settings merge field by field in that order: a field an entry does not
  set comes from the next one; defaults apply only where no entry sets it.

Example::

    repo = AddressSettingsRepository([
        ("#", {"dead_letter_address": "DLA", "max_delivery_attempts": 1}),
        ("orders.*", {"max_delivery_attempts": 3}),
    ])
    repo.match("orders.eu")   # DLA from '#', 3 attempts from 'orders.*'
    repo.matches("orders.eu") # ['orders.*', '#']

.. note:: Evolving
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Any, TypeVar

from routing.broker.validation import ConfigError, validate_match, validate_wildcard_characters

__all__ = [
    "SETTING_FIELDS",
    "AddressSettings",
    "AddressSettingsRepository",
    "WildcardConfig",
    "is_wild",
]

# Artemis WildcardConfiguration.ESCAPE: a wildcard character preceded by it is literal
# when deciding whether a match is a pattern at all.
_ESCAPE = "\\"
# Artemis CompositeAddress separator: settings of "address::queue" are those of "address".
_FQQN_SEPARATOR = "::"


_K = TypeVar("_K")
_V = TypeVar("_V")


class _FrozenMapping(Mapping[_K, _V]):
    """A read-only, picklable, hashable mapping (``MappingProxyType`` cannot be
    pickled, and the configuration may travel to Spark executors in closures)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[_K, _V] | Iterable[tuple[_K, _V]] = ()) -> None:
        self._data: dict[_K, _V] = dict(data)

    def __getitem__(self, key: _K) -> _V:
        return self._data[key]

    def __iter__(self) -> Iterator[_K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return f"{self._data!r}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))


@dataclass(frozen=True)
class WildcardConfig:
    """The ``<wildcard-addresses>`` characters (Artemis ``WildcardConfiguration``).

    Lives here rather than in :mod:`routing.broker.config` because the repository needs
    it and ``config`` imports this module; ``config`` re-exports it.
    """

    delimiter: str = "."
    any_words: str = "#"
    single_word: str = "*"

    def __post_init__(self) -> None:
        validate_wildcard_characters(self.delimiter, self.any_words, self.single_word)


def is_wild(text: str, wildcards: WildcardConfig) -> bool:
    """Whether ``text`` holds an unescaped wildcard (Artemis ``WildcardConfiguration.isWild``)."""
    for i, char in enumerate(text):
        if char in (wildcards.single_word, wildcards.any_words) and (
            i == 0 or text[i - 1] != _ESCAPE
        ):
            return True
    return False


def _compile(match: str, wildcards: WildcardConfig) -> re.Pattern[str]:
    """The regular expression Artemis's ``Match`` builds for a pattern.

    ``delimiter + any-words`` collapses to any-words, which becomes "zero or more
    ``delimiter + anything``" groups, so ``a.#`` matches ``a``, ``a.b``, ``a.b.c``
    but not ``ab``; single-word becomes "one or more non-delimiter characters".
    A wildcard preceded by ``\\`` is literal. Unlike Artemis (which escapes only
    ``.`` and ``$``), every other character is literal too, so a name holding
    ``+`` or ``(`` is not read as regex syntax.
    """
    if match == wildcards.any_words:
        return re.compile(".*", re.DOTALL)
    delimiter = re.escape(wildcards.delimiter)
    text = match.replace(wildcards.delimiter + wildcards.any_words, wildcards.any_words)
    wild = (wildcards.single_word, wildcards.any_words)
    parts = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == _ESCAPE and i + 1 < len(text) and text[i + 1] in wild:
            char = text[i + 1]  # an escaped wildcard is literal, as in Artemis's regex
            parts.append(re.escape(char))
            i += 2
            continue
        if char == wildcards.single_word:
            parts.append(f"[^{delimiter}]+")
        elif char == wildcards.any_words:
            parts.append(f"(?:{delimiter}.+)*")
        else:
            parts.append(re.escape(char))
        i += 1
    return re.compile("".join(parts), re.DOTALL)


def _java_split(text: str, delimiter: str) -> list[str]:
    """``String.split`` semantics: trailing empty strings are dropped."""
    parts = text.split(delimiter)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _compare(left: str, right: str, wildcards: WildcardConfig) -> int:
    """Artemis ``MatchComparator``: negative when ``left`` is more specific.

    Patterns without any-words come before patterns with it; of two any-words
    patterns the longer wins; of two single-word patterns, at the first word
    where exactly one of them has single-word, the literal word wins; otherwise
    the shorter pattern comes first.
    """
    any_words, single_word = wildcards.any_words, wildcards.single_word
    left_any, right_any = any_words in left, any_words in right
    if left_any != right_any:
        return 1 if left_any else -1
    if left_any:
        return len(right) - len(left)
    left_single, right_single = single_word in left, single_word in right
    if left_single != right_single:
        return 1 if left_single else -1
    if left_single:
        left_words = _java_split(left, wildcards.delimiter)
        right_words = _java_split(right, wildcards.delimiter)
        for i, left_word in enumerate(left_words):
            if i >= len(right_words):
                return -1
            right_word = right_words[i]
            if left_word == single_word and right_word != single_word:
                return 1
            if left_word != single_word and right_word == single_word:
                return -1
    return len(left) - len(right)


@dataclass(frozen=True)
class AddressSettings:
    """The merged settings of one address; times in milliseconds (Artemis defaults).

    ``max_redelivery_delay`` left as ``None`` becomes ``10 × redelivery_delay``
    (Artemis ``getMaxRedeliveryDelay``), so after construction it is always an
    int. An empty ``expiry_address`` means "none" and is stored as ``None``; an
    empty ``dead_letter_address`` is kept: Artemis's ``QueueImpl.sendToDeadLetterAddress``
    tests it for null only, so a dead letter there finds an address without bindings
    (``DLA_NO_BINDINGS``), while its expiry tests the expiry address's length too. The
    repository only builds this object after merging, so an explicit empty element still
    overrides less specific matches.
    """

    dead_letter_address: str | None = None
    max_delivery_attempts: int = 10  # <= 0: unlimited
    redelivery_delay: int = 0
    redelivery_delay_multiplier: float = 1.0
    max_redelivery_delay: int | None = None  # None: 10 x redelivery_delay
    expiry_address: str | None = None
    expiry_delay: int = -1  # -1: not set
    min_expiry_delay: int = -1
    max_expiry_delay: int = -1
    no_expiry: bool = False
    auto_create_dead_letter_resources: bool = False
    dead_letter_queue_prefix: str = "DLQ."
    dead_letter_queue_suffix: str = ""
    auto_create_expiry_resources: bool = False
    expiry_queue_prefix: str = "EXP."
    expiry_queue_suffix: str = ""
    send_to_dla_on_no_route: bool = False
    auto_create_addresses: bool = True
    auto_create_queues: bool = True
    default_address_routing_type: str = "MULTICAST"
    default_queue_routing_type: str = "MULTICAST"

    def __post_init__(self) -> None:
        if self.max_redelivery_delay is None:
            object.__setattr__(self, "max_redelivery_delay", self.redelivery_delay * 10)
        if self.expiry_address == "":
            object.__setattr__(self, "expiry_address", None)


SETTING_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(AddressSettings))

# Python types each field accepts in repository entries (bool is never an int here).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "dead_letter_address": (str,),
    "max_delivery_attempts": (int,),
    "redelivery_delay": (int,),
    "redelivery_delay_multiplier": (float, int),
    "max_redelivery_delay": (int,),
    "expiry_address": (str,),
    "expiry_delay": (int,),
    "min_expiry_delay": (int,),
    "max_expiry_delay": (int,),
    "no_expiry": (bool,),
    "auto_create_dead_letter_resources": (bool,),
    "dead_letter_queue_prefix": (str,),
    "dead_letter_queue_suffix": (str,),
    "auto_create_expiry_resources": (bool,),
    "expiry_queue_prefix": (str,),
    "expiry_queue_suffix": (str,),
    "send_to_dla_on_no_route": (bool,),
    "auto_create_addresses": (bool,),
    "auto_create_queues": (bool,),
    "default_address_routing_type": (str,),
    "default_queue_routing_type": (str,),
}


def _check_values(match: str, values: Mapping[str, object]) -> dict[str, object]:
    """Entries name AddressSettings fields with values of the field's type."""
    checked: dict[str, object] = {}
    for name, value in values.items():
        if name not in _FIELD_TYPES:
            raise ConfigError(f"address-setting match '{match}': unknown setting {name!r}")
        expected = _FIELD_TYPES[name]
        is_bool = isinstance(value, bool)
        if not isinstance(value, expected) or (is_bool and bool not in expected):
            raise TypeError(
                f"address-setting match '{match}': {name} must be "
                f"{' or '.join(t.__name__ for t in expected)}, found {value!r}"
            )
        checked[name] = float(value) if float in expected else value  # type: ignore[arg-type]
    return checked


@dataclass(frozen=True)
class _Entry:
    """One ``address-setting``: its match as written, as looked up, and its fields."""

    match: str
    key: str
    values: Mapping[str, object]
    pattern: re.Pattern[str] | None


def _strip_fqqn(name: str) -> str:
    """Artemis ``AddressSettingsMatchModifier``: ``address::queue`` -> ``address``."""
    index = name.find(_FQQN_SEPARATOR)
    return name if index < 0 else name[:index]


class AddressSettingsRepository:
    """Resolves the merged :class:`AddressSettings` of an address from its matches.

    :param entries: ``(match, explicitly set fields)`` in declaration order; the
        fields are :class:`AddressSettings` attribute names. A match declared
        twice keeps its first declaration (Artemis logs and ignores the second).
    :param wildcards: the delimiter / any-words / single-word characters
    :param literal_match_markers: two characters (Artemis ``literal-match-markers``,
        e.g. ``"()"``): ``(a.#)`` then applies only to the address named ``a.#``
    :raises ConfigError: for a match whose any-words is not last
    """

    def __init__(
        self,
        entries: Sequence[tuple[str, Mapping[str, object]]],
        wildcards: WildcardConfig = WildcardConfig(),
        *,
        literal_match_markers: str | None = None,
    ) -> None:
        if not isinstance(wildcards, WildcardConfig):
            raise TypeError(f"wildcards must be a WildcardConfig, found {wildcards!r}")
        if literal_match_markers is not None and len(literal_match_markers) != 2:
            raise ConfigError(
                f"<literal-match-markers>: expected two characters, found {literal_match_markers!r}"
            )
        self.wildcards = wildcards
        self.literal_match_markers = literal_match_markers
        self._exact: dict[str, _Entry] = {}
        self._literal: dict[str, _Entry] = {}
        self._wild: dict[str, _Entry] = {}
        self._entries: list[_Entry] = []
        for match, values in entries:
            self._add(match, values)
        self._cache: dict[str, AddressSettings] = {}

    def _add(self, match: str, values: Mapping[str, object]) -> None:
        if not isinstance(match, str):
            raise TypeError(f"address-setting match must be a string, found {match!r}")
        key, literal = match, False
        markers = self.literal_match_markers
        if markers and len(match) >= 2 and match[0] == markers[0] and match[-1] == markers[1]:
            key, literal = match[1:-1], True
        key = _strip_fqqn(key)
        validate_match(key, self.wildcards.any_words)
        if literal:
            table, pattern = self._literal, None
        elif is_wild(key, self.wildcards):
            table, pattern = self._wild, _compile(key, self.wildcards)
        else:
            table, pattern = self._exact, None
        if key in table:  # first declaration wins, as FileConfigurationParser does
            return
        entry = _Entry(match, key, _FrozenMapping(_check_values(match, values)), pattern)
        table[key] = entry
        self._entries.append(entry)

    @property
    def entries(self) -> tuple[tuple[str, Mapping[str, object]], ...]:
        """The effective entries, ``(match as written, explicitly set fields)``."""
        return tuple((e.match, e.values) for e in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        """The matches as written, in declaration order."""
        return (e.match for e in self._entries)

    def _identity(self) -> tuple[object, ...]:
        return (self.entries, self.wildcards, self.literal_match_markers)

    def __eq__(self, other: object) -> bool:
        """Equal when built from the same effective entries and characters."""
        if not isinstance(other, AddressSettingsRepository):
            return NotImplemented
        return self._identity() == other._identity()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        return f"AddressSettingsRepository({list(self.entries)!r}, {self.wildcards!r})"

    def _ordered(self, address: str) -> list[_Entry]:
        key = _strip_fqqn(address)
        found = [table[key] for table in (self._exact, self._literal) if key in table]
        wild = [e for e in self._wild.values() if e.pattern and e.pattern.fullmatch(key)]
        wild.sort(key=cmp_to_key(lambda a, b: _compare(a.key, b.key, self.wildcards)))
        return found + wild

    def matches(self, address: str) -> list[str]:
        """The matches that apply to ``address``, most specific first (as written)."""
        return [e.match for e in self._ordered(address)]

    def match(self, address: str) -> AddressSettings:
        """The merged settings of ``address``, defaults where no match sets a field."""
        cached = self._cache.get(address)
        if cached is None:
            merged: dict[str, object] = {}
            for entry in self._ordered(address):
                for name, value in entry.values.items():
                    merged.setdefault(name, value)
            cached = AddressSettings(**merged)  # type: ignore[arg-type]
            self._cache[address] = cached
        return cached
