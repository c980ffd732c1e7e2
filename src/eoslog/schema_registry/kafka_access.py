"""How the registry reaches Kafka: a bootstrap list and the client properties of a secured listener
(security.protocol, sasl.*, ssl.*, as every eoslog tool reads them), given to both of the registry's
client kinds: librdkafka (the ``_schemas`` reader and the transactional writer) and eoslog's own
``BrokerConnection`` (the writer election's group requests, which librdkafka does not let a program
write itself)."""

from __future__ import annotations

from dataclasses import dataclass, field

from eoslog.security.client import ClientSecurity

_PASSED_THROUGH = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                   "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
                   "ssl.endpoint.identification.algorithm")


@dataclass(frozen=True)
class KafkaAccess:
    bootstrap: str
    properties: dict[str, str] = field(default_factory=dict)

    def security(self) -> ClientSecurity | None:
        return ClientSecurity.from_properties(self.properties) if self.properties else None

    def librdkafka(self, **settings: object) -> dict:
        from eoslog.security.jaas import jaas_option

        config: dict = {"bootstrap.servers": self.bootstrap}
        config.update({k: v for k, v in self.properties.items() if k in _PASSED_THROUGH})
        if "ssl.truststore.location" in self.properties and "ssl.ca.location" not in config:
            config["ssl.ca.location"] = self.properties["ssl.truststore.location"]  # PEM truststores only
        if "ssl.keystore.location" in self.properties and "ssl.certificate.location" not in config:
            config["ssl.certificate.location"] = self.properties["ssl.keystore.location"]
        jaas = self.properties.get("sasl.jaas.config")
        if jaas and "sasl.username" not in config:
            config["sasl.username"] = jaas_option(jaas, "username")
            config["sasl.password"] = jaas_option(jaas, "password")
        config.update(settings)
        return config
