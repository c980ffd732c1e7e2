"""The Spark Structured Streaming job: payments in, a double-entry ledger and rejects out, exactly once.

One query writes both outputs through the ``topic`` column, so each micro-batch's ledger entries and
rejects become visible together (one transaction group per batch). A valid transfer becomes two ledger
entries: a debit of ``from`` and a credit of ``to`` (amounts -a and +a, so the ledger sums to zero); an
invalid one becomes one reject carrying its reason. No shuffle: every batch is a projection.

With ``registry_url`` the payments are Avro in the schema registry's wire format, read as typed columns
(docs/spark.md, "Typed values"), and every ledger entry carries the transfer's ``currency``: the column
when the query was planned under TRANSFER_V2, the default otherwise (a v1 transfer has none).
"""

from __future__ import annotations

from eoslog.pipeline.generator import DEFAULT_CURRENCY, NEGATIVE_AMOUNT, SAME_ACCOUNT, UNKNOWN_ACCOUNT, Topics

TRANSFER_SCHEMA = "id string, `from` string, `to` string, amount long, ts long"


def build_query(spark, bootstrap: str, checkpoint: str, max_offsets_per_trigger: int | None = 50_000,
                require_exactly_once: bool = True, trigger: dict | None = None, query_name: str = "payments",
                topics: Topics | None = None, registry_url: str | None = None):
    from pyspark.sql import functions as F

    topics = topics or Topics()

    reader = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topics.payments).option("startingOffsets", "earliest"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    if registry_url is None:
        t = reader.load().select(F.from_json(F.col("value").cast("string"), TRANSFER_SCHEMA).alias("t")).select("t.*")
        extra = []
    else:
        t = reader.option("schema.registry.url", registry_url).load().select("value.*")
        currency = F.col("currency") if "currency" in t.columns else F.lit(DEFAULT_CURRENCY)
        extra = [currency.alias("currency")]
    known = F.col("from").startswith("acc-") & F.col("to").startswith("acc-")
    reason = (F.when(F.col("amount") <= 0, F.lit(NEGATIVE_AMOUNT))
              .when(F.col("from") == F.col("to"), F.lit(SAME_ACCOUNT))
              .when(~known, F.lit(UNKNOWN_ACCOUNT)))

    def entry(kind: str, acct: str, sign: int):
        return F.struct(F.lit(topics.ledger).alias("topic"), F.col(acct).alias("key"), F.to_json(F.struct(
            F.col("id").alias("transfer"), F.lit(kind).alias("entry"), F.col(acct).alias("account"),
            (F.col("amount") * sign).alias("amount"), F.col("ts").alias("ts"), *extra)).alias("value"))

    reject = F.struct(F.lit(topics.rejected).alias("topic"), F.col("id").alias("key"), F.to_json(F.struct(
        F.col("id").alias("transfer"), reason.alias("reason"), F.col("from"), F.col("to"),
        F.col("amount"))).alias("value"))
    out = (t.select(F.explode(F.when(reason.isNull(), F.array(entry("debit", "from", -1), entry("credit", "to", 1)))
                              .otherwise(F.array(reject))).alias("o"))
           .select("o.topic", "o.key", "o.value"))
    writer = (out.writeStream.format("eoslog").queryName(query_name)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("requireExactlyOnce", "true" if require_exactly_once else "false")
              .option("checkpointLocation", checkpoint))
    return writer.trigger(**(trigger or {"processingTime": "0 seconds"}))
