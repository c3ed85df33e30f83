"""A real Artemis 2.44 broker for scenarios (``../shared/artemis``): plays scenario files
and records random ones, for the tests and ``make recorded-random``.

The broker's driver builds itself with Maven on first use (about a minute from an empty
``~/.m2``) into ``~/.cache/artemis-scenarios``; it needs Java 17 and Maven, which
``make setup`` needs too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import SHARED

HARNESS = SHARED / "artemis"
RUN = HARNESS / "run"
GEN_RANDOM = HARNESS / "gen_random.py"

_VERDICT = re.compile(
    r"^=> (?P<name>.+?): .*\s(?P<verdict>PASS|FAIL|RECORDED CLEAN|RECORDED UNCLEAN)"
)


def available() -> str | None:
    """Why the broker cannot run here (None: it can)."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return f"the Artemis harness needs {' and '.join(missing)}"
    if not RUN.exists():
        return f"no Artemis harness at {HARNESS}"
    return None


@dataclass(frozen=True)
class Played:
    """What the broker said of each scenario (name -> PASS / FAIL), and its whole output."""

    verdicts: dict[str, str]
    output: str

    def failures(self, name: str) -> str:
        """The lines of the output about scenario ``name`` that did not pass."""
        lines, inside = [], False
        for line in self.output.splitlines():
            if line.startswith("== "):
                inside = line[3:].strip() == name
            elif inside and not line.lstrip().startswith(("PASS", "SKIP")):
                lines.append(line)
        return "\n".join(lines)


def play(*paths: Path, timeout: int = 900) -> Played:
    """Play scenario files or folders on the broker (``run``)."""
    done = subprocess.run(
        ["bash", str(RUN), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    verdicts = {}
    for line in output.splitlines():
        if m := _VERDICT.match(line):
            verdicts[m["name"]] = m["verdict"]
    return Played(verdicts, output)


def record_random(seed: int, cases: int, out: Path, timeout: int = 900) -> list[Path]:
    """``cases`` random scenarios of ``seed``, their expectations recorded by the broker
    (``gen_random.py``); the paths of those it recorded clean."""
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(GEN_RANDOM), "--seed", str(seed), "--cases", str(cases)]
    command += ["--out", str(out), "--run", str(RUN)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    recorded = sorted(out.glob(f"seed{seed}-case*.json"))
    if not recorded:
        raise RuntimeError(
            f"gen_random.py --seed {seed} recorded nothing:\n{done.stdout}{done.stderr}"
        )
    return recorded
