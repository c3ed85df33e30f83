"""Breadcrumb properties of a copy (SPEC §5.5): the one vectorized UDF for every copy kind.

Every copy (divert, dead letter, expiry, MOVE, RETRY, send-to-dla-on-no-route)
rebuilds its properties with the same rule, so it lives in one place:

1. Each existing ``_AMQ_ORIG_ADDRESS``, ``_AMQ_ORIG_QUEUE`` and
   ``_AMQ_ORIG_MESSAGE_ID`` value moves to the same name suffixed ``_N``, ``N``
   the lowest number not yet used by that name. A suffix counts as used only
   if it is canonical: ASCII decimal digits without leading zeros (``0``,
   ``1``, ``12``; not ``01``, ``+1``, ``x``, ``١``). Other look-alikes
   (``_AMQ_ORIG_QUEUE_01``) are ordinary properties and are copied unchanged.
   Gaps are filled: with ``_0`` and ``_2`` used, the next is ``_1``.
2. ``_AMQ_ORIG_ADDRESS`` = ``orig_address``, ``_AMQ_ORIG_MESSAGE_ID`` = the
   decimal string of ``orig_message_id``, and ``_AMQ_ORIG_QUEUE`` =
   ``orig_queue`` unless it is null (send-to-dla-on-no-route: the old value
   still moves, no new one is written).
3. ``_AMQ_ORIG_ROUTING_TYPE`` has no history: it is set to
   ``orig_routing_type`` when that is not null and left as it is otherwise.
4. Every other property is copied unchanged. A null map counts as empty.

Decisions where the SPEC is silent:

- "Existing" means the key is present, even with a null value (the null moves).
- A null ``orig_address`` / ``orig_message_id`` is written as a null value
  (callers never pass one; the rule stays total).
- Key order of the result, deterministic so replays write identical maps:
  the untouched keys in their original order, then the moved ``_N`` keys
  (address, queue, message id), then the new unsuffixed keys (address, queue,
  message id, routing type). An ``_AMQ_ORIG_ROUTING_TYPE`` that is replaced
  leaves its place and goes last; one that is kept stays where it was.
- Maps have unique keys (Spark guarantees it); duplicated keys are not handled.

Three implementations of the rule, equal entry for entry (tests/test_breadcrumbs.py):
:func:`rebuild_breadcrumbs` (the Arrow UDF, vectorized over the Arrow map
buffers), :func:`rebuild_breadcrumbs_py` (the plain-Python reference) and
:func:`rebuild_breadcrumbs_native` (Spark higher-order functions only; the
benchmark's yardstick, bench/breadcrumbs.py). The copy's ``property_types``
likewise: :func:`breadcrumb_types_py` and :func:`breadcrumb_types_native`. The
job makes both maps in one pass of the Arrow kernel,
:func:`rebuild_typed_breadcrumbs`.

.. note:: Evolving
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType, StructField, StructType

__all__ = [
    "BREADCRUMB_TYPES",
    "HISTORY_NAMES",
    "ORIG_ADDRESS",
    "ORIG_MESSAGE_ID",
    "ORIG_QUEUE",
    "ORIG_ROUTING_TYPE",
    "breadcrumb_types_native",
    "breadcrumb_types_py",
    "rebuild_breadcrumbs",
    "rebuild_breadcrumbs_native",
    "rebuild_breadcrumbs_py",
    "rebuild_typed_breadcrumbs",
]

ColumnOrName = Column | str
"""A Column or a column name (``routing/_typing.py`` is not there yet)."""

ORIG_ADDRESS = "_AMQ_ORIG_ADDRESS"
ORIG_QUEUE = "_AMQ_ORIG_QUEUE"
ORIG_MESSAGE_ID = "_AMQ_ORIG_MESSAGE_ID"
ORIG_ROUTING_TYPE = "_AMQ_ORIG_ROUTING_TYPE"
HISTORY_NAMES: tuple[str, str, str] = (ORIG_ADDRESS, ORIG_QUEUE, ORIG_MESSAGE_ID)
"""The names with a ``_N`` history, in the order their moved keys are written."""

_PROPERTIES_TYPE = MapType(StringType(), StringType(), valueContainsNull=True)
_PROPERTIES_DDL = "map<string,string>"
_TYPED_COPY = StructType(
    [StructField("properties", _PROPERTIES_TYPE), StructField("property_types", _PROPERTIES_TYPE)]
)
_ORIG_PREFIX = "_AMQ_ORIG_"
# Canonical history suffix; RE2 (Arrow) anchors `$` at the end of the text.
_SUFFIX_RE = r"^_AMQ_ORIG_(?P<name>ADDRESS|QUEUE|MESSAGE_ID)_(?P<num>0|[1-9][0-9]*)$"
_SUFFIX_NAMES = ("ADDRESS", "QUEUE", "MESSAGE_ID")  # same order as HISTORY_NAMES
_MOVED_RE = r"^(_AMQ_ORIG_(?:ADDRESS|QUEUE|MESSAGE_ID))_[0-9]+$"  # a moved key's name
# Longer suffixes cannot be the lowest unused number of a batch of maps; skip
# them instead of parsing (avoids int64 overflow on absurd keys).
_MAX_SUFFIX_DIGITS = 9


def _col(c: ColumnOrName) -> Column:
    return c if isinstance(c, Column) else F.col(c)


# ---------------------------------------------------------------------------------------
# The reference


def rebuild_breadcrumbs_py(
    properties: dict[str, str | None] | None,
    orig_address: str | None,
    orig_queue: str | None,
    orig_message_id: int | None,
    orig_routing_type: str | None,
) -> dict[str, str | None]:
    """The rule in plain Python: the reference the UDF and the native version must equal.

    :param properties: the copied message's properties; None counts as empty.
    :param orig_address: the address the copied message was on.
    :param orig_queue: the queue or divert it left; None for send-to-dla-on-no-route.
    :param orig_message_id: the copied message's id.
    :param orig_routing_type: its routing type, or None (keeps the old one).
    :return: the copy's properties, keys in the documented order.

    Example::

        rebuild_breadcrumbs_py({"_AMQ_ORIG_ADDRESS": "A", "_AMQ_ORIG_QUEUE": "divertAtoB",
                                "_AMQ_ORIG_MESSAGE_ID": "123"}, "B", "X", 456, None)
        # {"_AMQ_ORIG_ADDRESS_0": "A", "_AMQ_ORIG_QUEUE_0": "divertAtoB",
        #  "_AMQ_ORIG_MESSAGE_ID_0": "123", "_AMQ_ORIG_ADDRESS": "B",
        #  "_AMQ_ORIG_QUEUE": "X", "_AMQ_ORIG_MESSAGE_ID": "456"}
    """
    props = properties or {}
    moved: dict[str, str | None] = {}
    for name in HISTORY_NAMES:
        if name in props:
            n = 0
            while f"{name}_{n}" in props:  # only canonical suffixes can equal f"{n}"
                n += 1
            moved[f"{name}_{n}"] = props[name]
    replaced = set(HISTORY_NAMES)
    if orig_routing_type is not None:
        replaced.add(ORIG_ROUTING_TYPE)
    out = {k: v for k, v in props.items() if k not in replaced}
    out.update(moved)
    out[ORIG_ADDRESS] = orig_address
    if orig_queue is not None:
        out[ORIG_QUEUE] = orig_queue
    out[ORIG_MESSAGE_ID] = None if orig_message_id is None else str(orig_message_id)
    if orig_routing_type is not None:
        out[ORIG_ROUTING_TYPE] = orig_routing_type
    return out


BREADCRUMB_TYPES = {
    ORIG_ADDRESS: "string",
    ORIG_QUEUE: "string",
    ORIG_MESSAGE_ID: "long",
    ORIG_ROUTING_TYPE: "string",
}
"""The types of the breadcrumbs a copy gets (SPEC §3.1): Artemis's, but for
``_AMQ_ORIG_ROUTING_TYPE``, a byte in Artemis and its name here."""


def breadcrumb_types_py(
    properties: dict[str, str | None] | None,
    property_types: dict[str, str | None] | None,
    rebuilt: dict[str, str | None],
    orig_routing_type: str | None,
) -> dict[str, str]:
    """The copy's ``property_types`` (the reference of :func:`rebuild_typed_breadcrumbs`
    and :func:`breadcrumb_types_native`): a breadcrumb it gets its type of
    :data:`BREADCRUMB_TYPES`, a value moved to ``_N`` the type it had, any other property
    its own; untyped ones have no entry.

    :param properties: the copied message's properties; ``property_types`` their types.
    :param rebuilt: the copy's properties (:func:`rebuild_breadcrumbs_py`).
    :param orig_routing_type: as given to :func:`rebuild_breadcrumbs_py`.
    """
    old = properties or {}
    types = {k: v for k, v in (property_types or {}).items() if v is not None}
    out: dict[str, str] = {}
    for key in rebuilt:
        new = key in HISTORY_NAMES or (key == ORIG_ROUTING_TYPE and orig_routing_type is not None)
        if new:
            kind: str | None = BREADCRUMB_TYPES[key]
        elif key not in old:  # a history value moved to ``key`` (``<name>_N``)
            kind = types.get(key.rsplit("_", 1)[0])
        else:
            kind = types.get(key)
        if kind is not None:
            out[key] = kind
    return out


# ---------------------------------------------------------------------------------------
# The vectorized Arrow implementation


def _rebuild_arrow(
    props: pa.Array,
    orig_address: pa.Array,
    orig_queue: pa.Array,
    orig_message_id: pa.Array,
    orig_routing_type: pa.Array,
    property_types: pa.Array | None = None,
) -> pa.MapArray | tuple[pa.MapArray, pa.MapArray]:
    """One Arrow batch: the rule over the map's offset/key/item buffers, no per-row Python.

    Each output entry is one of three pieces (kept, moved, new); all are built
    column-wise, concatenated, then put in place by one ``take`` whose
    permutation comes from per-row counts (no sort).

    With ``property_types`` (the copied messages' types) it also returns the copies'
    types, as :func:`breadcrumb_types_py` says: each piece's entries typed the same
    way (a kept key its own type, a moved one its name's, a new one its breadcrumb's
    type), then the untyped ones left out.
    """
    n = len(props)
    str_type = props.type.key_type
    offsets = props.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    base, end = int(offsets[0]), int(offsets[-1])
    keys = props.keys.slice(base, end - base)
    items = props.items.slice(base, end - base)
    row_valid = props.is_valid().to_numpy(zero_copy_only=False)
    raw_len = np.diff(offsets)
    entry_row = np.repeat(np.arange(n, dtype=np.int64), raw_len)
    entry_ok = np.repeat(row_valid, raw_len)  # entries of a null map do not exist

    queue_ok = orig_queue.is_valid().to_numpy(zero_copy_only=False)
    rt_ok = orig_routing_type.is_valid().to_numpy(zero_copy_only=False)

    # Classify keys: unsuffixed names (0..2 history, 3 routing type) and canonical _N suffixes.
    # Only keys starting with _AMQ_ORIG_ are looked at further (the rest are app properties).
    orig_like = np.flatnonzero(
        pc.starts_with(keys, _ORIG_PREFIX).to_numpy(zero_copy_only=False) & entry_ok
    )
    code = np.full(len(keys), -1, dtype=np.int64)
    mex = np.zeros((n, 3), dtype=np.int64)
    if len(orig_like):
        sub_keys = keys.take(pa.array(orig_like))
        sub_code = pc.index_in(
            sub_keys, value_set=pa.array([*HISTORY_NAMES, ORIG_ROUTING_TYPE], str_type)
        )
        code[orig_like] = sub_code.fill_null(-1).to_numpy(zero_copy_only=False)
        parts = pc.extract_regex(sub_keys, _SUFFIX_RE)  # null where no match
        matched = parts.is_valid().to_numpy(zero_copy_only=False)
        if matched.any():
            sel = np.flatnonzero(matched)
            parts = parts.take(pa.array(sel))
            digits = parts.field("num")
            short = (pc.utf8_length(digits).to_numpy(zero_copy_only=False)) <= _MAX_SUFFIX_DIGITS
            sel, digits = sel[short], digits.filter(pa.array(short))
            name_idx = pc.index_in(
                parts.field("name").filter(pa.array(short)), value_set=pa.array(_SUFFIX_NAMES)
            ).to_numpy(zero_copy_only=False)
            used = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
            group = entry_row[orig_like[sel]] * 3 + name_idx
            mex = _lowest_unused(group, used, n * 3).reshape(n, 3)

    # Where each history name sits in its row (-1: absent).
    src = np.full((n, 3), -1, dtype=np.int64)
    is_hist = code >= 0
    is_hist &= code <= 2
    hist_at = np.flatnonzero(is_hist)
    src[entry_row[hist_at], code[hist_at]] = hist_at

    # Piece 1, kept: everything but the history names and a replaced routing type.
    kept_mask = entry_ok & ~is_hist & ~((code == 3) & rt_ok[entry_row])
    kept_at = np.flatnonzero(kept_mask)
    kept_row = entry_row[kept_at]
    kept_cnt = np.bincount(kept_row, minlength=n)

    # Piece 2, moved: row-major over (row, name) pairs present, i.e. address, queue, id.
    moved_row, moved_name = np.nonzero(src >= 0)
    moved_cnt = np.bincount(moved_row, minlength=n)
    moved_keys = pc.binary_join_element_wise(
        pa.array([f"{name}_" for name in HISTORY_NAMES], str_type).take(pa.array(moved_name)),
        pc.cast(pa.array(mex[moved_row, moved_name]), str_type),
        pa.scalar("", str_type),
    )
    moved_items = items.take(pa.array(src[moved_row, moved_name]))

    # Piece 3, new: slots address, queue (if any), id, routing type (if any).
    slot_ok = np.ones((n, 4), dtype=bool)
    slot_ok[:, 1] = queue_ok
    slot_ok[:, 3] = rt_ok
    new_row, new_slot = np.nonzero(slot_ok)
    new_cnt = slot_ok.sum(axis=1)
    new_keys = pa.array([*HISTORY_NAMES, ORIG_ROUTING_TYPE], str_type).take(pa.array(new_slot))
    new_source = pa.concat_arrays(
        [
            orig_address.cast(str_type),
            orig_queue.cast(str_type),
            pc.cast(orig_message_id, str_type),
            orig_routing_type.cast(str_type),
        ]
    )
    new_items = new_source.take(pa.array(new_slot * n + new_row))

    # Place the pieces: row r holds kept, then moved, then new entries.
    out_len = kept_cnt + moved_cnt + new_cnt
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(out_len, out=out_offsets[1:])
    kept_dest = out_offsets[kept_row] + _rank_in_row(kept_row, kept_cnt)
    moved_dest = out_offsets[moved_row] + kept_cnt[moved_row] + _rank_in_row(moved_row, moved_cnt)
    new_dest = (
        out_offsets[new_row]
        + kept_cnt[new_row]
        + moved_cnt[new_row]
        + _rank_in_row(new_row, new_cnt)
    )
    total = int(out_offsets[-1])
    perm = np.empty(total, dtype=np.int64)
    perm[np.concatenate([kept_dest, moved_dest, new_dest])] = np.arange(total, dtype=np.int64)
    take = pa.array(perm)
    kept_idx = pa.array(kept_at)
    out_keys = pa.concat_arrays([keys.take(kept_idx), moved_keys, new_keys]).take(take)
    out_items = pa.concat_arrays(
        [items.take(kept_idx), moved_items.cast(str_type), new_items]
    ).take(take)
    rebuilt = pa.MapArray.from_arrays(pa.array(out_offsets, pa.int32()), out_keys, out_items)
    if property_types is None:
        return rebuilt

    history = pa.array([*HISTORY_NAMES], str_type)
    new_types = pa.array(
        [BREADCRUMB_TYPES[k] for k in (*HISTORY_NAMES, ORIG_ROUTING_TYPE)], str_type
    )
    out_types = pa.concat_arrays(
        [
            _lookup(property_types, kept_row, keys.take(kept_idx)).cast(str_type),
            _lookup(property_types, moved_row, history.take(pa.array(moved_name))).cast(str_type),
            new_types.take(pa.array(new_slot)),
        ]
    ).take(take)
    typed = out_types.is_valid().to_numpy(zero_copy_only=False)
    out_row = np.repeat(np.arange(n, dtype=np.int64), out_len)
    types_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(out_row[typed], minlength=n), out=types_offsets[1:])
    mask = pa.array(typed)
    types = pa.MapArray.from_arrays(
        pa.array(types_offsets, pa.int32()), out_keys.filter(mask), out_types.filter(mask)
    )
    return rebuilt, types


def _lookup(maps: pa.Array, rows: np.ndarray, names: pa.Array) -> pa.Array:
    """``maps[row][name]`` for each pair of ``rows`` and ``names`` (null where the row's
    map is null or has no such key): keys numbered by a batch-wide vocabulary, entries
    found by a binary search over (row, key number), no per-row Python."""
    offsets = maps.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    base, end = int(offsets[0]), int(offsets[-1])
    keys = maps.keys.slice(base, end - base)
    items = maps.items.slice(base, end - base)
    lengths = np.diff(offsets)
    entry_row = np.repeat(np.arange(len(maps), dtype=np.int64), lengths)
    live = np.repeat(maps.is_valid().to_numpy(zero_copy_only=False), lengths)
    if not live.any() or len(rows) == 0:
        return pa.nulls(len(rows), items.type)
    vocabulary = pc.unique(keys)
    width = len(vocabulary)
    entry_code = entry_row * width + pc.index_in(keys, value_set=vocabulary).to_numpy(
        zero_copy_only=False
    )
    entry_code = np.where(live, entry_code, -1)  # entries behind a null map never match
    order = np.argsort(entry_code, kind="stable")
    sorted_code = entry_code[order]
    name_number = pc.index_in(names, value_set=vocabulary).fill_null(-1)
    number = name_number.to_numpy(zero_copy_only=False).astype(np.int64)
    wanted = np.where(number >= 0, rows * width + number, -2)
    at = np.minimum(np.searchsorted(sorted_code, wanted), len(sorted_code) - 1)
    found = sorted_code[at] == wanted
    return items.take(pa.array(order[at], mask=~found))


def _rank_in_row(rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Position of each element within its row, for elements sorted by row."""
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return np.arange(len(rows), dtype=np.int64) - starts[rows]


def _lowest_unused(group: np.ndarray, used: np.ndarray, groups: int) -> np.ndarray:
    """Per group, the lowest non-negative number not in ``used`` (vectorized mex).

    Sorted and de-duplicated, a group's numbers equal their rank for exactly a
    prefix of the group; the prefix length is the lowest unused number.
    """
    order = np.lexsort((used, group))
    g, v = group[order], used[order]
    distinct = np.ones(len(g), dtype=bool)
    distinct[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
    g, v = g[distinct], v[distinct]
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    idx = np.arange(len(g), dtype=np.int64)
    rank = idx - np.maximum.accumulate(np.where(first, idx, 0))
    return np.bincount(g[v == rank], minlength=groups).astype(np.int64)


@F.arrow_udf(_PROPERTIES_TYPE)  # type: ignore[call-overload]  # stubs omit MapType results
def _rebuild_udf(
    properties: pa.Array,
    orig_address: pa.Array,
    orig_queue: pa.Array,
    orig_message_id: pa.Array,
    orig_routing_type: pa.Array,
) -> pa.Array:
    return _rebuild_arrow(properties, orig_address, orig_queue, orig_message_id, orig_routing_type)


def _inputs(
    properties: ColumnOrName,
    orig_address: ColumnOrName,
    orig_queue: ColumnOrName,
    orig_message_id: ColumnOrName,
    orig_routing_type: ColumnOrName,
) -> tuple[Column, Column, Column, Column, Column]:
    return (
        _col(properties).cast(_PROPERTIES_DDL),
        _col(orig_address).cast("string"),
        _col(orig_queue).cast("string"),
        _col(orig_message_id).cast("bigint"),
        _col(orig_routing_type).cast("string"),
    )


def rebuild_breadcrumbs(
    properties: ColumnOrName,
    orig_address: ColumnOrName,
    orig_queue: ColumnOrName,
    orig_message_id: ColumnOrName,
    orig_routing_type: ColumnOrName,
) -> Column:
    """The copy's properties with the breadcrumbs of one more hop (the vectorized Arrow UDF).

    :param properties: map<string,string> Column or name; null counts as empty.
    :param orig_address: string: the address the copied message was on.
    :param orig_queue: string: the queue or divert it left; null for send-to-dla-on-no-route.
    :param orig_message_id: bigint: the copied message's id (written in decimal).
    :param orig_routing_type: string: its routing type; null keeps the old one.
    :return: a map<string,string> Column (never null).

    Example::

        copies.withColumn("properties", rebuild_breadcrumbs(
            "properties", "address", F.col("divert_name"), "message_id", "routing_type"))
    """
    return _rebuild_udf(
        *_inputs(properties, orig_address, orig_queue, orig_message_id, orig_routing_type)
    )


@F.arrow_udf(_TYPED_COPY)  # type: ignore[call-overload]  # stubs omit StructType results
def _rebuild_typed_udf(
    properties: pa.Array,
    property_types: pa.Array,
    orig_address: pa.Array,
    orig_queue: pa.Array,
    orig_message_id: pa.Array,
    orig_routing_type: pa.Array,
) -> pa.Array:
    rebuilt, types = _rebuild_arrow(
        properties, orig_address, orig_queue, orig_message_id, orig_routing_type, property_types
    )
    return pa.StructArray.from_arrays([rebuilt, types], names=_TYPED_COPY.names)


def rebuild_typed_breadcrumbs(
    properties: ColumnOrName,
    property_types: ColumnOrName,
    orig_address: ColumnOrName,
    orig_queue: ColumnOrName,
    orig_message_id: ColumnOrName,
    orig_routing_type: ColumnOrName,
) -> Column:
    """The copy's properties (:func:`rebuild_breadcrumbs`) and their types
    (:func:`breadcrumb_types_py`), in one pass of the Arrow kernel: a
    ``struct<properties, property_types>`` Column, both maps never null.

    :param property_types: the copied message's types (map<string,string>; null: none).

    Example::

        copy = rows.withColumn("copy", rebuild_typed_breadcrumbs(
            "properties", "property_types", "address", F.col("divert_name"), "message_id",
            "routing_type"))
    """
    args = _inputs(properties, orig_address, orig_queue, orig_message_id, orig_routing_type)
    return _rebuild_typed_udf(args[0], _col(property_types).cast(_PROPERTIES_DDL), *args[1:])


def breadcrumb_types_native(
    properties: ColumnOrName,
    property_types: ColumnOrName,
    rebuilt: ColumnOrName,
    orig_routing_type: ColumnOrName,
) -> Column:
    """The copy's ``property_types``, as :func:`breadcrumb_types_py` says, with Spark's map
    functions: the types follow the keys of the rebuilt map (the breadcrumbs typed, a
    moved value keeping its type), so it needs no second pass over the history. Its
    lambdas run interpreted, about 3x the Arrow kernel's time
    (:func:`rebuild_typed_breadcrumbs`, which the job uses); the tests' second opinion.

    :param properties: the copied message's properties (map<string,string>).
    :param property_types: their types (map<string,string>; null: none typed).
    :param rebuilt: the copy's properties (:func:`rebuild_breadcrumbs`).
    :param orig_routing_type: as given to :func:`rebuild_breadcrumbs`.
    :return: a map<string,string> Column (never null).
    """
    old = F.coalesce(_col(properties).cast(_PROPERTIES_DDL), F.create_map().cast(_PROPERTIES_DDL))
    types = _col(property_types).cast(_PROPERTIES_DDL)
    replaced = _col(orig_routing_type).cast("string").isNotNull()
    keys = F.map_keys(_col(rebuilt))

    def kind(key: Column) -> Column:
        moved_from = F.regexp_extract(key, _MOVED_RE, 1)
        return (
            F.when(key.isin(ORIG_ADDRESS, ORIG_QUEUE), F.lit(BREADCRUMB_TYPES[ORIG_ADDRESS]))
            .when(key == F.lit(ORIG_MESSAGE_ID), F.lit(BREADCRUMB_TYPES[ORIG_MESSAGE_ID]))
            .when(
                (key == F.lit(ORIG_ROUTING_TYPE)) & replaced,
                F.lit(BREADCRUMB_TYPES[ORIG_ROUTING_TYPE]),
            )
            .when(~F.map_contains_key(old, key), F.try_element_at(types, moved_from))
            .otherwise(F.try_element_at(types, key))
        )

    typed = F.map_from_arrays(keys, F.transform(keys, kind))
    return F.map_filter(typed, lambda _k, v: v.isNotNull())


# ---------------------------------------------------------------------------------------
# The native yardstick


def _moved_entry_native(p: Column, keys: Column, name: str) -> Column:
    """``struct(name_N, value)`` when ``name`` is in ``p``, else null (N the lowest unused).

    At most ``size(keys) - 1`` keys are ``name_N``, so one of ``name_0 .. name_<size>``
    is free; ``array_except`` keeps the candidates' order, so its first is the lowest.
    Candidates are canonical by construction, so look-alikes (``name_01``) never count.
    (Faster than filtering the keys for the prefix and parsing the suffixes.)
    """
    prefix = f"{name}_"
    candidates = F.transform(
        F.sequence(F.lit(0), F.size(keys)),
        lambda i: F.concat(F.lit(prefix), i.cast("string")),
    )
    return F.when(
        F.array_contains(keys, F.lit(name)),
        F.struct(
            F.element_at(F.array_except(candidates, keys), 1).alias("key"),
            F.try_element_at(p, F.lit(name)).alias("value"),
        ),
    )


def rebuild_breadcrumbs_native(
    properties: ColumnOrName,
    orig_address: ColumnOrName,
    orig_queue: ColumnOrName,
    orig_message_id: ColumnOrName,
    orig_routing_type: ColumnOrName,
) -> Column:
    """The same rule with Spark's map and higher-order functions only (no Python).

    Kept to measure the UDF against (bench/breadcrumbs.py) and to cross-check it.
    Parameters and result as :func:`rebuild_breadcrumbs`.
    """
    props, address, queue, message_id, routing_type = _inputs(
        properties, orig_address, orig_queue, orig_message_id, orig_routing_type
    )
    p = F.coalesce(props, F.create_map().cast(_PROPERTIES_DDL))
    keys = F.map_keys(p)
    entries: list[Column] = [_moved_entry_native(p, keys, name) for name in HISTORY_NAMES]
    entries += [
        F.struct(F.lit(ORIG_ADDRESS).alias("key"), address.alias("value")),
        F.when(queue.isNotNull(), F.struct(F.lit(ORIG_QUEUE).alias("key"), queue.alias("value"))),
        F.struct(F.lit(ORIG_MESSAGE_ID).alias("key"), message_id.cast("string").alias("value")),
        F.when(
            routing_type.isNotNull(),
            F.struct(F.lit(ORIG_ROUTING_TYPE).alias("key"), routing_type.alias("value")),
        ),
    ]
    kept = F.map_filter(
        p,
        lambda k, _v: (
            ~k.isin(*HISTORY_NAMES) & ~(routing_type.isNotNull() & (k == F.lit(ORIG_ROUTING_TYPE)))
        ),
    )
    added = F.map_from_entries(F.filter(F.array(*entries), lambda e: e.isNotNull()))
    return F.map_concat(kept, added)
