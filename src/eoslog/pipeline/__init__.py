"""The payments pipeline behind ``eoslog pipeline``: generate transfers, validate them with Spark into a
double-entry ledger exactly once, and verify the result (docs/spark.md, "The payments pipeline")."""
