"""A real standalone Spark cluster on loopback, for tests: eoslog.tools.local.spark_standalone, which the
commands that start the same use; re-exported here, so tests keep their import."""

from eoslog.tools.local.spark_standalone import SparkStandalone

__all__ = ["SparkStandalone"]
