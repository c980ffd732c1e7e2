"""Test helpers shipped with eoslog: the embedded broker, the pytest plugin and the fault-injecting proxy."""
