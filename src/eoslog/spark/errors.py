"""Errors the Spark source and sink raise to Spark, in a module of their own so that the readers that raise them
(partition_reader, fetch_reader, source) need not import each other for them."""


class DataLossError(RuntimeError):
    """Offsets Spark planned to read are gone (deleted by retention or DeleteRecords)."""


class MalformedValueError(RuntimeError):
    """A record value that typed columns cannot read (not the registry's wire format, an unknown schema id,
    a body that does not decode), or a row the sink cannot encode; the message names which record."""
