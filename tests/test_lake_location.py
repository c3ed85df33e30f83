"""Where a lake may be: a folder, given as a path or as a ``file:`` URI, is routed; a lake on
another file system is refused in one line before anything is written."""

from __future__ import annotations

import io
from pathlib import Path

from jobs import demo, replay, route
from routing.io.lake import Lake, local_path
from routing.plan import schemas
from tests.lakeio import append, at, rows
from tests.test_cluster import BROKER, ROOT


def run(main, argv: list[str], spark) -> tuple[int, str, str]:
    """A job run in the tests' session (a job given none stops the one it builds)."""
    out, err = io.StringIO(), io.StringIO()
    status = main(argv, spark=spark, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_a_file_uri_names_its_folder(tmp_path):
    folder = Lake.at(tmp_path / "a lake")
    for uri in ("file://{}", "file:{}", "file://localhost{}"):
        assert Lake.at(uri.format(str(tmp_path / "a%20lake"))) == folder
    assert folder.is_local
    assert local_path("file://elsewhere/lake") is None
    remote = Lake.at("s3a://bucket/lake")
    assert remote.root == "s3a://bucket/lake" and not remote.is_local


def test_a_lake_given_as_a_file_uri_is_routed_in_its_folder(spark, tmp_path):
    folder = tmp_path / "lake"
    messages = [
        {"message_id": i, "address": "orders", "sent_at": at(i), "durable": True} for i in (1, 2)
    ]
    append(folder / "addresses" / "orders", messages, schemas.MESSAGE)

    status, _, err = run(
        route.main, ["--conf", str(BROKER), "--lake", folder.as_uri(), "--available-now"], spark
    )

    assert (status, err) == (0, "")
    queued = rows(folder / "queue_messages")
    assert {(r["message_id"], r["status"]) for r in queued if r["queue"] == "orders"} == {
        (1, "PENDING"),
        (2, "PENDING"),
    }
    assert (folder / "_checkpoints").is_dir()


def test_a_lake_on_another_file_system_is_refused_before_anything_is_written(spark, tmp_path):
    lake = "s3a://bucket/lake"
    log = tmp_path / "log.jsonl"
    log.write_text("")
    runs = [
        run(route.main, ["--conf", str(BROKER), "--lake", lake, "--available-now"], spark),
        run(replay.main, ["--log", str(log), "--conf", str(BROKER), "--lake", lake], spark),
    ]
    for status, out, err in runs:
        assert (status, out) == (1, "")
        assert err == (
            f"lake error: {lake} is not a folder of this machine's file system; the job reads "
            "the tables' Delta logs and its checkpoints as files: route a local or mounted "
            "folder\n"
        )
    assert demo.main(["--lake", lake, "--messages", "10"], spark=spark, out=io.StringIO()) == 1
    assert not any(Path(p).exists() for p in ("s3a:", ROOT / "s3a:", tmp_path / "s3a:"))
