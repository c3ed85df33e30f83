"""Deterministic copy ids (SPEC §5.6).

A copy's ``message_id`` is a pure function of its parent's id and the hop, so a
replay, another micro-batch cut or another Spark version gives the same id, and
the job can recognise its own copies when it reads them back (DESIGN.md).

The function (version ``v1``), so anyone can recompute it:

1. Take the five components, in this order: ``parent_id`` (written as its
   decimal string, ``-`` sign if negative, no leading zeros), ``reason``
   (``DIVERT``, ``DEAD_LETTER``, ``EXPIRY``, ``MOVE``, ``RETRY``), ``left`` (the
   queue or divert the parent left; null for a send-to-dla-on-no-route copy),
   ``target_address``, ``target_queue`` (MOVE and RETRY only, else null).
2. Encode each one: a non-null string ``s`` as
   ``<number of UTF-8 bytes of s, in decimal>:<UTF-8 bytes of s>``; null as the
   single byte ``-``. A non-null encoding starts with a digit, so null, ``""``
   (``0:``) and any string are all distinct, and the length prefix makes the
   concatenation unambiguous whatever the names contain (``:``, ``|``, digits,
   any Unicode).
3. ``message = b"copy-id/v1|" + enc(parent_id) + enc(reason) + enc(left)
   + enc(target_address) + enc(target_queue)``.
4. ``d = SHA-256(message)``; ``x`` = the first 8 bytes of ``d`` read as an
   unsigned big-endian integer; ``id = 2**62 + (x mod 2**62)`` (the low 62 bits of
   the first 64 bits of the digest).

Example: parent 123, ``DIVERT`` out of ``divertAtoB`` to ``B`` hashes
``copy-id/v1|3:1236:DIVERT10:divertAtoB1:B-``.

Ids are in ``[2**62, 2**63)``: non-negative int64, and disjoint from producer ids,
which are validated to lie in ``[0, 2**62)``. Two different hops collide only if
their 62-bit hashes do: for ``n`` copies in one lake the probability is about
``n**2 / 2**63`` (1e6 copies: 1.1e-7; 1e8: 1.1e-3; 1e9: 0.11).

The Column version (:func:`routing.plan.ids.copy_id`) uses only native Spark functions (``octet_length``,
``concat``, ``sha2``, ``conv``, bit operations), never Spark's internal hashes,
and equals :func:`copy_id_py` bit for bit.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "COPY_ID_BASE",
    "COPY_ID_VERSION",
    "COPY_REASONS",
    "DEAD_LETTER",
    "DIVERT",
    "EXPIRY",
    "MOVE",
    "NULL_MARK",
    "RETRY",
    "copy_id_py",
]

COPY_ID_BASE: int = 1 << 62
"""Smallest copy id; producer ids are below it."""

COPY_ID_VERSION: str = "copy-id/v1|"
"""Domain prefix hashed before the components; a new function gets a new prefix."""

NULL_MARK = "-"
"""How a null component is encoded (its length-prefixed form otherwise)."""

DIVERT, DEAD_LETTER, EXPIRY, MOVE, RETRY = "DIVERT", "DEAD_LETTER", "EXPIRY", "MOVE", "RETRY"
COPY_REASONS = (DIVERT, DEAD_LETTER, EXPIRY, MOVE, RETRY)
"""The hops that make a copy: its ``copy_reason``, hashed into its id. A dead letter's
(an expiry's) is also the kind of queue it auto-creates (``Queue.auto_created``)."""
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _enc_py(value: str | None) -> bytes:
    if value is None:
        return NULL_MARK.encode("ascii")
    raw = value.encode("utf-8")
    return str(len(raw)).encode("ascii") + b":" + raw


def copy_id_py(
    parent_id: int,
    reason: str,
    left: str | None,
    target_address: str,
    target_queue: str | None,
) -> int:
    """The reference copy id (see the module docstring for the encoding).

    :param parent_id: the id of the message copied (an int64).
    :param reason: the copy reason (``DIVERT``, ``DEAD_LETTER``, ...).
    :param left: the queue or divert the parent left; None for no-route copies.
    :param target_address: the address the copy is sent to.
    :param target_queue: MOVE/RETRY target queue, else None.
    :return: an id in ``[COPY_ID_BASE, 2**63)``.

    Example::

        copy_id_py(123, "DIVERT", "divertAtoB", "B", None)
    """
    if isinstance(parent_id, bool) or not isinstance(parent_id, int):
        raise TypeError(f"parent_id: expected an int, found {type(parent_id).__name__}")
    if not _INT64_MIN <= parent_id <= _INT64_MAX:
        raise ValueError(f"parent_id: expected an int64, found {parent_id}")
    for name, value, nullable in (
        ("reason", reason, False),
        ("left", left, True),
        ("target_address", target_address, False),
        ("target_queue", target_queue, True),
    ):
        if value is None and not nullable:
            raise TypeError(f"{name}: expected a str, found None")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name}: expected a str or None, found {type(value).__name__}")
    message = COPY_ID_VERSION.encode("ascii") + b"".join(
        _enc_py(v) for v in (str(parent_id), reason, left, target_address, target_queue)
    )
    x = int.from_bytes(hashlib.sha256(message).digest()[:8], "big")
    return COPY_ID_BASE + (x & (COPY_ID_BASE - 1))
