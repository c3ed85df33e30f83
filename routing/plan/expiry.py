"""Expiry: the settings applied on entering an address, and when a queued message expires.

Entering an address (every route, copies included) applies its settings at the
row's ``sent_at`` (SPEC §5.2 step 5, Artemis ``PostOfficeImpl.applyExpiryDelay``):
``no-expiry`` clears the expiration; else ``expiry-delay >= 0`` sets it when absent;
else, when absent, ``max-expiry-delay`` (or, without one, ``min-expiry-delay``) sets
it, and when present it is clamped into ``[now + min, now + max]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from routing.broker.settings import AddressSettings
from routing.plan._columns import case_of

UNSET = -1  # Artemis's default for expiry-delay, min- and max-expiry-delay


@dataclass(frozen=True)
class Expirations:
    """What a batch knows of some rows' expirations without reading them: the earliest
    (epoch µs; None: no row has one)."""

    earliest: int | None

    def due_by(self, clock: int) -> bool:
        """Some row may expire by ``clock`` (SPEC §5.4: at its expiration)."""
        return self.earliest is not None and self.earliest <= clock

    def __or__(self, other: Expirations) -> Expirations:
        """The expirations of both sets of rows."""
        known = [e for e in (self.earliest, other.earliest) if e is not None]
        return Expirations(min(known) if known else None)


def earliest_expiration(of: Column | None = None) -> Column:
    """An aggregate: the earliest ``expiration`` of the rows (of those ``of`` holds for),
    in epoch µs, as :class:`Expirations` takes it."""
    micros = F.unix_micros(F.col("expiration"))
    return F.min(micros if of is None else F.when(of, micros))


def _plus_ms(moment: Column, millis: int) -> Column:
    return F.timestamp_micros(F.unix_micros(moment) + F.lit(millis * 1000))


def expiration_on_entry(settings: AddressSettings) -> Column:
    """The ``expiration`` a row gets on entering an address with ``settings``."""
    expiration, now = F.col("expiration"), F.col("sent_at")
    if settings.no_expiry:
        return F.lit(None).cast("timestamp")
    if settings.expiry_delay >= 0:
        return F.coalesce(expiration, _plus_ms(now, settings.expiry_delay))
    low, high = settings.min_expiry_delay, settings.max_expiry_delay
    if low == UNSET and high == UNSET:
        return expiration
    when_absent = _plus_ms(now, high if high != UNSET else low)
    present = expiration
    if low != UNSET:
        present = F.when(expiration < _plus_ms(now, low), _plus_ms(now, low)).otherwise(present)
    if high != UNSET:
        present = F.when(expiration > _plus_ms(now, high), _plus_ms(now, high)).otherwise(present)
    return F.when(expiration.isNull(), when_absent).otherwise(present)


def has_expiry_settings(settings: AddressSettings) -> bool:
    return (
        settings.no_expiry
        or settings.expiry_delay >= 0
        or settings.min_expiry_delay != UNSET
        or settings.max_expiry_delay != UNSET
    )


def expiration_by_address(
    addresses: Iterable[str], settings_of: Callable[[str], AddressSettings]
) -> Column:
    """The ``expiration`` of a row entering its ``address``: a CASE over the addresses
    whose settings change it (the others keep the row's own)."""
    changing = {
        address: expiration_on_entry(settings_of(address))
        for address in sorted(addresses)
        if has_expiry_settings(settings_of(address))
    }
    return case_of(F.col("address"), changing, F.col("expiration"))


def expires_at(clock_micros: Column) -> Column:
    """When a queued message expires (SPEC §5.4): at its expiration, or on entering the
    queue if that is later; null when it does not expire by the lake clock.

    :param clock_micros: the lake clock in epoch µs, a Column (a value of the batch, not a
        literal: a literal would change the generated code of every batch).
    """
    expiration = F.col("expiration")
    return F.when(
        expiration.isNotNull() & (F.unix_micros(expiration) <= clock_micros),
        F.greatest(expiration, F.col("routed_at")),
    )
