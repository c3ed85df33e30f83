"""The broker, pure Python: what ``broker.xml`` says and what it means.

Owns the configuration (:mod:`~routing.broker.config`), the address-settings
hierarchy (:mod:`~routing.broker.settings`) and its checks
(:mod:`~routing.broker.validation`), the topology of queues and diverts
(:mod:`~routing.broker.topology`), the Artemis filter grammar
(:mod:`~routing.broker.filters`), copy ids (:mod:`~routing.broker.ids`), the lake's
table names (:mod:`~routing.broker.layout`) and the job's state between batches
(:mod:`~routing.broker.state`).

Imports nothing of Spark, Delta or any other layer of ``routing``.
"""
