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
"""

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
