"""CRC-32C (Castagnoli), the checksum of record batches, producer snapshots and producer-id blocks.

The function is the ``crc32c`` package's C extension (hardware-accelerated with SSE4.2). Its package
``__init__`` imports ``importlib.metadata`` only to set ``__version__`` -- with email, csv and zipfile that
is about 20 ms, a tenth of ``eoslog serve``'s start-up -- so the extension module is loaded by itself
when the package is a plain directory, and through the package otherwise. Either way it is the same
function object.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path


def _load() -> Callable[..., int]:
    name = "crc32c._crc32c"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.find_spec("crc32c")  # a top-level package: found, not imported
        for directory in (spec.submodule_search_locations or ()) if spec is not None else ():
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = Path(directory, "_crc32c" + suffix)
                if path.is_file():
                    extension = importlib.util.spec_from_file_location(name, path)
                    module = importlib.util.module_from_spec(extension)
                    extension.loader.exec_module(module)
                    sys.modules[name] = module  # `import crc32c` later reuses it
                    return module.crc32c
        from crc32c import crc32c

        return crc32c
    return module.crc32c


crc32c = _load()
