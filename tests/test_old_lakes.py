"""A lake written before ``property_types`` existed goes on as one the job wrote today.

``tests/lakes/before-property-types/lake`` is what the job of commit 025aecd (the last one
without typed properties) wrote replaying ``part1.parquet``: the first 458 rows of the
demo's traffic for ``conf/broker.xml`` (300 messages, untyped, and the first deliveries),
with their queue rows, journal, copies, job state and stream checkpoint. The job then
replays ``part2.parquet`` (the later deliveries and management rows) and a few typed
messages into it; the tables must be those of a lake this job routed from the start:
every column alike (the old copies have no ``property_types``: that column is compared
for the rows the second run wrote), the old tables gaining the column.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from jobs import replay
from routing.io.lake import Lake
from tests.lakeio import rows

FIXTURE = Path(__file__).resolve().parent / "lakes" / "before-property-types"
BROKER = Path(__file__).resolve().parents[1] / "conf" / "broker.xml"

TYPED = [
    {
        "type": "send",
        "address": address,
        "message_id": message_id,
        "sent_at": "2026-01-01T00:10:00Z",
        "properties": properties,
    }
    for address, message_id, properties in [
        ("orders", 1001, {"region": "US", "amount": 700}),  # audit.large: amount > 500
        ("orders", 1002, {"region": "US", "amount": {"type": "string", "value": "900"}}),
        ("notifications", 1003, {"channel": "sms", "retries": {"type": "short", "value": "2"}}),
    ]
]
"""Messages sent after the upgrade, typed: a ``string`` amount is no number to a filter."""


def _replay(spark, lake: Path, *logs: Path) -> None:
    out = io.StringIO()
    argv = [a for log in logs for a in ("--log", str(log))]
    status = replay.main([*argv, "--lake", str(lake), "--conf", str(BROKER)], spark=spark, out=out)
    assert status == 0, out.getvalue()


def _tables(lake: Lake) -> dict[str, list[dict[str, Any]]]:
    tables = [lake.queue_messages, lake.journal, lake.rejected]
    tables += [lake.table(source) for source in lake.address_sources()]
    out = {}
    for table in tables:
        found = [_plain(r) for r in rows(table)]
        out[Path(table).name] = sorted(
            found, key=lambda r: json.dumps(r, sort_keys=True, default=str)
        )
    return out


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """A row with its maps as dicts (delta-rs reads them as lists of pairs)."""
    return {k: dict(v) if isinstance(v, list) else v for k, v in row.items()}


def _without_types(tables: dict[str, list[dict]]) -> dict[str, list[dict]]:
    return {
        name: sorted(
            ({k: v for k, v in r.items() if k != "property_types"} for r in found),
            key=lambda r: json.dumps(r, sort_keys=True, default=str),
        )
        for name, found in tables.items()
    }


def _typed_rows(tables: dict[str, list[dict]]) -> dict[str, list[tuple]]:
    """The rows of the typed messages and their copies, with their types."""
    ours = {1001, 1002, 1003}

    def mine(row: dict[str, Any]) -> bool:
        crumbs = row.get("properties") or {}
        return row.get("message_id") in ours or any(
            k.startswith("_AMQ_ORIG_MESSAGE_ID") and v in {str(i) for i in ours}
            for k, v in crumbs.items()
        )

    return {
        name: sorted(
            (r["message_id"], r.get("queue"), json.dumps(r.get("property_types"), sort_keys=True))
            for r in found
            if "properties" in r and mine(r)
        )
        for name, found in tables.items()
    }


def test_a_lake_from_before_property_types_goes_on_as_a_new_one(spark, tmp_path):
    typed = tmp_path / "typed.jsonl"
    typed.write_text("".join(json.dumps(m) + "\n" for m in TYPED), encoding="utf-8")
    upgraded = tmp_path / "upgraded"
    shutil.copytree(FIXTURE / "lake", upgraded)
    _replay(spark, upgraded, FIXTURE / "part2.parquet", typed)
    fresh = tmp_path / "fresh"
    _replay(spark, fresh, FIXTURE / "part1.parquet")
    _replay(spark, fresh, FIXTURE / "part2.parquet", typed)

    old, new = _tables(Lake.at(str(upgraded))), _tables(Lake.at(str(fresh)))
    assert _without_types(old) == _without_types(new)
    assert _typed_rows(old) == _typed_rows(new)
    # filters compare the typed amounts as Artemis does: the long 700 is over 500, the
    # string '900' is no number (audit.large: amount > 500)
    large = {
        r["properties"].get("_AMQ_ORIG_MESSAGE_ID")
        for r in old["queue_messages"]
        if r["queue"] == "audit.large"
    }
    assert {"1001", "1002"} & large == {"1001"}
