"""``broker.xml`` -> frozen dataclasses (SPEC §4).

Reads the parts of a real Artemis ``broker.xml`` the job uses (addresses and
their queues, the legacy ``<queues>`` block, diverts, address-settings,
wildcard characters, ``persist-delivery-count-before-delivery``) and ignores
every other element, the way Artemis's ``FileConfigurationParser`` and the
broker's deployment (``ActiveMQServerImpl``) read and apply them. Anything the
job cannot run with raises :class:`ConfigError` before any table is touched.

Example::

    config = load_config("conf/broker.xml")
    config.queue("exampleQueue").address            # 'exampleQueue'
    config.settings_for("exampleQueue").dead_letter_address

.. note:: Evolving
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from routing.broker.settings import (
    AddressSettings,
    AddressSettingsRepository,
    WildcardConfig,
    _FrozenMapping,
)
from routing.broker.validation import (
    ConfigError,
    validate_address_name,
    validate_boolean,
    validate_divert_routing_type,
    validate_double,
    validate_filter,
    validate_int,
    validate_long,
    validate_name,
    validate_routing_type,
    validate_unique_names,
)

__all__ = [
    "ANYCAST",
    "MULTICAST",
    "ROUTING_TYPES",
    "AddressConfig",
    "BrokerConfig",
    "ConfigError",
    "DivertConfig",
    "QueueConfig",
    "WildcardConfig",
    "load_config",
    "parse_config",
]

ANYCAST, MULTICAST = "ANYCAST", "MULTICAST"
ROUTING_TYPES = (ANYCAST, MULTICAST)
"""The routing types of a queue, an address, and a message's ``routing_type`` (SPEC §3.1)."""
_LEGACY_QUEUE_ROUTING_TYPE = MULTICAST  # ActiveMQDefaultConfiguration.DEFAULT_ROUTING_TYPE
_XINCLUDE_NS = "http://www.w3.org/2001/XInclude"
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")

# ---------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class QueueConfig:
    """A queue bound to ``address``; ``filter`` None means every message matches."""

    name: str
    address: str
    routing_type: str  # 'ANYCAST' | 'MULTICAST'
    filter: str | None = None

    def __post_init__(self) -> None:
        if self.routing_type not in ROUTING_TYPES:
            raise ConfigError(
                f"queue '{self.name}' on address '{self.address}': unknown routing type "
                f"'{self.routing_type}'; expected ANYCAST or MULTICAST"
            )


@dataclass(frozen=True)
class AddressConfig:
    """An address, its queues in declaration order and the routing types it supports.

    ``routing_types`` always includes the routing type of each of its queues
    (Artemis adds a queue's type to its address when it creates the queue).
    """

    name: str
    queues: tuple[QueueConfig, ...] = ()
    routing_types: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        queues = tuple(self.queues)
        for queue in queues:
            if queue.address != self.name:
                raise ConfigError(
                    f"address '{self.name}': queue '{queue.name}' names address '{queue.address}'"
                )
        types = frozenset(self.routing_types) | {q.routing_type for q in queues}
        unknown = sorted(types - set(ROUTING_TYPES))
        if unknown:
            raise ConfigError(
                f"address '{self.name}': unknown routing type '{unknown[0]}'; "
                "expected ANYCAST or MULTICAST"
            )
        object.__setattr__(self, "queues", queues)
        object.__setattr__(self, "routing_types", types)


@dataclass(frozen=True)
class DivertConfig:
    """A divert on ``address`` copying matching messages to ``forwarding_addresses``.

    ``routing_name`` None means "not given": Artemis then draws a random UUID,
    so the divert is alone in its round-robin group.
    """

    name: str
    address: str
    forwarding_addresses: tuple[str, ...]
    filter: str | None
    routing_name: str | None
    routing_type: str = "STRIP"  # ANYCAST | MULTICAST | PASS | STRIP
    exclusive: bool = False

    def __post_init__(self) -> None:
        where = f"divert '{self.name}'"
        validate_address_name(self.address, where)
        forwarding = tuple(self.forwarding_addresses)
        if not forwarding or any(not a for a in forwarding):
            raise ConfigError(f"{where}: <forwarding-address> names no address")
        for target in forwarding:
            validate_address_name(target, where, "<forwarding-address>")
        validate_divert_routing_type(self.routing_type, self.name)
        object.__setattr__(self, "forwarding_addresses", forwarding)


def _empty_repository() -> AddressSettingsRepository:
    return AddressSettingsRepository(())


@dataclass(frozen=True)
class BrokerConfig:
    """The parsed configuration the job runs with.

    :param addresses: by name, in first-declaration order (read-only mapping)
    :param diverts: in declaration order
    :param address_settings: the address-settings repository (same wildcards)
    :param wildcards: the ``<wildcard-addresses>`` characters
    :param persist_delivery_count_before_delivery: stored only; delivery counts
        in this job are always durable (the ``true`` behaviour, SPEC §4)
    :raises ConfigError: when a name is used by two queues, two diverts, or a
        divert and a queue
    """

    addresses: Mapping[str, AddressConfig]
    diverts: tuple[DivertConfig, ...] = ()
    address_settings: AddressSettingsRepository = field(default_factory=_empty_repository)
    wildcards: WildcardConfig = field(default_factory=WildcardConfig)
    persist_delivery_count_before_delivery: bool = False
    _queues: Mapping[str, QueueConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        addresses: _FrozenMapping[str, AddressConfig] = _FrozenMapping(self.addresses)
        for key, address in addresses.items():
            if key != address.name:
                raise ConfigError(f"address '{address.name}' is filed under the name '{key}'")
        object.__setattr__(self, "addresses", addresses)
        object.__setattr__(self, "diverts", tuple(self.diverts))
        if self.address_settings.wildcards != self.wildcards:
            if len(self.address_settings) or self.address_settings.literal_match_markers:
                raise ValueError(
                    "address_settings was built with other wildcards "
                    f"({self.address_settings.wildcards}) than the configuration's ({self.wildcards})"
                )
            object.__setattr__(
                self, "address_settings", AddressSettingsRepository((), self.wildcards)
            )
        pairs = [(q.name, a.name) for a in addresses.values() for q in a.queues]
        validate_unique_names(pairs, [d.name for d in self.diverts])
        queues = _FrozenMapping((q.name, q) for a in addresses.values() for q in a.queues)
        object.__setattr__(self, "_queues", queues)

    @property
    def queues(self) -> Mapping[str, QueueConfig]:
        """Every queue by name (queue names are unique across addresses)."""
        return self._queues

    def queue(self, name: str) -> QueueConfig | None:
        """The queue called ``name``, or None."""
        return self._queues.get(name)

    def settings_for(self, address: str) -> AddressSettings:
        """The merged address settings of ``address`` (defaults applied)."""
        return self.address_settings.match(address)


# ---------------------------------------------------------------------------
# Safe XML


def _forbid(source: str, what: str) -> Callable[..., NoReturn]:
    def handler(*_: object) -> NoReturn:
        raise ConfigError(
            f"{source}: {what} is not allowed (entity declarations can expand without "
            "bound or read other files; Artemis configurations need none)"
        )

    return handler


def _parse_xml(data: str | bytes, source: str) -> ET.Element:
    """Parse with expat, refusing any DOCTYPE, entity declaration or external entity.

    The DOCTYPE handler fires before any entity is declared, so an entity
    expansion bomb or an external entity is refused at once. Element and
    attribute names are reduced to their local names (the file may or may not
    use the ``urn:activemq`` namespaces); namespaced attributes are dropped.
    """
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _forbid(source, "a DOCTYPE declaration")
    parser.EntityDeclHandler = _forbid(source, "an entity declaration")
    parser.UnparsedEntityDeclHandler = _forbid(source, "an entity declaration")
    parser.ExternalEntityRefHandler = _forbid(source, "an external entity")

    def start(name: str, attrs: dict[str, str]) -> None:
        namespace, _, local = name.rpartition(" ")
        if namespace == _XINCLUDE_NS:
            raise ConfigError(
                f"{source}: <xi:{local}> is not supported; put the included content in the file"
            )
        builder.start(local, {k: v for k, v in attrs.items() if " " not in k})

    def end(name: str) -> None:
        builder.end(name.rpartition(" ")[2])

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ConfigError(
            f"{source}: not well-formed XML: {expat.ErrorString(exc.code)} "
            f"at line {exc.lineno}, column {exc.offset + 1}"
        ) from exc
    return builder.close()


# ---------------------------------------------------------------------------
# Reading elements


def _resolve(value: str, where: str) -> str:
    """Replace ``${name:default}`` by its default; ``${name}`` alone is an error.

    Artemis would look ``name`` up in system properties and the environment;
    SPEC §4 makes the job use only the default, so a replay does not depend on
    the machine it runs on. Like Artemis, the text up to the first ``}`` is the
    placeholder and name and default are split at the first ``:`` and trimmed.
    """

    def replace(m: re.Match[str]) -> str:
        name, colon, default = m.group(1).partition(":")
        if not colon:
            raise ConfigError(
                f"{where}: placeholder ${{{name.strip()}}} has no default "
                f"(write ${{{name.strip()}:value}})"
            )
        return default.strip()

    return _PLACEHOLDER.sub(replace, value)


def _child(element: ET.Element, tag: str) -> ET.Element | None:
    """The first direct child called ``tag``."""
    return next((c for c in element if c.tag == tag), None)


def _last_child(element: ET.Element, tag: str) -> ET.Element | None:
    """The last direct child called ``tag`` (Artemis loops over children, last wins)."""
    found = None
    for child in element:
        if child.tag == tag:
            found = child
    return found


def _text(element: ET.Element, where: str) -> str:
    """Trimmed text content with placeholders resolved (Artemis ``getTrimmedTextContent``)."""
    return _resolve("".join(element.itertext()), where).strip()


def _attr(element: ET.Element, name: str, where: str) -> str | None:
    """An attribute with placeholders resolved; not trimmed, as in Artemis."""
    value = element.get(name)
    return None if value is None else _resolve(value, where)


def _optional_text(element: ET.Element, tag: str, where: str | None = None) -> str | None:
    """The text of the first ``<tag>`` child, or None; errors say ``where: <tag>``."""
    child = _child(element, tag)
    label = f"<{tag}>" if where is None else f"{where}: <{tag}>"
    return None if child is None else _text(child, label)


def _filter(element: ET.Element, where: str) -> str | None:
    """``<filter string="..."/>``; an empty string is no filter (Artemis ``createFilter``)."""
    child = _last_child(element, "filter")
    if child is None:
        return None
    return _attr(child, "string", f"{where}: <filter>") or None


# ---------------------------------------------------------------------------
# Sections


def _parse_wildcards(core: ET.Element) -> WildcardConfig:
    """``<wildcard-addresses>``; like Artemis, only a value's first character counts.

    ``<enabled>`` / ``<routing-enabled>`` switch wildcard *routing* (sending to
    ``a.*``), which the job does not do, so they are ignored.
    """
    element = _child(core, "wildcard-addresses")
    defaults = WildcardConfig()
    if element is None:
        return defaults
    chars = {}
    for tag, default in (
        ("delimiter", defaults.delimiter),
        ("any-words", defaults.any_words),
        ("single-word", defaults.single_word),
    ):
        value = _optional_text(element, tag, "<wildcard-addresses>")
        if value == "":
            raise ConfigError(f"<wildcard-addresses>: <{tag}> is empty")
        chars[tag] = default if value is None else value[0]
    return WildcardConfig(chars["delimiter"], chars["any-words"], chars["single-word"])


_Converter = Callable[[str, str], object]


def _string(text: str, where: str) -> str:
    return text


def _address(text: str, where: str) -> str:
    """An address a setting sends to (``dead-letter-address``, ``expiry-address``); empty
    stays empty (what it means is :class:`routing.broker.settings.AddressSettings`')."""
    return validate_address_name(text, where, "the address") if text else text


# address-setting element -> (AddressSettings field, converter); names as in
# FileConfigurationParser, compared case-insensitively as it does.
_SETTING_ELEMENTS: dict[str, tuple[str, _Converter]] = {
    "dead-letter-address": ("dead_letter_address", _address),
    "max-delivery-attempts": ("max_delivery_attempts", validate_int),
    "redelivery-delay": ("redelivery_delay", validate_long),
    "redelivery-delay-multiplier": ("redelivery_delay_multiplier", validate_double),
    "max-redelivery-delay": ("max_redelivery_delay", validate_long),
    "expiry-address": ("expiry_address", _address),
    "expiry-delay": ("expiry_delay", validate_long),
    "min-expiry-delay": ("min_expiry_delay", validate_long),
    "max-expiry-delay": ("max_expiry_delay", validate_long),
    "no-expiry": ("no_expiry", validate_boolean),
    "auto-create-dead-letter-resources": ("auto_create_dead_letter_resources", validate_boolean),
    "dead-letter-queue-prefix": ("dead_letter_queue_prefix", _string),
    "dead-letter-queue-suffix": ("dead_letter_queue_suffix", _string),
    "auto-create-expiry-resources": ("auto_create_expiry_resources", validate_boolean),
    "expiry-queue-prefix": ("expiry_queue_prefix", _string),
    "expiry-queue-suffix": ("expiry_queue_suffix", _string),
    "send-to-dla-on-no-route": ("send_to_dla_on_no_route", validate_boolean),
    "auto-create-addresses": ("auto_create_addresses", validate_boolean),
    "auto-create-queues": ("auto_create_queues", validate_boolean),
    # read and checked; a Core producer's message without a routing type creates nothing
    # in Artemis (ServerSessionImpl.checkAutoCreate), so they change no routing here
    "default-address-routing-type": ("default_address_routing_type", validate_routing_type),
    "default-queue-routing-type": ("default_queue_routing_type", validate_routing_type),
}


def _parse_address_settings(core: ET.Element) -> list[tuple[str, dict[str, object]]]:
    """Every ``<address-setting>`` of the first ``<address-settings>``: (match, set fields).

    A field is "set" when its element is present, even empty; a repeated
    element keeps its last value, as Artemis's loop over the children does.
    """
    element = _child(core, "address-settings")
    entries: list[tuple[str, dict[str, object]]] = []
    if element is None:
        return entries
    for setting in element:
        if setting.tag != "address-setting":
            continue
        match = validate_name(
            _attr(setting, "match", "address-setting"), "address-setting", "match attribute"
        )
        where = f"address-setting match '{match}'"
        values: dict[str, object] = {}
        for child in setting:
            spec = _SETTING_ELEMENTS.get(child.tag.lower())
            if spec is not None:
                name, convert = spec
                element_where = f"{where}: <{child.tag}>"
                values[name] = convert(_text(child, element_where), element_where)
        entries.append((match, values))
    return entries


def _parse_queue(element: ET.Element, address: str | None, where: str) -> tuple[str, str | None]:
    """A queue's name and filter (its address and type come from where it is declared)."""
    name = validate_name(_attr(element, "name", where), where, "queue name attribute")
    queue_where = f"queue '{name}'" + (f" on address '{address}'" if address else "")
    return name, _filter(element, queue_where)


@dataclass
class _AddressState:
    """An address while declarations are applied in order, as the broker deploys them."""

    routing_types: set[str] = field(default_factory=set)
    queues: dict[str, QueueConfig] = field(default_factory=dict)


class _Addresses:
    """Applies address and queue declarations the way ``ActiveMQServerImpl`` deploys them.

    - A queue name is unique across addresses (SPEC §4): a second address using
      it is a ConfigError (Artemis logs a warning and skips it).
    - The same queue declared again on the same address updates it in place
      (routing type, filter; position kept), as ``updateQueue`` does.
    - An address declared again ends with the routing types of its last
      declaration, unless one of its queues needs a dropped type: then Artemis's
      update fails and the union of all declarations stays.
    """

    def __init__(self) -> None:
        self.state: dict[str, _AddressState] = {}
        self.owner: dict[str, str] = {}

    def _put(self, state: _AddressState, address: str, queue: QueueConfig) -> None:
        owner = self.owner.setdefault(queue.name, address)
        if owner != address:
            raise ConfigError(
                f"queue '{queue.name}' on address '{address}': name already used by the "
                f"queue on address '{owner}'"
            )
        state.queues[queue.name] = queue

    def declare(self, address: str, routing_types: set[str], queues: list[QueueConfig]) -> None:
        state = self.state.setdefault(address, _AddressState())
        merged = state.routing_types | routing_types
        for queue in queues:
            self._put(state, address, queue)
        needed = {q.routing_type for q in state.queues.values()}
        state.routing_types = set(routing_types) if needed <= routing_types else merged

    def legacy_queue(self, queue: QueueConfig) -> None:
        """A ``<queues>`` entry: created after the addresses, auto-creating its address."""
        state = self.state.setdefault(queue.address, _AddressState())
        if self.owner.get(queue.name) == queue.address and (
            queue.routing_type not in state.routing_types
        ):
            return  # Artemis refuses to update a queue to a type its address lacks
        state.routing_types.add(queue.routing_type)
        self._put(state, queue.address, queue)

    def build(self) -> dict[str, AddressConfig]:
        return {
            name: AddressConfig(name, tuple(s.queues.values()), frozenset(s.routing_types))
            for name, s in self.state.items()
        }


def _parse_addresses(core: ET.Element) -> dict[str, AddressConfig]:
    """``<addresses>`` then the deprecated ``<queues>`` block (MULTICAST queues)."""
    addresses = _Addresses()
    element = _child(core, "addresses")
    for declaration in [] if element is None else element:
        if declaration.tag != "address":
            continue
        name = validate_address_name(
            _attr(declaration, "name", "address"), "address", "name attribute"
        )
        where = f"address '{name}'"
        if len(declaration) == 0 and not declaration.text:
            raise ConfigError(f"{where}: no routing type; expected <anycast> and/or <multicast>")
        routing_types: set[str] = set()
        queues: list[QueueConfig] = []
        for kind in declaration:
            if not isinstance(kind.tag, str):  # a comment or processing instruction
                continue
            if kind.tag not in ("anycast", "multicast"):
                # Artemis's schema allows nothing else here: a typo would silently drop
                # the queues inside it, and their messages with them (NO_ROUTE).
                raise ConfigError(
                    f"{where}: unknown routing type <{kind.tag}>; expected <anycast> and/or "
                    "<multicast>"
                )
            routing_type = kind.tag.upper()
            routing_types.add(routing_type)
            for queue in kind.iter("queue"):
                queue_name, queue_filter = _parse_queue(queue, name, where)
                queues.append(QueueConfig(queue_name, name, routing_type, queue_filter))
        addresses.declare(name, routing_types, queues)

    legacy = _child(core, "queues")
    for queue in [] if legacy is None else legacy.iter("queue"):
        queue_name, queue_filter = _parse_queue(queue, None, "<queues>")
        where = f"queue '{queue_name}' in <queues>"
        address = validate_address_name(_optional_text(queue, "address", where), where)
        addresses.legacy_queue(
            QueueConfig(queue_name, address, _LEGACY_QUEUE_ROUTING_TYPE, queue_filter)
        )
    return addresses.build()


def _parse_divert(element: ET.Element) -> DivertConfig:
    name = validate_name(_attr(element, "name", "divert"), "divert", "name attribute")
    where = f"divert '{name}'"
    address = validate_name(_optional_text(element, "address", where), where, "<address>")
    forwarding = validate_name(
        _optional_text(element, "forwarding-address", where), where, "<forwarding-address>"
    )
    # DivertImpl splits on ',' and trims each part; empty parts name no address.
    targets = tuple(part.strip() for part in forwarding.split(",") if part.strip())
    exclusive = _optional_text(element, "exclusive", where)
    routing_type = _optional_text(element, "routing-type", where)
    return DivertConfig(
        name=name,
        address=address,
        forwarding_addresses=targets,
        filter=_filter(element, where),
        routing_name=_optional_text(element, "routing-name", where),
        routing_type="STRIP"
        if routing_type is None
        else validate_divert_routing_type(routing_type, name),
        exclusive=False
        if exclusive is None
        else validate_boolean(exclusive, f"{where}: <exclusive>"),
    )


def _parse_diverts(core: ET.Element) -> tuple[DivertConfig, ...]:
    """Every ``<divert>`` of every ``<diverts>`` block, in declaration order."""
    return tuple(
        _parse_divert(divert)
        for block in core
        if block.tag == "diverts"
        for divert in block
        if divert.tag == "divert"
    )


def _find_core(root: ET.Element) -> ET.Element:
    """The ``<core>`` element (Artemis parses the first one), else the root itself."""
    return next(root.iter("core"), root)


def _validate_filters(
    addresses: Mapping[str, AddressConfig], diverts: Iterable[DivertConfig]
) -> None:
    for address in addresses.values():
        for queue in address.queues:
            if queue.filter is not None:
                validate_filter(queue.filter, f"queue '{queue.name}' on address '{address.name}'")
    for divert in diverts:
        if divert.filter is not None:
            validate_filter(divert.filter, f"divert '{divert.name}'")


def _parse(data: str | bytes, source: str) -> BrokerConfig:
    core = _find_core(_parse_xml(data, source))
    wildcards = _parse_wildcards(core)
    markers = _optional_text(core, "literal-match-markers")
    repository = AddressSettingsRepository(
        _parse_address_settings(core), wildcards, literal_match_markers=markers
    )
    addresses = _parse_addresses(core)
    diverts = _parse_diverts(core)
    persist = _optional_text(core, "persist-delivery-count-before-delivery")
    config = BrokerConfig(
        addresses=addresses,
        diverts=diverts,
        address_settings=repository,
        wildcards=wildcards,
        persist_delivery_count_before_delivery=False
        if persist is None
        else validate_boolean(persist, "<persist-delivery-count-before-delivery>"),
    )
    _validate_filters(config.addresses, config.diverts)
    return config


def parse_config(xml_text: str) -> BrokerConfig:
    """Parse the text of a ``broker.xml``.

    :param xml_text: the whole file (``bytes`` are accepted too; expat then
        honours the XML declaration's encoding)
    :return: the validated configuration
    :raises ConfigError: for anything the job cannot run with
    """
    if not isinstance(xml_text, str | bytes):
        raise TypeError(f"xml_text must be str, found {type(xml_text).__name__}")
    return _parse(xml_text, "broker.xml")


def load_config(path: str | os.PathLike[str]) -> BrokerConfig:
    """Read and parse a ``broker.xml`` file.

    :param path: the file
    :return: the validated configuration
    :raises ConfigError: when the file cannot be read or is invalid
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{os.fspath(path)}: cannot read the configuration: {exc.strerror}"
        ) from exc
    return _parse(data, os.fspath(path))
