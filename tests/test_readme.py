"""Every command the README shows runs as a user types it (chispa's README examples as tests).

The ``sh`` blocks of README.md are read line by line; each command runs in a fresh folder
(``conf/`` linked there, ``python`` this interpreter), block by block in order, and must
exit 0. A command the suite runs elsewhere is named in :data:`ELSEWHERE` with the test
that does; a README command neither runs here nor is named there fails the suite.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

ELSEWHERE = {
    "make test": "the suite itself",
    "zip -r project.zip": "tests/test_cluster.py (project_zip)",
    "spark-submit": "tests/test_cluster.py submits jobs/replay.py with --jars",
}
"""Command prefixes the suite runs in another test, and where."""

TIMEOUT = 600


def readme_commands(text: str) -> list[str]:
    """The commands of the ``sh`` blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def elsewhere(command: str) -> str | None:
    return next((where for prefix, where in ELSEWHERE.items() if command.startswith(prefix)), None)


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))
HERE = [c for c in COMMANDS if elsewhere(c) is None]


def test_every_readme_command_is_run_by_the_suite():
    assert COMMANDS, "no sh block in README.md"
    for command in HERE:
        words = shlex.split(command)
        assert words[:2] == ["python", "-m"] or words[0] == "make", (
            f"README command {command!r} is neither run here nor named in ELSEWHERE"
        )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A user's folder: the repository's ``conf`` at hand, a lake yet to be made."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "conf").symlink_to(ROOT / "conf")
    return folder


def run(command: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    words = shlex.split(command)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if words[0] == "python":
        words[0] = sys.executable
        cwd = workdir
    else:  # make: in the repository, its lake in the user's folder
        cwd = ROOT
        env["LAKE"] = str(workdir / "make-run-lake")
    return subprocess.run(
        words, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", HERE)
def test_the_readme_command_runs(command, workdir):
    done = run(command, workdir)
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    # the console is the job's: no Spark warning, no traceback (they are in the lake's _logs)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert " WARN " not in done.stderr, done.stderr[-3000:]
    if command == "make run":
        text = README.read_text(encoding="utf-8")
        shown = re.search(
            r"^```\n([^`]*?queue_messages by queue and status:\n.*?)^```", text, re.S | re.M
        )
        assert shown, "README shows no output of make run"
        table = shown.group(1).split("queue_messages by queue and status:\n")[1].splitlines()
        queues = [line.split()[0] for line in table[1:] if line.strip()]
        assert queues
        for queue in queues:
            assert re.search(rf"^\s+{re.escape(queue)}\s", done.stdout, re.M), (queue, done.stdout)
