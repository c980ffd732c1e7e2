"""eoslog.records.checksum loads the crc32c package's extension by itself (start-up, issue 16)."""

from __future__ import annotations

import crc32c as crc32c_package

from eoslog.records.checksum import crc32c


def test_the_check_value_of_crc32c():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value for CRC-32C
    assert crc32c(b"456789", crc32c(b"123")) == 0xE3069283


def test_the_same_function_as_the_package_exports():
    assert crc32c is crc32c_package.crc32c
