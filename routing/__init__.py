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
module of this package to unpickle a UDF or a data source (``routing.breadcrumbs``,
``routing.lake_events``), and each worker would otherwise import all of it first.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AddressSettingsRepository": "routing.settings",
    "BrokerConfig": "routing.config",
    "ConfigError": "routing.config",
    "Lake": "routing.lake",
    "Router": "routing.routing",
    "Topology": "routing.topology",
    "build_session": "routing.session",
    "copy_id": "routing.ids",
    "copy_id_py": "routing.ids",
    "load_config": "routing.config",
    "matches": "routing.filters",
    "parse_config": "routing.config",
    "parse_filter": "routing.filters",
    "rebuild_breadcrumbs": "routing.breadcrumbs",
    "run_batch": "routing.engine",
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
    from routing.breadcrumbs import rebuild_breadcrumbs
    from routing.config import BrokerConfig, ConfigError, load_config, parse_config
    from routing.engine import run_batch
    from routing.filters import matches, parse_filter
    from routing.ids import copy_id, copy_id_py
    from routing.lake import Lake
    from routing.routing import Router
    from routing.session import build_session
    from routing.settings import AddressSettingsRepository
    from routing.topology import Topology


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'routing' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
