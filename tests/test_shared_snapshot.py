"""The vendored copy of the contract (tests/shared) must match ../shared when both exist."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
VENDORED = HERE / "shared"
UPSTREAM = HERE.parents[1] / "shared"


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="no ../shared beside this checkout")
@pytest.mark.parametrize("folder", ["", "conformance", "fixtures"])
def test_vendored_contract_matches_upstream(folder):
    upstream = {p.name: p.read_bytes() for p in (UPSTREAM / folder).iterdir() if p.is_file()}
    vendored = {p.name: p.read_bytes() for p in (VENDORED / folder).iterdir() if p.is_file()}
    assert vendored == upstream, f"tests/shared/{folder} is stale: copy ../shared/{folder} again"
