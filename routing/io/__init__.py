"""The edge: Spark sessions, the lake on disk, Delta tables in and out.

Owns the session helper (:mod:`~routing.io.session`), the lake's paths
(:mod:`~routing.io.lake`), Delta metadata read with delta-rs
(:mod:`~routing.io.delta_tables`), the input stream over the lake
(:mod:`~routing.io.lake_events`) and the job's storage (:mod:`~routing.io.storage`:
the :class:`~routing.io.storage.Storage` protocol and :class:`~routing.io.storage.DeltaStorage`).

Builds on :mod:`routing.plan` and :mod:`routing.broker`. Spark's Python workers import
:mod:`routing.io.lake_events` to run the data source, so this file imports nothing.
"""
