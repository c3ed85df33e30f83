"""Expiry: the settings applied on entering an address, and when a queued message expires.

Entering an address (every route, copies included) applies its settings at the
row's ``sent_at`` (SPEC §5.2 step 5, Artemis ``PostOfficeImpl.applyExpiryDelay``):
``no-expiry`` clears the expiration; else ``expiry-delay >= 0`` sets it when absent;
else, when absent, ``max-expiry-delay`` (or, without one, ``min-expiry-delay``) sets
it, and when present it is clamped into ``[now + min, now + max]``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from routing.broker.settings import AddressSettings

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


def expiration_entering(
    no_expiry: Column, expiry_delay: Column, min_expiry_delay: Column, max_expiry_delay: Column
) -> Column:
    """The ``expiration`` a row gets on entering an address whose settings are in columns
    (the module's rules; the binding table holds them, :mod:`routing.plan.bindings`). Null
    settings, an address the configuration does not know, change nothing."""
    expiration, now = F.col("expiration"), F.col("sent_at")

    def plus(millis: Column) -> Column:
        return F.timestamp_micros(F.unix_micros(now) + millis * F.lit(1000))

    delay = F.coalesce(expiry_delay, F.lit(UNSET))
    low = F.coalesce(min_expiry_delay, F.lit(UNSET))
    high = F.coalesce(max_expiry_delay, F.lit(UNSET))
    raised = F.when((low != UNSET) & (expiration < plus(low)), plus(low)).otherwise(expiration)
    clamped = F.when((high != UNSET) & (raised > plus(high)), plus(high)).otherwise(raised)
    return (
        F.when(F.coalesce(no_expiry, F.lit(False)), F.lit(None).cast("timestamp"))
        .when(delay >= 0, F.coalesce(expiration, plus(delay)))
        .when(expiration.isNull(), F.when(high != UNSET, plus(high)).when(low != UNSET, plus(low)))
        .otherwise(clamped)
    )


def has_expiry_settings(settings: AddressSettings) -> bool:
    return (
        settings.no_expiry
        or settings.expiry_delay >= 0
        or settings.min_expiry_delay != UNSET
        or settings.max_expiry_delay != UNSET
    )


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
