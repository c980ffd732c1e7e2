"""Errors the Spark source raises to Spark, in a module of their own so that the readers that raise them
(partition_reader, fetch_reader, source) need not import each other for them."""


class DataLossError(RuntimeError):
    """Offsets Spark planned to read are gone (deleted by retention or DeleteRecords)."""
