"""Artemis 2.44's own filter code, run on cases (tests only): see :func:`evaluate`.

``FilterEval.java`` is compiled against the jars of ``artemis-server`` 2.44.0, which
``pom.xml`` lists and Maven copies (``mvn dependency:copy-dependencies``, from Maven
Central or ``~/.m2``) into a cache folder named after a hash of the two files
(``$ROUTING_ARTEMIS_FILTERS_BUILD``, default ``~/.cache/routing-artemis-filters/<hash>``):
the first run takes some seconds (a minute with an empty ``~/.m2``), the next ones reuse it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "pom.xml", HERE / "FilterEval.java")


def unavailable() -> str | None:
    """Why Artemis's filters cannot run here (None: they can)."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        return f"evaluating filters with Artemis needs {', '.join(missing)} on PATH"
    return None


def build_dir() -> Path:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES)).hexdigest()[:12]
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    root = os.environ.get("ROUTING_ARTEMIS_FILTERS_BUILD")
    return Path(root) if root else default / "routing-artemis-filters" / digest


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:3])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def build() -> Path:
    """The build folder, with ``lib/*.jar`` and ``classes/FilterEval.class`` (built once)."""
    out = build_dir()
    if (out / "classes" / "FilterEval.class").exists():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy(HERE / "pom.xml", tmp / "pom.xml")
    _run(
        ["mvn", "-q", "-B", "dependency:copy-dependencies", f"-DoutputDirectory={tmp / 'lib'}",
         "-DincludeScope=runtime"],
        cwd=tmp, timeout=900,
    )  # fmt: skip
    _run(
        ["javac", "-encoding", "UTF-8", "-d", str(tmp / "classes"), "-cp", f"{tmp / 'lib'}/*",
         str(HERE / "FilterEval.java")],
        timeout=300,
    )  # fmt: skip
    if (out / "classes" / "FilterEval.class").exists():  # another process built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


def case(filter_text: str, message: dict[str, Any]) -> dict[str, Any]:
    """One input line of FilterEval: the filter and the message (``tests/filter_oracle.py``'s
    form), each property as [type, text]; an untyped one is refused (Artemis has none)."""
    props = message.get("properties") or {}
    types = message.get("property_types") or {}
    untyped = set(props) - set(types)
    if untyped:
        raise ValueError(f"Artemis has no untyped properties: {sorted(untyped)}")
    return {
        "filter": filter_text,
        "properties": {k: [types[k], v] for k, v in props.items()},
        **{
            k: message.get(k)
            for k in ("priority", "durable", "expiration_ms", "sent_at_ms", "user_id", "address")
        },
    }


def evaluate(cases: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """``FilterImpl.createFilter(text).match(message)`` for each case, in one JVM: "true",
    "false" or "invalid" (createFilter threw)."""
    out = build()
    lines = "".join(json.dumps(case(t, m), ensure_ascii=True) + "\n" for t, m in cases)
    done = _run(
        ["java", "-Xss8m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m",
         "-cp", f"{out / 'classes'}:{out / 'lib'}/*", "FilterEval"],
        input=lines, timeout=600,
    )  # fmt: skip
    return done.stdout.splitlines()
