"""This broker's BROKER config resource as the config APIs see it (api/context.py's protocol), apart from
server/broker_configs.py, which it calls: the broker builds it before serving, and the entries, their
synonyms and Kafka's property table load at the first DescribeConfigs or AlterConfigs, not before the
port opens."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eoslog.server.broker_configs import BrokerConfigEntry
    from eoslog.server.config import BrokerConfig


class BrokerConfigResource:
    """This broker's BROKER config resource, as the config APIs see it (api/context.py's protocol): the
    static config, the dynamic levels and the cluster id in force, behind four calls."""

    def __init__(self, config: BrokerConfig, dynamic, cluster_id: str) -> None:
        self._config = config
        self._dynamic = dynamic
        self._cluster_id = cluster_id

    def is_own(self, resource_name: str) -> bool:
        from eoslog.server.broker_configs import check_broker_resource

        return check_broker_resource(self._config, resource_name)

    def describe(self, resource_name: str, keys: Iterable[str] | None,
                 include_synonyms: bool) -> list[BrokerConfigEntry]:
        from eoslog.server.broker_configs import describe_broker_configs, describe_default_configs

        if self.is_own(resource_name):
            return describe_broker_configs(self._config, keys, include_synonyms, self._cluster_id, self._dynamic)
        return describe_default_configs(self._dynamic, keys)  # "": the dynamic defaults set, as in Kafka

    def check_alterable(self, names: Iterable[str], cluster_default: bool = False) -> None:
        from eoslog.server.broker_configs import check_alterable

        check_alterable(self._config, names, self._dynamic, cluster_default)

    async def alter(self, cluster_default: bool, change: Callable[[dict[str, str]], dict[str, str]],
                    validate_only: bool) -> None:
        await self._dynamic.alter(cluster_default, change, validate_only)
