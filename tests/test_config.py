"""``broker.xml`` parsing and validation (SPEC §4), pure Python, no Spark session."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import time
from pathlib import Path

import pytest

import routing.broker.validation
from routing.broker.config import (
    AddressConfig,
    BrokerConfig,
    ConfigError,
    DivertConfig,
    QueueConfig,
    WildcardConfig,
    load_config,
    parse_config,
)
from routing.broker.settings import AddressSettings, AddressSettingsRepository

NAMESPACED = (
    '<configuration xmlns="urn:activemq">'
    '<core xmlns="urn:activemq:core">{body}</core></configuration>'
)
PLAIN = "<configuration><core>{body}</core></configuration>"


def broker(body: str, template: str = NAMESPACED) -> BrokerConfig:
    """Parse a ``<core>`` body wrapped in a namespaced configuration."""
    return parse_config(template.format(body=body))


def conformance_files() -> list[Path]:
    shared = Path(__file__).resolve().parents[2] / "shared"
    if not shared.is_dir():
        shared = Path(__file__).resolve().parent / "shared"
    return sorted((shared / "conformance").glob("*.json"))


# ---------------------------------------------------------------------------
# Real configurations


def test_divert_example_fixture(shared_dir: Path) -> None:
    config = load_config(shared_dir / "fixtures" / "artemis-example-divert-server0-broker.xml")
    prices, orders = config.diverts[1], config.diverts[0]
    assert prices == DivertConfig(
        name="prices-divert",
        address="priceUpdates",
        forwarding_addresses=("priceForwarding",),
        filter="office='New York'",
        routing_name="prices-divert",
        routing_type="STRIP",
        exclusive=True,
    )
    assert (orders.name, orders.exclusive, orders.filter) == ("order-divert", False, None)
    assert orders.forwarding_addresses == ("spyTopic",)
    assert config.addresses["spyTopic"] == AddressConfig("spyTopic", (), frozenset({"MULTICAST"}))
    assert config.queue("priceForwarding") == QueueConfig(
        "priceForwarding", "priceForwarding", "ANYCAST"
    )
    assert list(config.addresses) == ["priceForwarding", "orders", "spyTopic", "priceUpdates"]
    assert config.persist_delivery_count_before_delivery is False


def test_dead_letter_example_fixture(shared_dir: Path) -> None:
    config = load_config(shared_dir / "fixtures" / "artemis-example-dead-letter-broker.xml")
    settings = config.settings_for("exampleQueue")
    assert settings.dead_letter_address == "deadLetterQueue"
    assert settings.max_delivery_attempts == 3
    assert config.settings_for("deadLetterQueue") == AddressSettings()
    assert config.queue("exampleQueue") == QueueConfig("exampleQueue", "exampleQueue", "ANYCAST")
    assert config.queue("deadLetterQueue") is not None


def test_full_configuration_test_fixture(shared_dir: Path) -> None:
    config = load_config(shared_dir / "fixtures" / "artemis-ConfigurationTest-full-config.xml")
    diverts = {d.name: d for d in config.diverts}
    assert [d.name for d in config.diverts] == ["divert1", "divert2", "divert3"]
    assert diverts["divert1"].exclusive and diverts["divert1"].filter == "speed > 88"
    assert diverts["divert2"].routing_name == diverts["divert3"].routing_name == "routing-name2"
    assert diverts["divert2"].filter == diverts["divert3"].filter == "speed < 88"
    assert not diverts["divert3"].exclusive

    addr2 = config.addresses["addr2"]  # declared twice: the declarations merge
    assert [(q.name, q.routing_type) for q in addr2.queues] == [
        ("q3", "MULTICAST"),
        ("q4", "MULTICAST"),
        ("q5", "MULTICAST"),
        ("q6", "MULTICAST"),
        ("q7", "ANYCAST"),
        ("q8", "ANYCAST"),
    ]
    assert addr2.routing_types == {"ANYCAST", "MULTICAST"}
    assert config.queue("q3").filter == "color='red'"  # type: ignore[union-attr]
    assert config.queue("q1") == QueueConfig("q1", "addr1", "ANYCAST", "color='blue'")
    # The deprecated <queues> block: MULTICAST queues that create their address.
    assert config.queue("queue1") == QueueConfig("queue1", "address1", "MULTICAST", "color='red'")
    assert config.addresses["address2"].routing_types == {"MULTICAST"}

    a1 = config.settings_for("a1")
    assert (a1.dead_letter_address, a1.expiry_address) == ("a1.1", "a1.2")
    assert (a1.expiry_delay, a1.min_expiry_delay, a1.max_expiry_delay) == (1, 2, 3)
    assert a1.no_expiry is True
    assert (a1.redelivery_delay, a1.max_redelivery_delay) == (1, 10)
    assert a1.max_delivery_attempts == 10
    a2 = config.settings_for("a2")
    assert a2.dead_letter_address == "a2.1" and a2.auto_create_dead_letter_resources
    assert (a2.dead_letter_queue_prefix, a2.dead_letter_queue_suffix) == ("", ".DLQ")
    assert a2.expiry_address == "a2.2" and a2.auto_create_expiry_resources
    assert (a2.expiry_queue_prefix, a2.expiry_queue_suffix) == ("", ".EXP")
    assert a2.redelivery_delay == 5
    assert config.settings_for("a3") == AddressSettings()
    assert config.persist_delivery_count_before_delivery is True
    assert config.wildcards == WildcardConfig()


@pytest.mark.parametrize("path", conformance_files(), ids=lambda p: p.stem[:3])
def test_conformance_configurations(path: Path) -> None:
    scenario = json.loads(path.read_text())
    failing = [
        step["run"]
        for step in scenario["steps"]
        if "run" in step and step["run"].get("expect_exit") == 2
    ]
    if failing:
        with pytest.raises(ConfigError) as info:
            parse_config(scenario["broker_xml"])
        assert failing[0]["stderr_contains"] in str(info.value)
    else:
        assert isinstance(parse_config(scenario["broker_xml"]), BrokerConfig)


def test_conformance_messages_name_the_element() -> None:
    by_number = {p.stem[:3]: json.loads(p.read_text())["broker_xml"] for p in conformance_files()}
    expected = {
        "031": "divert 'dup': name already used by another divert",
        "032": "address-setting match 'orders.#.eu': '#' must be the last word",
        "033": "divert 'bad-filter': filter \"color = 'red' AND AND size > 1\" does not parse: ",
    }
    for number, message in expected.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(by_number[number])


def test_conformance_030_precedence_and_merge(shared_dir: Path) -> None:
    (path,) = (shared_dir / "conformance").glob("030-*.json")
    config = parse_config(json.loads(path.read_text())["broker_xml"])
    expected = {
        "add.addressA": ("dlaA", 1),
        "add.addressB": ("dlaB", 1),
        "addressC": ("dlaC", 1),
        "add.special": ("dlaB", 2),
        "add.x.y": ("dlaC", 1),
        "deep.er.still": ("dlaE", 1),
        "deep.x": ("dlaD", 1),
        "deep": ("dlaD", 1),
    }
    for address, (dla, attempts) in expected.items():
        settings = config.settings_for(address)
        assert (settings.dead_letter_address, settings.max_delivery_attempts) == (dla, attempts)


def test_conformance_034_custom_wildcards(shared_dir: Path) -> None:
    (path,) = (shared_dir / "conformance").glob("034-*.json")
    config = parse_config(json.loads(path.read_text())["broker_xml"])
    assert config.wildcards == WildcardConfig(delimiter="-", any_words="#", single_word="?")
    assert config.settings_for("sales-eu").dead_letter_address == "dlaOne"
    assert config.settings_for("sales-eu-north").dead_letter_address == "dlaMany"
    assert config.settings_for("sales.eu").dead_letter_address == "dlaDefault"


# ---------------------------------------------------------------------------
# Document shape

BODY = """
  <address-settings><address-setting match="#"><max-delivery-attempts>4</max-delivery-attempts>
  </address-setting></address-settings>
  <diverts><divert name="d"><address>A</address><forwarding-address>B</forwarding-address>
  </divert></diverts>
  <addresses><address name="A"><anycast><queue name="qa"/></anycast></address>
  <address name="B"><multicast><queue name="qb"/></multicast></address></addresses>
"""


def test_namespaced_and_plain_files_read_the_same() -> None:
    namespaced, plain = broker(BODY), broker(BODY, PLAIN)
    assert namespaced == plain
    assert plain.settings_for("A").max_delivery_attempts == 4


def test_prefixed_namespace_and_bare_core_root() -> None:
    prefixed = (
        '<c:configuration xmlns:c="urn:activemq"><x:core xmlns:x="urn:activemq:core">'
        + BODY.replace("<", "<x:").replace("<x:/", "</x:")
        + "</x:core></c:configuration>"
    )
    assert parse_config(prefixed) == broker(BODY)
    assert parse_config(f"<core>{BODY}</core>") == broker(BODY)


def test_unused_elements_are_ignored() -> None:
    config = broker(
        "<security-enabled>maybe</security-enabled><bridges><bridge name='b'><queue-name>x"
        "</queue-name><filter string='((('/></bridge></bridges>"
        "<address-settings><address-setting match='a'><max-size-bytes>${big}</max-size-bytes>"
        "<disk-full-policy>DROP</disk-full-policy><redelivery-delay>3</redelivery-delay>"
        "</address-setting></address-settings>"
    )
    assert config.settings_for("a").redelivery_delay == 3
    assert config.addresses == {}


def test_empty_configuration() -> None:
    config = parse_config("<configuration/>")
    assert (dict(config.addresses), config.diverts, len(config.address_settings)) == ({}, (), 0)
    assert config.settings_for("x") == AddressSettings()


def test_bytes_honour_the_xml_declaration() -> None:
    xml = '<?xml version="1.0" encoding="ISO-8859-1"?><configuration><core><addresses>'
    xml += '<address name="z\xfcrich"><anycast/></address></addresses></core></configuration>'
    config = parse_config(xml.encode("latin-1"))  # type: ignore[arg-type]
    assert list(config.addresses) == ["zürich"]


def test_load_config_reports_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.xml: cannot read the configuration"):
        load_config(tmp_path / "missing.xml")


def test_load_config_names_the_file_in_xml_errors(tmp_path: Path) -> None:
    path = tmp_path / "broker.xml"
    path.write_text("<configuration><core></configuration>")
    with pytest.raises(ConfigError, match=r"broker\.xml: not well-formed XML: .* at line 1"):
        load_config(path)


# ---------------------------------------------------------------------------
# Safe parsing

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<configuration><core><addresses><address name="&lol9;"><anycast/></address></addresses></core>
</configuration>"""

UNSAFE_DOCUMENTS = {
    "entity-expansion bomb": BILLION_LAUGHS,
    "external entity": (
        '<!DOCTYPE c [<!ENTITY secret SYSTEM "file:///etc/passwd">]>'
        '<configuration><core><addresses><address name="&secret;"><anycast/></address>'
        "</addresses></core></configuration>"
    ),
    "external DTD": '<!DOCTYPE c SYSTEM "http://example.invalid/x.dtd"><configuration/>',
    "parameter entity": (
        '<!DOCTYPE c [<!ENTITY % p SYSTEM "file:///etc/passwd"> %p;]><configuration/>'
    ),
    "internal entity": '<!DOCTYPE c [<!ENTITY a "b">]><configuration>&a;</configuration>',
}


@pytest.mark.parametrize("name", sorted(UNSAFE_DOCUMENTS))
def test_unsafe_documents_are_refused_quickly(name: str) -> None:
    started = time.perf_counter()
    with pytest.raises(ConfigError, match="DOCTYPE declaration is not allowed"):
        parse_config(UNSAFE_DOCUMENTS[name])
    assert time.perf_counter() - started < 1.0


def test_undeclared_entity_is_malformed() -> None:
    with pytest.raises(ConfigError, match="not well-formed XML: undefined entity"):
        parse_config("<configuration>&secret;</configuration>")


def test_xinclude_is_refused() -> None:
    xml = (
        '<configuration xmlns:xi="http://www.w3.org/2001/XInclude"><core>'
        '<xi:include href="/etc/passwd" parse="text"/></core></configuration>'
    )
    with pytest.raises(ConfigError, match="<xi:include> is not supported"):
        parse_config(xml)


# ---------------------------------------------------------------------------
# Placeholders


def test_placeholders_take_their_default_in_used_values() -> None:
    config = broker(
        "<address-settings><address-setting match='${m:orders.*}'>"
        "<max-delivery-attempts>${attempts: 3 }</max-delivery-attempts>"
        "<dead-letter-address>${dla:}</dead-letter-address></address-setting></address-settings>"
        "<diverts><divert name='${n:d1}'><address>${src:orders.eu}</address>"
        "<forwarding-address>${a:X}, ${b:Y}</forwarding-address>"
        "<filter string=\"${f:color = 'red'}\"/></divert></diverts>"
        "<addresses><address name='${addr:orders.eu}'><anycast>"
        "<queue name='${q:q1}'/></anycast></address></addresses>"
    )
    divert = config.diverts[0]
    assert (divert.name, divert.address, divert.forwarding_addresses) == (
        "d1",
        "orders.eu",
        ("X", "Y"),
    )
    assert divert.filter == "color = 'red'"
    assert config.queue("q1") == QueueConfig("q1", "orders.eu", "ANYCAST")
    settings = config.settings_for("orders.eu")
    assert settings.max_delivery_attempts == 3
    assert settings.dead_letter_address == ""  # '${dla:}' is an explicit empty value


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "<diverts><divert name='d'><address>${src}</address>"
            "<forwarding-address>B</forwarding-address></divert></diverts>",
            r"divert 'd': <address>: placeholder \$\{src\} has no default",
        ),
        (
            "<addresses><address name='${addr}'><anycast/></address></addresses>",
            r"address: placeholder \$\{addr\} has no default",
        ),
        (
            "<address-settings><address-setting match='a'>"
            "<redelivery-delay>${delay}</redelivery-delay></address-setting></address-settings>",
            r"address-setting match 'a': <redelivery-delay>: placeholder \$\{delay\}",
        ),
        (
            "<persist-delivery-count-before-delivery>${p}</persist-delivery-count-before-delivery>",
            r"<persist-delivery-count-before-delivery>: placeholder \$\{p\} has no default",
        ),
    ],
)
def test_placeholders_without_default_in_used_values(body: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        broker(body)


def test_placeholders_without_default_in_ignored_elements() -> None:
    config = broker(
        "<security-settings><security-setting match='${a2Prop}'/></security-settings>"
        "<addresses><address name='A'><anycast><queue name='q' purge-on-no-consumers='${x}'>"
        "<durable>${falseProp}</durable></queue></anycast></address></addresses>"
    )
    assert config.queue("q") == QueueConfig("q", "A", "ANYCAST")


# ---------------------------------------------------------------------------
# Addresses and queues


def test_address_declared_twice_keeps_routing_types_its_queues_need() -> None:
    config = broker(
        "<addresses><address name='A'><multicast><queue name='m'/></multicast></address>"
        "<address name='A'><anycast><queue name='a'/></anycast></address>"
        "<address name='B'><multicast/></address><address name='B'><anycast/></address>"
        "</addresses>"
    )
    assert [q.name for q in config.addresses["A"].queues] == ["m", "a"]
    assert config.addresses["A"].routing_types == {"ANYCAST", "MULTICAST"}
    # Artemis applies the last declaration's types when no queue needs the dropped one.
    assert config.addresses["B"].routing_types == {"ANYCAST"}


def test_queue_declared_again_on_its_address_is_updated_in_place() -> None:
    config = broker(
        "<addresses><address name='A'><anycast><queue name='q1'><filter string='a = 1'/></queue>"
        "<queue name='q2'/></anycast></address>"
        "<address name='A'><multicast><queue name='q1'><filter string='b = 2'/></queue>"
        "</multicast></address></addresses>"
    )
    assert config.addresses["A"].queues == (
        QueueConfig("q1", "A", "MULTICAST", "b = 2"),
        QueueConfig("q2", "A", "ANYCAST"),
    )
    assert config.addresses["A"].routing_types == {"ANYCAST", "MULTICAST"}


def test_legacy_queues_join_or_create_their_address() -> None:
    config = broker(
        "<addresses><address name='A'><anycast><queue name='qa'/></anycast></address></addresses>"
        "<queues><queue name='legacyA'><address>A</address></queue>"
        "<queue name='legacyB'><address>B</address><filter string='x = 1'/>"
        "<durable>false</durable></queue></queues>"
    )
    assert config.addresses["A"].routing_types == {"ANYCAST", "MULTICAST"}
    assert [q.name for q in config.addresses["A"].queues] == ["qa", "legacyA"]
    assert config.addresses["B"] == AddressConfig(
        "B", (QueueConfig("legacyB", "B", "MULTICAST", "x = 1"),), frozenset({"MULTICAST"})
    )


def test_empty_filter_is_no_filter() -> None:
    config = broker(
        "<addresses><address name='A'><anycast><queue name='q'><filter string=''/></queue>"
        "</anycast></address></addresses>"
    )
    assert config.queue("q").filter is None  # type: ignore[union-attr]


def test_queues_mapping_is_read_only_and_config_is_frozen() -> None:
    config = broker(BODY)
    assert set(config.queues) == {"qa", "qb"}
    with pytest.raises(TypeError):
        config.queues["x"] = QueueConfig("x", "A", "ANYCAST")  # type: ignore[index]
    with pytest.raises(TypeError):
        config.addresses["X"] = AddressConfig("X")  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.diverts = ()  # type: ignore[misc]
    assert config.queue("nope") is None


def test_config_pickles_for_spark_closures() -> None:
    config = broker(BODY)
    clone = pickle.loads(pickle.dumps(config))
    assert clone == config
    assert clone.queues == config.queues
    assert clone.settings_for("A") == config.settings_for("A")
    assert hash(clone) == hash(config)


# ---------------------------------------------------------------------------
# Diverts


def test_divert_defaults_and_forwarding_list() -> None:
    config = broker(
        "<diverts><divert name='d'><address>A</address>"
        "<forwarding-address> B, C ,,D, </forwarding-address></divert>"
        "<divert name='e'><routing-name></routing-name><address>A</address>"
        "<forwarding-address>B</forwarding-address><routing-type>PASS</routing-type>"
        "<exclusive> TRUE </exclusive><transformer-class-name>x.Y</transformer-class-name>"
        "</divert></diverts>"
    )
    d, e = config.diverts
    assert d == DivertConfig("d", "A", ("B", "C", "D"), None, None, "STRIP", False)
    assert (e.routing_name, e.routing_type, e.exclusive) == ("", "PASS", True)


# ---------------------------------------------------------------------------
# Address settings


def test_address_setting_values_as_artemis_writes_them() -> None:
    config = broker(
        "<address-settings><address-setting match='a'>"
        "<MAX-DELIVERY-ATTEMPTS> +5 </MAX-DELIVERY-ATTEMPTS>"
        "<redelivery-delay>-1</redelivery-delay><redelivery-delay>1000</redelivery-delay>"
        "<redelivery-delay-multiplier>1.5d</redelivery-delay-multiplier>"
        "<expiry-delay>9223372036854775807</expiry-delay><no-expiry>False</no-expiry>"
        "<send-to-dla-on-no-route>true</send-to-dla-on-no-route>"
        "<dead-letter-queue-prefix/><expiry-queue-suffix> .x </expiry-queue-suffix>"
        "</address-setting></address-settings>"
    )
    settings = config.settings_for("a")
    assert settings.max_delivery_attempts == 5
    assert settings.redelivery_delay == 1000  # a repeated element keeps its last value
    assert settings.max_redelivery_delay == 10000
    assert settings.redelivery_delay_multiplier == 1.5
    assert settings.expiry_delay == 2**63 - 1
    assert settings.no_expiry is False and settings.send_to_dla_on_no_route is True
    assert (settings.dead_letter_queue_prefix, settings.expiry_queue_suffix) == ("", ".x")


def test_explicit_empty_dead_letter_address_overrides_a_wider_match() -> None:
    config = broker(
        "<address-settings><address-setting match='#'><dead-letter-address>DLA"
        "</dead-letter-address></address-setting><address-setting match='quiet'>"
        "<dead-letter-address/></address-setting></address-settings>"
    )
    assert config.settings_for("quiet").dead_letter_address == ""
    assert config.settings_for("loud").dead_letter_address == "DLA"


def test_duplicate_address_setting_match_keeps_the_first() -> None:
    config = broker(
        "<address-settings><address-setting match='a'><max-delivery-attempts>1"
        "</max-delivery-attempts></address-setting><address-setting match='a'>"
        "<max-delivery-attempts>2</max-delivery-attempts></address-setting></address-settings>"
    )
    assert config.settings_for("a").max_delivery_attempts == 1


def test_wildcards_and_literal_match_markers() -> None:
    config = broker(
        "<literal-match-markers>()</literal-match-markers>"
        "<wildcard-addresses><enabled>false</enabled><delimiter>/</delimiter>"
        "<any-words>&gt;&gt;</any-words></wildcard-addresses>"
        "<address-settings><address-setting match='a/&gt;'><max-delivery-attempts>2"
        "</max-delivery-attempts></address-setting><address-setting match='(a/&gt;)'>"
        "<max-delivery-attempts>3</max-delivery-attempts></address-setting></address-settings>"
    )
    assert config.wildcards == WildcardConfig("/", ">", "*")  # Artemis uses the first character
    assert config.settings_for("a/b/c").max_delivery_attempts == 2
    assert config.settings_for("a/>").max_delivery_attempts == 3
    assert config.address_settings.literal_match_markers == "()"


# ---------------------------------------------------------------------------
# Validation errors

DIVERT = "<diverts><divert name='{name}'>{body}</divert></diverts>"
SETTING = "<address-settings><address-setting match='a'>{body}</address-setting></address-settings>"

INVALID = {
    "malformed": ("<addresses><address name='A'>", "broker.xml: not well-formed XML: "),
    "hash not last": (
        "<address-settings><address-setting match='orders.#.eu'/></address-settings>",
        "address-setting match 'orders.#.eu': '#' must be the last word",
    ),
    "custom any-words not last": (
        "<wildcard-addresses><any-words>+</any-words></wildcard-addresses>"
        "<address-settings><address-setting match='a.+.b'/></address-settings>",
        "address-setting match 'a.+.b': '+' must be the last word",
    ),
    "match missing": (
        "<address-settings><address-setting/></address-settings>",
        "address-setting: missing match attribute",
    ),
    "duplicate divert": (
        DIVERT.format(
            name="dup", body="<address>A</address><forwarding-address>B</forwarding-address>"
        )
        * 2,
        "divert 'dup': name already used by another divert",
    ),
    "queue on two addresses": (
        "<addresses><address name='A'><anycast><queue name='q'/></anycast></address>"
        "<address name='B'><multicast><queue name='q'/></multicast></address></addresses>",
        "queue 'q' on address 'B': name already used by the queue on address 'A'",
    ),
    "legacy queue on another address": (
        "<addresses><address name='A'><anycast><queue name='q'/></anycast></address></addresses>"
        "<queues><queue name='q'><address>B</address></queue></queues>",
        "queue 'q' on address 'B': name already used by the queue on address 'A'",
    ),
    "divert named like a queue": (
        "<addresses><address name='A'><anycast><queue name='q'/></anycast></address></addresses>"
        + DIVERT.format(
            name="q", body="<address>A</address><forwarding-address>B</forwarding-address>"
        ),
        "divert 'q': name already used by queue 'q' on address 'A'",
    ),
    "unknown routing type": (
        DIVERT.format(
            name="d1",
            body="<address>A</address><forwarding-address>B</forwarding-address>"
            "<routing-type>BOTH</routing-type>",
        ),
        "divert 'd1': unknown routing-type 'BOTH'; expected ANYCAST, MULTICAST, PASS or STRIP",
    ),
    "routing type is case-sensitive": (
        DIVERT.format(
            name="d1",
            body="<address>A</address><forwarding-address>B</forwarding-address>"
            "<routing-type>strip</routing-type>",
        ),
        "divert 'd1': unknown routing-type 'strip'",
    ),
    "divert without address": (
        DIVERT.format(name="d", body="<forwarding-address>B</forwarding-address>"),
        "divert 'd': missing <address>",
    ),
    "divert with empty address": (
        DIVERT.format(
            name="d", body="<address> </address><forwarding-address>B</forwarding-address>"
        ),
        "divert 'd': <address> is empty",
    ),
    "divert without forwarding address": (
        DIVERT.format(name="d", body="<address>A</address>"),
        "divert 'd': missing <forwarding-address>",
    ),
    "divert forwarding to nothing": (
        DIVERT.format(
            name="d", body="<address>A</address><forwarding-address>,</forwarding-address>"
        ),
        "divert 'd': <forwarding-address> names no address",
    ),
    "divert without name": (
        "<diverts><divert><address>A</address></divert></diverts>",
        "divert: missing name attribute",
    ),
    "non-boolean exclusive": (
        DIVERT.format(
            name="d",
            body="<address>A</address><forwarding-address>B</forwarding-address>"
            "<exclusive>yes</exclusive>",
        ),
        "divert 'd': <exclusive>: expected true or false, found 'yes'",
    ),
    "non-numeric max-delivery-attempts": (
        SETTING.format(body="<max-delivery-attempts>ten</max-delivery-attempts>"),
        "address-setting match 'a': <max-delivery-attempts>: expected a 32-bit integer, found 'ten'",
    ),
    "max-delivery-attempts overflow": (
        SETTING.format(body="<max-delivery-attempts>2147483648</max-delivery-attempts>"),
        "<max-delivery-attempts>: 2147483648 is out of range for a 32-bit integer",
    ),
    "decimal delay": (
        SETTING.format(body="<redelivery-delay>1.5</redelivery-delay>"),
        "<redelivery-delay>: expected a whole number of milliseconds, found '1.5'",
    ),
    "delay with unit": (
        SETTING.format(body="<expiry-delay>5s</expiry-delay>"),
        "<expiry-delay>: expected a whole number of milliseconds, found '5s'",
    ),
    "empty delay": (
        SETTING.format(body="<max-expiry-delay/>"),
        "<max-expiry-delay>: expected a whole number of milliseconds, found ''",
    ),
    "non-numeric multiplier": (
        SETTING.format(body="<redelivery-delay-multiplier>fast</redelivery-delay-multiplier>"),
        "<redelivery-delay-multiplier>: expected a decimal number, found 'fast'",
    ),
    "NaN multiplier": (
        SETTING.format(body="<redelivery-delay-multiplier>NaN</redelivery-delay-multiplier>"),
        "<redelivery-delay-multiplier>: expected a decimal number, found 'NaN'",
    ),
    "non-boolean no-expiry": (
        SETTING.format(body="<no-expiry>1</no-expiry>"),
        "address-setting match 'a': <no-expiry>: expected true or false, found '1'",
    ),
    "non-boolean persist-delivery-count": (
        "<persist-delivery-count-before-delivery>sometimes</persist-delivery-count-before-delivery>",
        "<persist-delivery-count-before-delivery>: expected true or false, found 'sometimes'",
    ),
    "address without routing type": (
        "<addresses><address name='A'/></addresses>",
        "address 'A': no routing type; expected <anycast> and/or <multicast>",
    ),
    "address without name": (
        "<addresses><address><anycast/></address></addresses>",
        "address: missing name attribute",
    ),
    "queue without name": (
        "<addresses><address name='A'><anycast><queue/></anycast></address></addresses>",
        "address 'A': missing queue name attribute",
    ),
    "legacy queue without address": (
        "<queues><queue name='q'/></queues>",
        "queue 'q' in <queues>: missing <address>",
    ),
    "empty wildcard delimiter": (
        "<wildcard-addresses><delimiter> </delimiter></wildcard-addresses>",
        "<wildcard-addresses>: <delimiter> is empty",
    ),
    "wildcard characters clash": (
        "<wildcard-addresses><single-word>.</single-word></wildcard-addresses>",
        "<wildcard-addresses>: <delimiter>, <any-words> and <single-word> must differ",
    ),
    "literal markers": (
        "<literal-match-markers>(((</literal-match-markers>",
        "<literal-match-markers>: expected two characters, found '((('",
    ),
    "divert filter": (
        DIVERT.format(
            name="bad-filter",
            body="<address>A</address><forwarding-address>B</forwarding-address>"
            "<filter string=\"color = 'red' AND AND size &gt; 1\"/>",
        ),
        "divert 'bad-filter': filter \"color = 'red' AND AND size > 1\" does not parse: ",
    ),
    "queue filter": (
        "<addresses><address name='A'><anycast><queue name='q'><filter string='x = '/>"
        "</queue></anycast></address></addresses>",
        "queue 'q' on address 'A': filter \"x = \" does not parse: ",
    ),
    # an address's table folder (dir(address)) must fit the file system: 255 bytes
    "address too long": (
        f"<addresses><address name='{'a' * 256}'><anycast/></address></addresses>",
        f"address: address '{'a' * 39}…' is too long for a table folder: its folder name "
        "takes 256 bytes, at most 255 fit",
    ),
    "CJK address too long": (
        f"<addresses><address name='{'注文' * 15}'><anycast/></address></addresses>",
        "takes 270 bytes, at most 255 fit",
    ),
    "forwarding address too long": (
        DIVERT.format(
            name="d",
            body=f"<address>A</address><forwarding-address>{'b' * 300}</forwarding-address>",
        ),
        "divert 'd': address 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb…' is too long for a table folder",
    ),
    "dead-letter address too long": (
        SETTING.format(body=f"<dead-letter-address>{'é' * 43}</dead-letter-address>"),
        "address-setting match 'a': <dead-letter-address>: address 'éééééééééééééééééééééééééééééééééééééé"
        "é…' is too long for a table folder: its folder name takes 258 bytes",
    ),
}


def test_the_longest_address_a_table_folder_holds_is_accepted() -> None:
    config = broker(
        f"<addresses><address name='{'a' * 255}'><anycast/></address>"
        f"<address name='{'注文' * 14}'><anycast/></address></addresses>"
    )
    assert {len(name) for name in config.addresses} == {255, 28}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_configurations(case: str) -> None:
    body, message = INVALID[case]
    with pytest.raises(ConfigError, match=re.escape(message)):
        broker(body)


def test_config_error_is_a_value_error_shared_by_the_modules() -> None:
    assert issubclass(ConfigError, ValueError)
    assert ConfigError is routing.broker.validation.ConfigError


# ---------------------------------------------------------------------------
# Built in code


def test_broker_config_built_in_code_is_validated() -> None:
    queue = QueueConfig("q", "A", "ANYCAST")
    addresses = {"A": AddressConfig("A", (queue,))}
    assert addresses["A"].routing_types == {"ANYCAST"}
    config = BrokerConfig(addresses, wildcards=WildcardConfig(delimiter="/"))
    assert config.address_settings.wildcards == WildcardConfig(delimiter="/")
    divert = DivertConfig("q", "A", ("B",), None, None)
    with pytest.raises(ConfigError, match="divert 'q': name already used by queue 'q'"):
        BrokerConfig(addresses, diverts=(divert,))
    with pytest.raises(ValueError, match="other wildcards"):
        BrokerConfig(
            addresses,
            address_settings=AddressSettingsRepository([("#", {})]),
            wildcards=WildcardConfig(delimiter="/"),
        )
    with pytest.raises(ConfigError, match="unknown routing type 'BOTH'"):
        QueueConfig("q", "A", "BOTH")
    with pytest.raises(ConfigError, match="unknown routing-type 'X'"):
        DivertConfig("d", "A", ("B",), None, None, routing_type="X")
