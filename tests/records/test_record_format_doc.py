"""The worked examples in docs/record-format.md are real output of our builder."""

import pathlib
import re

from eoslog.records import (
    ControlType,
    SimpleRecord,
    build_batch,
    build_control_batch,
    decode_batch,
    set_base_offset,
)

DOC = pathlib.Path(__file__).parents[2] / "docs" / "record-format.md"


def _hex_dump(text: str) -> bytes:
    block = re.search(r"```\n(0000 .*?)```", text, re.DOTALL).group(1)
    return bytes.fromhex("".join(line[6:] for line in block.splitlines()))


def test_worked_example_matches_the_builder():
    batch = build_batch(
        [
            SimpleRecord(b"k1", b"hello", (("h", b"v"),), 1_700_000_000_000),
            SimpleRecord(None, b"world", timestamp=1_700_000_000_005),
        ],
        producer_id=1000,
        producer_epoch=0,
        base_sequence=0,
    )
    assert _hex_dump(DOC.read_text()) == batch
    appended = bytearray(batch)
    set_base_offset(appended, 0, 500)
    assert appended[:8].hex(" ") == "00 00 00 00 00 00 01 f4"
    assert [r.offset for r in decode_batch(appended).absolute_records()] == [500, 501]


def test_control_example_matches_the_builder():
    batch = build_control_batch(ControlType.COMMIT, 1000, 0, 5, base_offset=2, timestamp=1_700_000_000_010)
    assert batch[61:].hex(" ") in DOC.read_text()
    assert batch[21:23] == b"\x00\x30"
