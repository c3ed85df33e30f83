"""The routing core of an Apache ActiveMQ Artemis broker over Delta Lake tables.

The public API, by broker concept (each module's docstring says more):

- configuration: :func:`load_config`, :func:`parse_config`, :class:`BrokerConfig`,
  :class:`ConfigError`; the settings hierarchy: :class:`AddressSettingsRepository`;
- filters: :func:`matches` (an Artemis filter as a Spark Column), :func:`parse_filter`;
- copies: :func:`copy_id` / :func:`copy_id_py` (SPEC §5.6), :func:`rebuild_breadcrumbs`
  (SPEC §5.5, the vectorised UDF);
- routing and deliveries: :class:`Topology`, :class:`Router`, :func:`run_batch`;
- the lake: :class:`Lake` (paths), :func:`build_session` (a session with the lake
  data sources registered).

The names are imported on first use (PEP 562): Spark's Python workers import one
module of this package to unpickle a UDF or a data source (``routing.plan.breadcrumbs``,
``routing.io.lake_events``), and each worker would otherwise import all of it first.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AddressSettingsRepository": "routing.broker.settings",
    "BrokerConfig": "routing.broker.config",
    "ConfigError": "routing.broker.config",
    "Lake": "routing.io.lake",
    "Router": "routing.plan.router",
    "Topology": "routing.broker.topology",
    "build_session": "routing.io.session",
    "copy_id": "routing.plan.ids",
    "copy_id_py": "routing.broker.ids",
    "load_config": "routing.broker.config",
    "matches": "routing.plan.filters",
    "parse_config": "routing.broker.config",
    "parse_filter": "routing.broker.filters",
    "rebuild_breadcrumbs": "routing.plan.breadcrumbs",
    "run_batch": "routing.plan.engine",
}

__all__ = [
    "AddressSettingsRepository",
    "BrokerConfig",
    "ConfigError",
    "Lake",
    "Router",
    "Topology",
    "build_session",
    "copy_id",
    "copy_id_py",
    "load_config",
    "matches",
    "parse_config",
    "parse_filter",
    "rebuild_breadcrumbs",
    "run_batch",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from routing.broker.config import BrokerConfig, ConfigError, load_config, parse_config
    from routing.broker.filters import parse_filter
    from routing.broker.ids import copy_id_py
    from routing.broker.settings import AddressSettingsRepository
    from routing.broker.topology import Topology
    from routing.io.lake import Lake
    from routing.io.session import build_session
    from routing.plan.breadcrumbs import rebuild_breadcrumbs
    from routing.plan.engine import run_batch
    from routing.plan.filters import matches
    from routing.plan.ids import copy_id
    from routing.plan.router import Router


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'routing' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
