"""Runs a conformance scenario (``../shared/conformance/FORMAT.md``) against the real job.

Inputs are written the way producers, consumers and operators would (delta-rs
appends to the lake's tables); the job runs in-process through
``jobs.route.main`` with the test session; results are read back with delta-rs
alone (:mod:`tests.lakeio`), independent of the job's own reader.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa

from jobs import route
from routing.broker.properties import typed_value
from routing.io.lake import Lake
from routing.plan import schemas
from tests.lakeio import EPOCH, append, at, rows

UNSET = object()


class ScenarioFailure(AssertionError):
    pass


class Scenario:
    def __init__(self, spec: dict[str, Any], workdir: Path, spark) -> None:
        self.spec = spec
        self.spark = spark
        self.lake = Lake.at(workdir / "lake")
        self.conf = workdir / "broker.xml"
        self.conf.write_text(spec["broker_xml"])
        self.step_no = 0
        self.run_seconds: list[float] = []  # each run of the job, as long as it took
        self.typed = any(
            _typed(value)
            for step in spec["steps"]
            for m in step.get("send", {}).get("messages", [])
            for value in m.get("properties", {}).values()
        )

    # ---- steps ----------------------------------------------------------------------------

    def run(self) -> None:
        for number, step in enumerate(self.spec["steps"]):
            self.step_no = number
            ((kind, body),) = step.items()
            getattr(self, f"step_{kind}")(body)

    def fail(self, message: str) -> None:
        step = self.spec["steps"][self.step_no]
        raise ScenarioFailure(
            f"{self.spec['name']}\nstep {self.step_no} {json.dumps(step)}:\n{message}"
        )

    def check(self, condition: bool, message: str) -> None:
        if not condition:
            self.fail(message)

    def step_send(self, body: dict[str, Any]) -> None:
        by_address: dict[str, list[dict[str, Any]]] = {}
        for m in body["messages"]:
            address = m.get("address", body.get("address"))
            properties, types = _properties(m.get("properties", {}))
            if "tag" in m:
                properties["tag"] = m["tag"]
            row = {
                "message_id": m["id"],
                "address": address,
                "routing_type": m.get("routing_type"),
                "sent_at": at(m.get("at", body.get("at", 0))),
                "expiration": at(m["expiration"]) if m.get("expiration") is not None else None,
                "priority": m.get("priority"),
                "durable": m.get("durable"),
                "user_id": m.get("user_id"),
                "properties": list(properties.items()),
                "property_types": list(types.items()),
                "body": m["body"].encode() if isinstance(m.get("body"), str) else None,
                "copy_reason": None,
                "to_queue": None,
            }
            by_address.setdefault(address, []).append(row)
        # a scenario without typed values writes no property_types column (FORMAT.md)
        schema = schemas.MESSAGE if self.typed else _without(schemas.MESSAGE, "property_types")
        for address, batch in by_address.items():
            append(self.lake.address_table(address), batch, schema)

    def step_run(self, body: dict[str, Any]) -> None:
        argv = ["--conf", str(self.conf), "--lake", self.lake.root, "--available-now"]
        if "as_of" in body:
            argv += ["--as-of", at(body["as_of"]).isoformat()]
        stdout, stderr = io.StringIO(), io.StringIO()
        started = time.monotonic()
        status = route.main(argv, spark=self.spark, out=stdout, err=stderr)
        self.run_seconds.append(time.monotonic() - started)
        expected = body.get("expect_exit", 0)
        self.check(
            status == expected, f"exit {status}, expected {expected}\nstderr:\n{stderr.getvalue()}"
        )
        if expected:
            needle = body.get("stderr_contains", "")
            self.check(
                needle in stderr.getvalue(), f"stderr lacks {needle!r}:\n{stderr.getvalue()}"
            )
            self.check(
                not rows(self.lake.queue_messages), "an invalid configuration wrote queue_messages"
            )

    def step_deliver(self, body: dict[str, Any]) -> None:
        events = body.get("events", [body])
        out = []
        for e in events:
            message_id = (
                e["message_id"] if "message_id" in e else self.pending_id(e["queue"], e["tag"])
            )
            for k in range(e.get("times", 1)):
                out.append(
                    {
                        "queue": e["queue"],
                        "message_id": message_id,
                        "outcome": e["outcome"],
                        "at": at(e["at"] + k * e.get("every", 0)),
                    }
                )
        append(self.lake.deliveries, out, schemas.DELIVERY)

    def step_manage(self, body: dict[str, Any]) -> None:
        message_id = body.get("message_id")
        if "tag" in body:
            message_id = self.pending_id(body["queue"], body["tag"])
        append(
            self.lake.management,
            [
                {
                    "op": body["op"],
                    "queue": body["queue"],
                    "message_id": message_id,
                    "filter": body.get("filter"),
                    "to_queue": body.get("to_queue"),
                    "at": at(body["at"]),
                }
            ],
            schemas.MANAGEMENT,
        )

    # ---- expectations ---------------------------------------------------------------------

    def queue_rows(self, queue: str, status: str | None = UNSET) -> list[dict[str, Any]]:
        selected = [r for r in rows(self.lake.queue_messages) if r["queue"] == queue]
        if status is UNSET:
            status = "PENDING"
        if status is not None:
            selected = [r for r in selected if r["status"] == status]
        return sorted(selected, key=lambda r: (r["routed_at"], r["message_id"]))

    def pending_id(self, queue: str, tag: str) -> int:
        found = [r for r in self.queue_rows(queue) if _props(r).get("tag") == tag]
        self.check(
            len(found) == 1,
            f"expected one PENDING message tagged {tag!r} in {queue}, found {len(found)}",
        )
        return found[0]["message_id"]

    def resolve_id(self, ref: dict[str, Any]) -> str:
        found = [
            r for r in self.queue_rows(ref["queue"], None) if _props(r).get("tag") == ref["tag"]
        ]
        index = ref.get("index", 0)
        self.check(
            len(found) > index,
            f"no message tagged {ref['tag']!r} in {ref['queue']} (index {index})",
        )
        return str(found[index]["message_id"])

    def step_expect(self, body: dict[str, Any]) -> None:
        # ``lenient_rule``: the lake's own rule for untyped values, which the job does follow
        status = body.get("status", "PENDING")
        selected = self.queue_rows(body["queue"], status)
        tags = [_props(r).get("tag") for r in selected]
        described = f"rows of {body['queue']} ({status}): {[(t, r['message_id'], r['status']) for t, r in zip(tags, selected, strict=True)]}"
        if "count" in body:
            self.check(
                len(selected) == body["count"],
                f"count {len(selected)}, expected {body['count']}; {described}",
            )
        if "tags" in body:
            if body.get("ordered"):
                self.check(
                    tags == body["tags"],
                    f"tags {tags}, expected {body['tags']} in order; {described}",
                )
            else:
                self.check(
                    Counter(tags) == Counter(body["tags"]), f"tags {tags}, expected {body['tags']}"
                )
        if "tag" in body:
            selected = [r for r, t in zip(selected, tags, strict=True) if t == body["tag"]]
            self.check(bool(selected), f"no row tagged {body['tag']!r}; {described}")
        for row in selected:
            self.check_each(row, body.get("each", {}))

    def check_each(self, row: dict[str, Any], each: dict[str, Any]) -> None:
        props = _props(row)
        for key, expected in each.items():
            if key == "properties":
                for name, value in expected.items():
                    want = self.resolve_id(value["$id"]) if isinstance(value, dict) else value
                    self.check(
                        props.get(name) == want,
                        f"property {name} = {props.get(name)!r}, expected {want!r}; {props}",
                    )
            elif key == "property_types":
                types = _types(row)
                for name, want in expected.items():
                    self.check(
                        types.get(name) == want,
                        f"property_types {name} = {types.get(name)!r}, expected {want!r}; {types}",
                    )
            elif key == "absent":
                present = [n for n in expected if n in props]
                self.check(not present, f"properties {present} should be absent; {props}")
            elif key == "present":
                missing = [n for n in expected if n not in props]
                self.check(not missing, f"properties {missing} should be present; {props}")
            elif key == "new_id":
                originals = {
                    m["id"]
                    for s in self.spec["steps"]
                    if "send" in s
                    for m in s["send"]["messages"]
                }
                self.check(
                    (row["message_id"] not in originals) == expected,
                    f"message_id {row['message_id']} new_id != {expected}",
                )
            elif key == "body":
                body = row["body"]
                self.check(
                    body is not None and bytes(body).decode() == expected,
                    f"body {body!r}, expected {expected!r}",
                )
            elif key in ("routed_at", "expiration", "redeliver_at", "status_at"):
                value = row[key]
                # whole milliseconds, in integers (a float of seconds rounds 259.84 s down)
                got = None if value is None else (value - EPOCH) // dt.timedelta(milliseconds=1)
                self.check(got == expected, f"{key} = {got}, expected {expected}")
            else:
                self.check(row[key] == expected, f"{key} = {row[key]!r}, expected {expected!r}")

    def step_expect_journal(self, body: dict[str, Any]) -> None:
        selected = [
            r
            for r in rows(self.lake.journal)
            if r["event"] == body["event"]
            and ("queue" not in body or r["queue"] == body["queue"])
            and ("reason" not in body or dict(r["detail"] or []).get("reason") == body["reason"])
        ]
        self.check(
            len(selected) == body["count"],
            f"{len(selected)} journal rows, expected {body['count']}: {selected}",
        )

    def step_expect_rejected(self, body: dict[str, Any]) -> None:
        selected = [
            r
            for r in rows(self.lake.rejected)
            if "source" not in body or r["source"] == body["source"]
        ]
        self.check(
            len(selected) == body["count"],
            f"{len(selected)} rejected rows, expected {body['count']}: {selected}",
        )

    def step_expect_address(self, body: dict[str, Any]) -> None:
        selected = [
            r
            for r in rows(self.lake.address_table(body["address"]))
            if "copy_reason" not in body or r["copy_reason"] == body["copy_reason"]
        ]
        self.check(
            len(selected) == body["count"],
            f"{len(selected)} rows in {body['address']}, expected {body['count']}",
        )


def _props(row: dict[str, Any]) -> dict[str, str]:
    return _map(row.get("properties"))


def _types(row: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in _map(row.get("property_types")).items() if v is not None}


def _map(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    return dict(value) if not isinstance(value, dict) else value


def _typed(value: Any) -> bool:
    """A scenario property value with a type (FORMAT.md): anything but a JSON string."""
    return not isinstance(value, str)


def _properties(values: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A scenario's property values as the lake holds them: each value's text, and the type
    of each typed one (FORMAT.md)."""
    properties: dict[str, str] = {}
    types: dict[str, str] = {}
    for name, value in values.items():
        properties[name], kind = typed_value(value)
        if kind is not None:
            types[name] = kind
    return properties, types


def _without(schema: pa.Schema, name: str) -> pa.Schema:
    return pa.schema([f for f in schema if f.name != name])


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())
