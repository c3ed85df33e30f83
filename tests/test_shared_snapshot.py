"""The vendored copy of the contract (tests/shared) must match ../shared when both exist."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "shared"
UPSTREAM = HERE.parents[1] / "shared"


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="no ../shared beside this checkout")
@pytest.mark.parametrize("folder", ["", "conformance", "fixtures", "artemis"])
def test_vendored_contract_matches_upstream(folder):
    upstream = _files(UPSTREAM / folder, recursive=folder == "artemis")
    vendored = _files(VENDORED / folder, recursive=folder == "artemis")
    assert vendored == upstream, f"tests/shared/{folder} is stale: copy ../shared/{folder} again"


def _files(folder: Path, *, recursive: bool) -> dict[str, bytes]:
    found = folder.rglob("*") if recursive else folder.iterdir()
    return {str(p.relative_to(folder)): p.read_bytes() for p in found if p.is_file()}
