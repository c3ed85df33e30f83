"""Tools over a finished lake: the audit functions the notebooks call
(:mod:`~routing.tools.audit`) and the replay of a recorded producer log
(:mod:`~routing.tools.replay`).

Built on the layers below (:mod:`routing.io`, :mod:`routing.plan`, :mod:`routing.broker`);
the entry points in ``jobs/`` build on these.
"""
