"""Copy ids (SPEC §5.6) as Spark Columns, equal bit for bit to
:func:`routing.broker.ids.copy_id_py` (the reference, and the encoding, are there)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from routing._typing import ColumnOrName
from routing.broker.ids import COPY_ID_BASE, COPY_ID_VERSION, NULL_MARK

__all__ = ["copy_id", "is_copy_id"]


def _col(c: ColumnOrName) -> Column:
    return c if isinstance(c, Column) else F.col(c)


def _enc_col(value: Column, *, nullable: bool) -> Column:
    encoded = F.concat(F.octet_length(value).cast("string"), F.lit(":"), value)
    if not nullable:
        return encoded  # a null required component makes the whole id null
    return F.when(value.isNull(), F.lit(NULL_MARK)).otherwise(encoded)


def copy_id(
    parent_id: ColumnOrName,
    reason: ColumnOrName,
    left: ColumnOrName,
    target_address: ColumnOrName,
    target_queue: ColumnOrName,
) -> Column:
    """The copy id as a native Spark Column, equal to :func:`copy_id_py` bit for bit.

    Null ``left`` / ``target_queue`` are encoded as null; a null ``parent_id``,
    ``reason`` or ``target_address`` gives a null id (they are required).

    :param parent_id: bigint Column (or column name) of the parent's id.
    :param reason: string Column or name; pass literals as ``F.lit("DIVERT")``.
    :param left: string Column or name, may be null.
    :param target_address: string Column or name.
    :param target_queue: string Column or name, may be null.
    :return: a bigint Column in ``[COPY_ID_BASE, 2**63)``.

    Example::

        copies.withColumn("message_id", copy_id("parent_id", F.lit("DIVERT"),
                                                "divert", "forward_address", F.lit(None)))
    """
    parent = _col(parent_id).cast("bigint").cast("string")
    message = F.concat(
        F.lit(COPY_ID_VERSION),
        _enc_col(parent, nullable=False),
        _enc_col(_col(reason).cast("string"), nullable=False),
        _enc_col(_col(left).cast("string"), nullable=True),
        _enc_col(_col(target_address).cast("string"), nullable=False),
        _enc_col(_col(target_queue).cast("string"), nullable=True),
    )
    digest = F.sha2(message.cast("binary"), 256)  # lower-case hex; UTF-8 bytes of the string
    # The first 64 bits are hex digits 1..16; keep the low 62: the first digit's low 2 bits
    # then 15 digits (60 bits, fits a bigint without overflow under ANSI mode).
    top2 = F.conv(F.substring(digest, 1, 1), 16, 10).cast("bigint").bitwiseAND(F.lit(3))
    low60 = F.conv(F.substring(digest, 2, 15), 16, 10).cast("bigint")
    return F.lit(COPY_ID_BASE).bitwiseOR(F.shiftleft(top2, 60)).bitwiseOR(low60)


def is_copy_id(message_id: ColumnOrName) -> Column:
    """True for ids in the copy range ``[2**62, 2**63)``, i.e. made by the job.

    :param message_id: bigint Column or column name.
    :return: a boolean Column (null for a null id).
    """
    return _col(message_id) >= F.lit(COPY_ID_BASE)
