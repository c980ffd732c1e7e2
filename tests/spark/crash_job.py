"""The streaming copy job the crash tests run as a subprocess (so it can be SIGKILLed whole).

    python crash_job.py BOOTSTRAP SOURCE TARGET CHECKPOINT REQUIRE_EXACTLY_ONCE [WRITER]

Copies SOURCE to TARGET with format("eoslog") on both sides, 500 offsets per micro-batch, trigger
availableNow, restarting from CHECKPOINT, with the sink's ``eoslog.writer`` WRITER (default: the sink's). Exits 0 when everything available at start is copied.
"""

import os
import sys

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def main() -> None:
    bootstrap, source, target, checkpoint, require = sys.argv[1:6]
    writer = sys.argv[6] if len(sys.argv) > 6 else None
    from pyspark.sql import SparkSession

    import eoslog.spark

    spark = (SparkSession.builder.master("local[2]").appName("eoslog-crash-job")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    eoslog.spark.register(spark)
    sink_options = {"eoslog.writer": writer} if writer else {}
    query = (spark.readStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "500")
             .load().selectExpr("key", "value")
             .writeStream.format("eoslog").option("kafka.bootstrap.servers", bootstrap).option("topic", target)
             .option("requireExactlyOnce", require).option("checkpointLocation", checkpoint).options(**sink_options)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
