"""Spark plans: the routing of one micro-batch as ``DataFrame -> DataFrame`` steps.

Owns the filter compiler (:mod:`~routing.plan.filters`), copy ids as Columns
(:mod:`~routing.plan.ids`), routing (:mod:`~routing.plan.router`, :mod:`~routing.plan.turns`),
copies and breadcrumbs (:mod:`~routing.plan.copies`, :mod:`~routing.plan.breadcrumbs`),
the delivery fold (:mod:`~routing.plan.deliveries`, :mod:`~routing.plan.sequences`), expiry,
the journal, input normalisation and classification (:mod:`~routing.plan.normalise`,
:mod:`~routing.plan.inputs`), the schemas, and the batch itself
(:mod:`~routing.plan.engine`, :mod:`~routing.plan.batch`).

Builds on :mod:`routing.broker`; reads and writes no table (Spark actions, such as
checkpointing a frame the batch reads twice, are the only side effects). Spark's
Python workers import single modules of this package to unpickle UDFs, so this
file imports nothing.
"""
