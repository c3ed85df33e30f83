"""A real Artemis 2.44 broker (``../shared/artemis``) passes every scenario the suite plays on
the job: the public ones (``../shared/conformance``) and the project's own
(``tests/scenarios``). A scenario the broker fails states something Artemis does not do:
it is a wrong scenario (or a behaviour of the lake's own, which the scenario must mark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.artemis import Played, available, play
from tests.conftest import SHARED

HERE = Path(__file__).resolve().parent
FOLDERS = (SHARED / "conformance", HERE / "scenarios")
SCENARIOS = sorted(p for folder in FOLDERS for p in folder.glob("*.json"))

pytestmark = pytest.mark.skipif(available() is not None, reason=str(available()))


@pytest.fixture(scope="module")
def played() -> Played:
    """Every scenario, played once on the broker (one JVM, a fresh broker each)."""
    return play(*FOLDERS)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_the_broker_passes_the_scenario(played: Played, path: Path):
    verdict = played.verdicts.get(path.stem)
    assert verdict == "PASS", (
        f"Artemis does not do what {path.name} says ({verdict}):\n{played.failures(path.stem)}"
    )
