"""The job's state between micro-batches: the lake clock, round-robin positions and
when each auto-created queue was created. Pure Python; storage keeps it as JSON in
each commit's metadata (:class:`routing.io.storage.DeltaStorage`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["STATE_VERSION", "JobState"]

STATE_VERSION = 1


@dataclass
class JobState:
    """What the job carries from one micro-batch to the next, besides queue rows."""

    clock: int | None = None  # lake clock, epoch µs
    positions: dict[str, int] = field(default_factory=dict)  # round-robin positions
    # auto-created queue -> when it was created: (epoch µs, rank at that instant)
    created: dict[str, tuple[int, int]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "clock": self.clock,
                "positions": self.positions,
                "created": {name: list(t) for name, t in self.created.items()},
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | None) -> JobState:
        """The state a commit carries; one written before ``created`` existed has created
        no queue yet."""
        if not text:
            return cls()
        data = json.loads(text)
        created = {name: (int(t), int(r)) for name, (t, r) in data.get("created", {}).items()}
        return cls(data.get("clock"), dict(data.get("positions", {})), created)
