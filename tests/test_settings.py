"""Address-settings matching and merging (SPEC §4), pure Python.

The match tables are Artemis's own tests ported as data (no Java copied):
``RepositoryTest`` and ``AddressSettingsTest`` in artemis-server/src/test, and
the DLA hierarchy cases of the integration ``AddressSettingsTest``.
"""

from __future__ import annotations

import pickle

import pytest

from routing.broker.settings import (
    _FIELD_TYPES,
    SETTING_FIELDS,
    AddressSettings,
    AddressSettingsRepository,
    WildcardConfig,
    is_wild,
)
from routing.broker.validation import ConfigError


def repo_of(*matches: str, wildcards: WildcardConfig | None = None) -> AddressSettingsRepository:
    """A repository whose entries carry their own match as the DLA (to see who won)."""
    entries = [(m, {"dead_letter_address": m}) for m in matches]
    return AddressSettingsRepository(entries, wildcards or WildcardConfig())


# RepositoryTest.testMatchingDocs (and its '_' and '/' delimiter twins): address -> winner.
MATCHING_DOCS = [
    ("a.b", "a.b.#"),
    ("a.b.c", "a.b.#"),
    ("a.b.d.lll", "a.b.d.#"),
    ("z.z.z.z.z", "#"),
    ("a.babc", "#"),
    ("a.b.dabc", "a.b.#"),
    ("a.b.d", "a.b.d.#"),
]


@pytest.mark.parametrize("delimiter", [".", "_", "/"])
@pytest.mark.parametrize(("address", "winner"), MATCHING_DOCS)
def test_matching_docs(delimiter: str, address: str, winner: str) -> None:
    wildcards = WildcardConfig(delimiter=delimiter)
    repo = repo_of(
        *(m.replace(".", delimiter) for m in ("a.b.#", "a.b.d.#", "#")), wildcards=wildcards
    )
    found = repo.match(address.replace(".", delimiter)).dead_letter_address
    assert found == winner.replace(".", delimiter)


MULTIPLE_MATCHES_ORDER = [
    ("a.b.c.d.e.f", "a.b.c.d.e.f"),  # matches all six
    ("a.b.c.d.e.x", "a.b.c.d.e.*"),  # matches 2, 3, 6
    ("a.b.x.d.x.f", "a.*.*.*.*.*"),  # matches 3, 5
    ("x.b.c.d.e.f", "*.b.c.d.*.f"),  # matches 4, 5
    ("x.b.x.d.e.f", "*.b.*.d.*.f"),  # matches 5
    ("a.b.c.d.e.f.g", "a.b.c.d.e.#"),  # matches 6
]


@pytest.mark.parametrize(("address", "winner"), MULTIPLE_MATCHES_ORDER)
def test_multiple_matches_has_right_order(address: str, winner: str) -> None:
    """RepositoryTest.testMultipleMatchesHasRightOrder."""
    repo = repo_of(
        "a.b.c.d.e.f", "a.b.c.d.e.*", "a.*.*.*.*.*", "*.b.c.d.*.f", "*.b.*.d.*.f", "a.b.c.d.e.#"
    )
    assert repo.match(address).dead_letter_address == winner


MULTIPLE_WILDCARDS = [
    ("a", "a"),
    ("a.b", "a.b"),
    ("a.x", "a.*"),
    ("a.b.x", "a.b.#"),
    ("a.b.c", "a.b.c"),
    ("a.d.c", "a.d.c"),
    ("a.x.c", "a.*.c"),
    ("a.b.c.d", "a.b.c.d"),
    ("a.x.c.d", "a.*.*.d"),
    ("a.b.x.d", "a.*.*.d"),
    ("a.d.x.d", "a.*.*.d"),
    ("a.d.d.g", "a.*.d.#"),
    ("zzzz.z.z.z.d.r.g.f.sd.s.fsdfd.fsdfs", "#"),
]


@pytest.mark.parametrize(("address", "winner"), MULTIPLE_WILDCARDS)
def test_multiple_wildcards(address: str, winner: str) -> None:
    """RepositoryTest.testMultipleWildcards."""
    repo = repo_of(
        "#", "a", "a.#", "a.*", "a.b.c", "a.*.c", "a.d.c", "a.b.#", "a.b",
        "a.b.c.#", "a.b.c.d", "a.*.*.d", "a.*.d.#",
    )  # fmt: skip
    assert repo.match(address).dead_letter_address == winner


REPOSITORY_MERGE = [
    # RepositoryTest.testRepositoryMerge: ids 1..8 -> the whole merge order.
    ("a.b.c.d", ["a.b.c.*", "a.b.*.d", "a.b.c.#", "a.b.#", "a.#", "#"]),
    ("a.b.c", ["a.b.c.#", "a.b.#", "a.#", "#"]),
    ("z", ["#"]),
]


@pytest.mark.parametrize(("address", "order"), REPOSITORY_MERGE)
def test_repository_merge_order(address: str, order: list[str]) -> None:
    repo = repo_of("#", "a.#", "b.#", "a.b.#", "b.c.#", "a.b.c.#", "a.b.*.d", "a.b.c.*")
    assert repo.matches(address) == order


def test_merge_fills_each_field_from_the_next_match() -> None:
    """RepositoryTest.testAddressSettingsMergeIdempotence: 'foo.*' beats 'foo.0.#',
    but max-expiry-delay, which 'foo.*' does not set, comes from 'foo.0.#'."""
    repo = AddressSettingsRepository(
        [
            ("foo.*", {"max_redelivery_delay": 10000}),
            ("foo.0.#", {"max_redelivery_delay": 20000, "max_expiry_delay": 20000}),
            ("foo.1.#", {"max_redelivery_delay": 30000, "max_expiry_delay": 30000}),
        ]
    )
    for _ in range(2):  # twice: a cached answer must equal the first
        assert repo.match("foo.x").max_redelivery_delay == 10000
        assert repo.match("foo.x").max_expiry_delay == -1
        assert repo.matches("foo.0") == ["foo.*", "foo.0.#"]
        assert repo.match("foo.0").max_redelivery_delay == 10000
        assert repo.match("foo.0").max_expiry_delay == 20000
        assert repo.match("foo.1").max_redelivery_delay == 10000
        assert repo.match("foo.1").max_expiry_delay == 30000


@pytest.mark.parametrize("match", ["hjhjhjhjh.#.hhh", "#.a", "a.#.", "##"])
def test_illegal_matches(match: str) -> None:
    """RepositoryTest.testIllegalMatches: any-words must be last."""
    with pytest.raises(ConfigError, match=r"match '.*': '#' must be the last word"):
        AddressSettingsRepository([(match, {})])


def test_null_match_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="match must be a string"):
        AddressSettingsRepository([(None, {})])  # type: ignore[list-item]


def test_literal_matches() -> None:
    """RepositoryTest.testLiteral: '(a.#)' applies to the address named 'a.#' only."""
    repo = AddressSettingsRepository(
        [(m, {}) for m in ("#", "(a.#)", "a.#", "a.b", "a.*")], literal_match_markers="()"
    )
    assert repo.matches("a.b") == ["a.b", "a.*", "a.#", "#"]
    assert repo.matches("a.#") == ["(a.#)", "a.*", "a.#", "#"]


def test_literal_match_settings() -> None:
    """Integration AddressSettingsTest.testLiteralMatch."""
    repo = AddressSettingsRepository(
        [
            ("#", {"dead_letter_address": "defaultDLA", "expiry_address": "defaultEA"}),
            ("foo.#", {"dead_letter_address": "fooDefaultDLA"}),
            ("foo.*", {"dead_letter_address": "fooChildrenDLA"}),
            ("(foo.#)", {"dead_letter_address": "fooLiteralDLA"}),
        ],
        literal_match_markers="()",
    )
    assert repo.match("foo.#").dead_letter_address == "fooLiteralDLA"
    assert repo.match("foo.#").expiry_address == "defaultEA"
    assert repo.match("foo.bar").dead_letter_address == "fooChildrenDLA"
    assert repo.match("foo.bar.too").dead_letter_address == "fooDefaultDLA"
    assert repo.match("too.#").dead_letter_address == "defaultDLA"


# Integration AddressSettingsTest: (entries, address -> (DLA, max attempts)).
DLA_HIERARCHIES = {
    "testSimpleHierarchyWithDLA": (
        [("addressA", {"dead_letter_address": "dlaA", "max_delivery_attempts": 1}),
         ("addressB", {"dead_letter_address": "dlaB", "max_delivery_attempts": 1})],
        {"addressA": ("dlaA", 1), "addressB": ("dlaB", 1)},
    ),
    "test2LevelHierarchyWithDLA": (
        [("addressA", {"dead_letter_address": "dlaA", "max_delivery_attempts": 1}),
         ("#", {"dead_letter_address": "dlaB", "max_delivery_attempts": 1})],
        {"addressA": ("dlaA", 1), "addressB": ("dlaB", 1)},
    ),
    "test2LevelWordHierarchyWithDLA": (
        [("addressA", {"dead_letter_address": "dlaA", "max_delivery_attempts": 1}),
         ("*", {"dead_letter_address": "dlaB", "max_delivery_attempts": 1})],
        {"addressA": ("dlaA", 1), "addressB": ("dlaB", 1), "add.addressB": (None, 10)},
    ),
    "test3LevelHierarchyWithDLA": (
        [("add.addressA", {"dead_letter_address": "dlaA", "max_delivery_attempts": 1}),
         ("add.*", {"dead_letter_address": "dlaB", "max_delivery_attempts": 1}),
         ("#", {"dead_letter_address": "dlaC", "max_delivery_attempts": 1})],
        {"add.addressA": ("dlaA", 1), "add.addressB": ("dlaB", 1), "addressC": ("dlaC", 1)},
    ),
    "testOverrideHierarchyWithDLA": (
        [("add.addressA", {"max_delivery_attempts": 1}),
         ("add.*", {"max_delivery_attempts": 1}),
         ("#", {"dead_letter_address": "dlaC", "max_delivery_attempts": 1})],
        {"add.addressA": ("dlaC", 1), "add.addressB": ("dlaC", 1), "addressC": ("dlaC", 1)},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DLA_HIERARCHIES))
def test_dla_hierarchies(case: str) -> None:
    entries, expected = DLA_HIERARCHIES[case]
    repo = AddressSettingsRepository(entries)
    for address, (dla, attempts) in expected.items():
        settings = repo.match(address)
        assert (settings.dead_letter_address, settings.max_delivery_attempts) == (dla, attempts)


def test_three_level_hierarchy_inherits_from_the_least_specific() -> None:
    """Integration AddressSettingsTest.test3LevelHierarchyPageSizeBytes, on a job field."""
    repo = AddressSettingsRepository(
        [("test.foo.bar", {}), ("test.foo.#", {}), ("test.#", {"redelivery_delay": 100})]
    )
    assert repo.match("test.foo.bar").redelivery_delay == 100
    assert repo.matches("test.foo.bar") == ["test.foo.bar", "test.foo.#", "test.#"]


def test_defaults() -> None:
    """AddressSettingsTest.testDefaults, for the fields the job uses."""
    settings = AddressSettingsRepository([]).match("anything")
    assert settings == AddressSettings()
    assert settings.dead_letter_address is None
    assert settings.expiry_address is None
    assert settings.max_delivery_attempts == 10
    assert settings.redelivery_delay == 0
    assert settings.redelivery_delay_multiplier == 1.0
    assert settings.max_redelivery_delay == 0
    assert (settings.expiry_delay, settings.min_expiry_delay, settings.max_expiry_delay) == (
        -1,
        -1,
        -1,
    )
    assert settings.no_expiry is False
    assert settings.send_to_dla_on_no_route is False
    assert (settings.auto_create_dead_letter_resources, settings.auto_create_expiry_resources) == (
        False,
        False,
    )
    assert (settings.dead_letter_queue_prefix, settings.dead_letter_queue_suffix) == ("DLQ.", "")
    assert (settings.expiry_queue_prefix, settings.expiry_queue_suffix) == ("EXP.", "")


def test_single_merge() -> None:
    """AddressSettingsTest.testSingleMerge: an empty specific match takes everything."""
    to_merge = {
        "dead_letter_address": "testDLQ",
        "expiry_address": "testExpiryQueue",
        "max_delivery_attempts": 1000,
        "redelivery_delay": 1003,
        "expiry_delay": 999,
        "min_expiry_delay": 888,
        "max_expiry_delay": 777,
        "no_expiry": True,
    }
    settings = AddressSettingsRepository([("a", {}), ("#", to_merge)]).match("a")
    assert settings == AddressSettings(**to_merge)  # type: ignore[arg-type]


def test_multiple_merge() -> None:
    """AddressSettingsTest.testMultipleMerge: three levels, each field from the first setter."""
    repo = AddressSettingsRepository(
        [
            ("a.b", {}),
            ("a.*", {"dead_letter_address": "testDLQ", "expiry_address": "testExpiryQueue",
                     "max_delivery_attempts": 1000, "no_expiry": True}),
            ("#", {"expiry_address": "testExpiryQueue2", "redelivery_delay": 2003,
                   "redelivery_delay_multiplier": 2.5}),
        ]
    )  # fmt: skip
    settings = repo.match("a.b")
    assert settings.dead_letter_address == "testDLQ"
    assert settings.expiry_address == "testExpiryQueue"
    assert settings.max_delivery_attempts == 1000
    assert settings.redelivery_delay == 2003
    assert settings.redelivery_delay_multiplier == 2.5
    assert settings.no_expiry is True


def test_multiple_merge_all() -> None:
    """AddressSettingsTest.testMultipleMergeAll: the more specific value wins everywhere."""
    repo = AddressSettingsRepository(
        [
            ("a", {"dead_letter_address": "testDLQ", "expiry_address": "testExpiryQueue",
                   "redelivery_delay": 1003, "redelivery_delay_multiplier": 1.0}),
            ("#", {"expiry_address": "testExpiryQueue2", "dead_letter_address": "testDlq2",
                   "max_delivery_attempts": 2000, "redelivery_delay": 2003,
                   "redelivery_delay_multiplier": 2.0, "max_redelivery_delay": 5000}),
        ]
    )  # fmt: skip
    settings = repo.match("a")
    assert settings.dead_letter_address == "testDLQ"
    assert settings.expiry_address == "testExpiryQueue"
    assert settings.max_delivery_attempts == 2000
    assert settings.redelivery_delay == 1003
    assert settings.redelivery_delay_multiplier == 1.0
    assert settings.max_redelivery_delay == 5000


def test_max_redelivery_delay_defaults_to_ten_times_the_merged_delay() -> None:
    repo = AddressSettingsRepository(
        [("a", {}), ("b", {"redelivery_delay": 7}), ("#", {"redelivery_delay": 500})]
    )
    assert repo.match("a").max_redelivery_delay == 5000
    assert repo.match("b").max_redelivery_delay == 70
    assert AddressSettings(redelivery_delay=3).max_redelivery_delay == 30
    assert AddressSettings(redelivery_delay=3, max_redelivery_delay=4).max_redelivery_delay == 4


def test_explicit_empty_addresses_override_wider_matches() -> None:
    """An empty expiry address means none; an empty dead-letter address is kept (Artemis
    dead-letters to it, an address without bindings)."""
    repo = AddressSettingsRepository(
        [
            ("#", {"dead_letter_address": "DLA", "expiry_address": "EA"}),
            ("quiet", {"dead_letter_address": "", "expiry_address": ""}),
        ]
    )
    assert repo.match("quiet").dead_letter_address == ""
    assert repo.match("quiet").expiry_address is None
    assert repo.match("loud").dead_letter_address == "DLA"


def test_a_hash_pattern_matches_its_prefix_and_star_is_one_word() -> None:
    repo = repo_of("a.#", "b.*")
    assert repo.matches("a") == ["a.#"]
    assert repo.matches("ab") == []
    assert repo.matches("b.x") == ["b.*"]
    assert repo.matches("b") == []
    assert repo.matches("b.x.y") == []
    assert repo.matches("b.") == []  # '*' is one non-empty word


def test_custom_wildcards() -> None:
    """Conformance 034: delimiter '-', single-word '?'; '.' is then an ordinary character."""
    wildcards = WildcardConfig(delimiter="-", single_word="?")
    repo = repo_of("#", "sales-?", "sales-#", "a*", wildcards=wildcards)
    assert repo.match("sales-eu").dead_letter_address == "sales-?"
    assert repo.match("sales-eu-north").dead_letter_address == "sales-#"
    assert repo.match("sales.eu").dead_letter_address == "#"
    assert repo.matches("sales-eu.north") == ["sales-?", "sales-#", "#"]
    assert repo.matches("a*") == ["a*", "#"]  # '*' is not a wildcard here
    assert repo.matches("ab") == ["#"]
    with pytest.raises(ConfigError, match="'#' must be the last word"):
        repo_of("sales-#-eu", wildcards=wildcards)


def test_custom_any_words_character() -> None:
    wildcards = WildcardConfig(any_words="+")
    repo = repo_of("a.+", "#", wildcards=wildcards)
    assert repo.matches("a.b.c") == ["a.+"]
    assert repo.matches("#") == ["#"]  # exact: '#' is an ordinary character now
    with pytest.raises(ConfigError, match="'\\+' must be the last word"):
        repo_of("a.+.b", wildcards=wildcards)


def test_regex_characters_in_matches_are_literal() -> None:
    repo = repo_of("a+b.*", "x(y).#")
    assert repo.matches("a+b.c") == ["a+b.*"]
    assert repo.matches("aab.c") == []
    assert repo.matches("x(y).z") == ["x(y).#"]


def test_escaped_wildcards_are_literal() -> None:
    repo = repo_of("a.\\*.#", "a.\\*")
    assert repo.matches("a.*.b") == ["a.\\*.#"]
    assert repo.matches("a.x.b") == []
    assert repo.matches("a.\\*") == ["a.\\*"]  # no wildcard left: an exact name


def test_fully_qualified_queue_names_use_the_address_settings() -> None:
    repo = repo_of("orders.*")
    assert repo.matches("orders.eu::q1") == ["orders.*"]
    assert repo.match("orders.eu::q1") == repo.match("orders.eu")


def test_first_declaration_of_a_match_wins() -> None:
    """FileConfigurationParser logs a duplicate match and keeps the first."""
    repo = AddressSettingsRepository(
        [("a", {"max_delivery_attempts": 1}), ("a", {"max_delivery_attempts": 2})]
    )
    assert repo.match("a").max_delivery_attempts == 1
    assert len(repo) == 1


def test_is_wild_ignores_escaped_wildcards() -> None:
    wildcards = WildcardConfig()
    assert is_wild("a.*", wildcards)
    assert is_wild("#", wildcards)
    assert not is_wild("a.b", wildcards)
    assert not is_wild("a.\\*", wildcards)


def test_unknown_setting_and_wrong_type_are_refused() -> None:
    with pytest.raises(ConfigError, match="match 'a': unknown setting 'max_attempts'"):
        AddressSettingsRepository([("a", {"max_attempts": 1})])
    with pytest.raises(TypeError, match="match 'a': max_delivery_attempts must be int"):
        AddressSettingsRepository([("a", {"max_delivery_attempts": "3"})])
    with pytest.raises(TypeError, match="match 'a': no_expiry must be bool"):
        AddressSettingsRepository([("a", {"no_expiry": 1})])
    with pytest.raises(TypeError, match="match 'a': redelivery_delay must be int"):
        AddressSettingsRepository([("a", {"redelivery_delay": True})])


def test_field_types_cover_every_setting() -> None:
    assert set(_FIELD_TYPES) == set(SETTING_FIELDS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delimiter": ""}, "<delimiter> must be exactly one character"),
        ({"single_word": "**"}, "<single-word> must be exactly one character"),
        ({"any_words": "."}, "must differ"),
    ],
)
def test_wildcard_characters_are_validated(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WildcardConfig(**kwargs)


def test_repository_pickles() -> None:
    """The configuration may be shipped to Spark executors inside closures."""
    repo = repo_of("#", "a.*")
    clone = pickle.loads(pickle.dumps(repo))
    assert clone.matches("a.b") == ["a.*", "#"]
    assert clone.match("a.b") == repo.match("a.b")
