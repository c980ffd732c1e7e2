"""The schema ids of a whole batch's records at once, without a Python object per record: the fast path of
the broker's schema id validation (validation.py). Pure: the records section of one batch in, arrays out.

The schema registry's wire format puts the id in each value's (or key's) first five bytes: the magic byte
0, then the id as a 4-byte big-endian integer. Reading them needs the records' boundaries, and a record's
boundary is known only once the varint length of the one before it is read, so the walk is sequential.
Two things keep it off the per-record Python cost of ``records.batch.decode_batch`` (about 3–6 µs a record):

- **runs of one record size.** A producer's records of one schema usually have the same size for many
  records in a row (fixed-size values, or values whose size changes only now and then). When a record's
  length varint reads ``size``, the records that follow are tested all at once: numpy reads the bytes at
  ``position + k * size`` through a strided view, and every one that repeats the first record's length
  varint proves, by induction, that a record of the same size starts there. A batch of equal-size
  records is one such test; sizes that change from record to record are walked by a short Python loop
  over the length varints (about 0.15 µs a record), which hands over to the strided test whenever
  :data:`MIN_RUN` records in a row have had one size.
- **fields of every record at once.** From the records' starts, each field (attributes, timestamp delta,
  offset delta, key length and key, value length) is skipped for all records together with numpy: the
  4 bytes at any position are read as one integer through a strided view of the bytes, so a varint of up
  to three bytes, or a magic byte and a schema id, is one gather for all records. The offset deltas a
  client writes (0, 1, 2, ...) are compared with their encoding in one step, and decoded only otherwise.

Before either, :func:`_scan_runs` tries the shape nearly every client batch has: long runs of records
laid out alike (the same sizes of every field, the same key and value prefixes; a client's batch changes
layout only where an offset or timestamp delta takes another byte). The first record of a run is read in
Python; the run's records are then the rows of one 2-D view of the bytes, and one comparison of a few of
their columns with the first row's proves the whole run, in a handful of numpy calls per run rather than
a few dozen per batch (each numpy call costs about a microsecond whatever its size, which was most of
the check's cost on batches of a few hundred records). A batch it cannot cover in a few long runs goes
to the general scan.

It only ever vouches for what it fully understood: a record whose varints are longer than three bytes, a
record with headers, or any disagreement between the fields and the record's length makes it answer
None, and the caller then takes the record-by-record path, which decodes strictly and names every bad
record. So a batch this accepts is one that path would have accepted too.
"""

from __future__ import annotations

from array import array
from typing import NamedTuple

import numpy as np

# After this many records of one size in a row, the Python walk hands over to the strided test.
MIN_RUN = 8
MAX_THREE_BYTE_OFFSET_DELTA = 1 << 20


class Prefixes(NamedTuple):
    """Per record of the batch, in order: the 4-byte id after a magic byte 0 (``ids``), whether the part
    is null (``null``, which passes: a tombstone), and whether the part is in the wire format at all
    (``wire``: five bytes or more, the first 0); ``null`` and ``wire`` may be one bool for every record.
    ``ids`` is meaningless where ``wire`` is False; :data:`ALL_NULL` stands for a batch whose parts are
    all null. ``distinct``: the ids of the records in the wire format, once each, when the scan knows
    them without asking ``ids`` (:func:`_scan_runs` does); else None. ``places``: where each record's
    bytes of the part begin in the records section, and how many there are (the general scan's; payload
    validation reads them); else None."""

    ids: np.ndarray
    null: np.ndarray | bool
    wire: np.ndarray | bool
    distinct: tuple[int, ...] | None = None
    places: tuple[np.ndarray, np.ndarray] | None = None


class BatchPrefixes(NamedTuple):
    keys: Prefixes | None  # None when they were not asked for
    values: Prefixes
    # From :func:`_scan_runs`: each run's first byte, record count and layout, which place every record's
    # key and value (payload validation reads them without decoding the records); None otherwise.
    runs: tuple[tuple[int, int, _Layout], ...] | None = None


def scan(records, count: int, keys: bool = True) -> BatchPrefixes | None:
    """The key and value prefixes of the ``count`` records that fill ``records`` (a batch's records
    section, uncompressed), or None when the scan cannot vouch for the batch (see the module docstring).
    ``keys`` False: the keys' prefixes are not wanted (the answer's ``keys`` may then be None), so keys
    that differ from record to record, at one length, do not cut the runs :func:`_scan_runs` looks for."""
    if count <= 0:
        return None
    return _scan_runs(records, count, keys) or scan_general(records, count)


def scan_general(records, count: int) -> BatchPrefixes | None:
    """:func:`scan` without the runs: every record's fields read together, whatever the batch's shape."""
    if count <= 0:
        return None
    scanned = _scan(records, len(records), count)
    if scanned is _NEAR_THE_END:  # a field in the last bytes: read again with room for the 4-byte windows
        scanned = _scan(bytes(records) + bytes(_WINDOW), len(records), count)
    return scanned if isinstance(scanned, BatchPrefixes) else None


_WINDOW = 4
_NEAR_THE_END = object()


MAX_VARINT_BYTES = 3  # as the general scan: longer varints are left to the decoder
_EXACT = 0xFF
_CONTINUATION = 0x80  # a varint's bytes: the same byte count, whatever the value
_NON_NEGATIVE = 0x81  # an offset delta's first byte: the same byte count, and its zigzag sign bit clear


class _Layout(NamedTuple):
    """One record's layout, read in Python: its size, the columns (byte positions from the record's
    length varint) that every record of its run must repeat under ``mask``, and its prefixes."""

    size: int
    columns: np.ndarray
    mask: np.ndarray
    expected: np.ndarray  # the columns of the record the layout was read from, under ``mask``
    key: tuple[int, bool, bool]  # schema id, null, in the wire format
    value: tuple[int, bool, bool]
    key_bytes: tuple[int, int]  # where the key's bytes begin in the record, and how many (-1: null)
    value_bytes: tuple[int, int]


def _scan_runs(records, count: int, keys: bool) -> BatchPrefixes | None:
    """The prefixes of a batch made of a few long runs of alike records (see the module docstring), or
    None: a record the layout reader declines, a run shorter than :data:`MIN_RUN` before the last, more
    than :data:`MAX_RUNS` runs, or records that do not fill the bytes exactly."""
    end = len(records)
    position = found = 0
    lengths: list[int] = []
    layouts: list[_Layout] = []
    starts: list[int] = []
    while found < count:
        if len(layouts) == MAX_RUNS:
            return None
        if not _starts_a_run(records, position, end, count - found):
            return None
        layout = _layout(records, position, end, keys)
        if layout is None:
            return None
        candidates = min((end - position) // layout.size, count - found)
        # Every numpy call costs about a µs (more on the broker, where they run cold), so: few of them.
        rows = np.ndarray((candidates, layout.size), np.uint8, records, position)
        alike = ((rows[:, layout.columns] & layout.mask) == layout.expected).all(axis=1)
        first_unlike = int(alike.argmin())  # row 0 is alike: it is the record the layout was read from
        run = first_unlike if first_unlike else candidates
        if run < MIN_RUN and found + run < count:
            return None
        lengths.append(run)
        layouts.append(layout)
        starts.append(position)
        position += run * layout.size
        found += run
    if position != end:
        return None
    return BatchPrefixes(_repeat([layout.key for layout in layouts], lengths) if keys else None,
                         _repeat([layout.value for layout in layouts], lengths),
                         tuple(zip(starts, lengths, layouts, strict=True)))


MAX_RUNS = 8


def _starts_a_run(records, position: int, end: int, left: int) -> bool:
    """Whether the next :data:`MIN_RUN` records (or all that are left) repeat the length varint of the one
    at ``position``: a few byte comparisons in Python, so that a batch whose sizes change from record to
    record goes to the general scan before any numpy call is spent on a run."""
    head = _length(records, position, end)
    if head is None:
        return False
    width, body = head
    size = width + body
    first = records[position:position + width]
    return all(records[at:at + width] == first
               for at in range(position + size, min(end, position + size * min(left, MIN_RUN)), size))


def _repeat(prefixes: list[tuple[int, bool, bool]], lengths: list[int]) -> Prefixes:
    """Per record, from per run: ``null`` and ``wire`` as one bool where every run agrees (the usual case)."""
    ids, nulls, wires = zip(*prefixes, strict=True)
    distinct = tuple({schema_id for schema_id, _, wire in prefixes if wire})
    if len(set(ids)) == 1:
        ids = np.full(sum(lengths), ids[0], np.uint32)
    else:
        ids = np.repeat(np.array(ids, np.uint32), lengths)
    null = nulls[0] if len(set(nulls)) == 1 else np.repeat(np.array(nulls), lengths)
    wire = wires[0] if len(set(wires)) == 1 else np.repeat(np.array(wires), lengths)
    return Prefixes(ids, null, wire, distinct)


def _layout(records, position: int, end: int, keys: bool) -> _Layout | None:
    """The layout of the record at ``position``, or None for one the general scan would decline too
    (varints over three bytes, headers, a length that disagrees with its fields, a negative offset delta),
    or whose fields before its value's prefix take more than :data:`LAYOUT_BYTES`. A client's batches
    repeat a few layouts, so they are kept by the bytes they were read from (:data:`_LAYOUTS`)."""
    head = _length(records, position, end)
    if head is None:
        return None
    length_bytes, body = head
    size = length_bytes + body
    if position + size > end:
        return None
    first = bytes(records[position:position + min(size, LAYOUT_BYTES)])
    key = (keys, size, records[position + size - 1], first)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _read_layout(first, size, length_bytes, records[position + size - 1], keys)
        if layout is None:
            return None
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        _LAYOUTS[key] = layout
    return layout


LAYOUT_BYTES = 64
MAX_LAYOUTS = 256
# (keys wanted, record size, its last byte, its first LAYOUT_BYTES bytes) -> the layout they make: a
# layout is read from nothing else, so equal keys make equal layouts.
_LAYOUTS: dict[tuple, _Layout] = {}


def _read_layout(first: bytes, size: int, length_bytes: int, last: int, keys: bool) -> _Layout | None:
    """:func:`_layout` from a record's first bytes (``first``), its size and its last byte."""
    columns = list(range(length_bytes))
    mask = [_EXACT] * length_bytes
    at = length_bytes + 1  # past the attributes byte, which no reader looks at
    for first_mask in (_CONTINUATION, _NON_NEGATIVE):  # the timestamp delta, then the offset delta
        width = _varint_bytes(first, at, len(first))
        if width is None:
            return None
        if first_mask == _NON_NEGATIVE and first[at] & 1:
            return None
        columns.extend(range(at, at + width))
        mask.extend([first_mask] + [_CONTINUATION] * (width - 1))
        at += width
    prefixes = []
    places = []
    for wanted in (keys, True):  # the key, then the value
        head = _length(first, at, len(first), signed=True)
        if head is None:
            return None
        width, part = head
        columns.extend(range(at, at + width))
        mask.extend([_EXACT] * width)
        at += width
        places.append((at, part))
        if part < 0:
            prefixes.append((0, True, False))
            continue
        if at + part >= size:  # the header count follows
            return None
        shown = min(part, 5)
        if at + shown > len(first):
            return None
        if wanted:
            columns.extend(range(at, at + shown))
            mask.extend([_EXACT] * shown)
        wire = part >= 5 and first[at] == 0
        schema_id = int.from_bytes(first[at + 1:at + 5], "big") if wire else 0
        prefixes.append((schema_id, False, wire))
        at += part
    if at + 1 != size or last != 0:  # no headers: the count is the last byte, 0
        return None
    columns.append(at)
    mask.append(_EXACT)
    record = first + bytes(max(0, size - len(first) - 1)) + bytes((last,))  # the columns lie in both ends
    expected = bytes(record[column] & bits for column, bits in zip(columns, mask, strict=True))
    return _Layout(size, np.array(columns, np.intp), np.array(mask, np.uint8), np.frombuffer(expected, np.uint8),
                   prefixes[0], prefixes[1], places[0], places[1])


def _varint_bytes(records, position: int, end: int) -> int | None:
    for index in range(MAX_VARINT_BYTES):
        if position + index >= end:
            return None
        if records[position + index] < 0x80:
            return index + 1
    return None


def _scan(records, end: int, count: int):
    """:func:`scan` over the first ``end`` bytes of ``records``; :data:`_NEAR_THE_END` when a window would
    run past the bytes there are."""
    data = np.frombuffer(records, np.uint8)
    bounds = _record_bounds(records, data, end, count)
    if bounds is None:
        return None
    starts, ends = bounds  # start: the attributes byte; end: one past the record's last byte
    # Every 4 bytes from each position as one integer, without a copy: a varint of up to three bytes (with
    # the byte after it) or a schema id is then one gather for all records.
    windows = len(records) - _WINDOW + 1
    if windows <= 0:
        return _NEAR_THE_END
    little = np.ndarray((windows,), "<u4", data, 0, (1,))
    big = np.ndarray((windows,), ">u4", data, 0, (1,))
    # Positions only grow from a record's start, so a gather past the windows is an IndexError (numpy
    # checks every index): cheaper than asking each array for its maximum first.
    try:
        at = starts + 1  # the timestamp delta
        varint = _varint(little[at])
        if varint is None:
            return None
        at += varint[1]
        length = _offset_delta_bytes(little[at], count)
        if length is None:
            return None
        at += length
        keys, at = _part(data, little, big, at)
        if keys is None:
            return None
        values, at = _part(data, little, big, at)
        if values is None:
            return None
    except IndexError:
        return _NEAR_THE_END
    # No headers: the header count is the record's last byte, and it is 0.
    if not ((at + 1 == ends).all() and not data.take(at).any()):
        return None
    return BatchPrefixes(keys, values)


def _record_bounds(records, data: np.ndarray, end: int, count: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Each record's first byte after its length varint, and its end; None unless exactly ``count``
    records of at most 3-byte length varints fill the first ``end`` bytes of ``records`` exactly."""
    pieces: list[np.ndarray] = []  # where each record begins (its length varint), in pieces
    found = 0
    position = 0
    while position < end and found < count:
        walked = _walk(records, position, end, count - found)
        if walked is None:
            return None
        begins, position = walked
        if begins:
            pieces.append(np.frombuffer(begins, np.int64))
            found += len(begins)
        if position >= end or found >= count:
            break
        # The walk stopped at records of one size in a row: test the rest of the run at once.
        head = _length(records, position, end)
        if head is None:
            return None
        size = head[0] + head[1]
        candidates = min((end - position) // size, count - found)
        if candidates:
            run = _run(data, position, size, head[0], candidates)
            pieces.append(np.arange(position, position + run * size, size, dtype=np.int64))
            position += run * size
            found += run
    if position != end or found != count:
        return None
    begins = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
    ends = np.empty_like(begins)
    ends[:-1] = begins[1:]
    ends[-1] = end
    # Every length varint was read above, and is one to three bytes: their sizes, all at once.
    first = data[begins] >= 0x80
    if not first.any():
        return begins + 1, ends
    second = data.take(begins + 1, mode="clip") >= 0x80
    second &= first
    return begins + 1 + first + second, ends


def _run(data: np.ndarray, position: int, size: int, length_bytes: int, candidates: int) -> int:
    """How many records of ``size`` bytes start at ``position`` one after the other: those whose length
    varint repeats the first one's bytes, up to the first that does not."""
    stop = position + candidates * size
    same = data[position:stop:size] == data[position]
    for offset in range(1, length_bytes):
        same &= data[position + offset:stop + offset:size] == data[position + offset]
    if same.all():
        return candidates
    return int(same.argmin())


def _length(records, position: int, end: int, signed: bool = False) -> tuple[int, int] | None:
    """(bytes of the varint, record length) at ``position``; None for a negative length (``signed``: one
    below -1, the null length) or a varint longer than three bytes."""
    raw = 0
    for index in range(3):
        if position + index >= end:
            return None
        byte = records[position + index]
        raw |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            if raw & 1:
                return (index + 1, -1) if signed and raw == 1 else None
            return index + 1, raw >> 1
    return None


def _walk(records, position: int, end: int, limit: int) -> tuple[array, int] | None:
    """Up to ``limit`` records from ``position`` in Python, stopping early after :data:`MIN_RUN` records
    of one size in a row: where each begins, and where the next one does. The one- and two-byte length
    varints are read inline."""
    begins = array("q")
    add = begins.append
    last, streak = -1, 0
    for _ in range(limit):
        if position >= end:
            break
        add(position)
        byte = records[position]
        if byte < 0x80 and not byte & 1:
            size = 1 + (byte >> 1)
        elif byte & 0x81 == 0x80 and position + 1 < end and records[position + 1] < 0x80:
            size = 2 + (((byte & 0x7F) | (records[position + 1] << 7)) >> 1)
        else:
            head = _length(records, position, end)
            if head is None:
                return None
            size = head[0] + head[1]
        position += size
        if size == last:
            streak += 1
            if streak == MIN_RUN:
                break
        else:
            last, streak = size, 1
    if position > end:
        return None
    return begins, position


def _offset_delta_bytes(window: np.ndarray, count: int) -> np.ndarray | int | None:
    """The byte count of each record's offset delta varint: read against the deltas a client writes (0,
    1, 2, ... in order), which is one comparison for the whole batch, else decoded."""
    if count <= MAX_THREE_BYTE_OFFSET_DELTA:
        encoded = _offset_deltas(count)
        if ((window & encoded.mask) == encoded.bytes).all():
            return encoded.size
    varint = _varint(window)
    if varint is None or (varint[0] & 1).any():  # zigzag: a negative delta, which the decode refuses
        return None
    return varint[1]


class _Encoded(NamedTuple):
    bytes: np.ndarray  # the varint of 0, 1, 2, ... as little-endian integers
    mask: np.ndarray  # its bytes: 0xFF, 0xFFFF or 0xFFFFFF
    size: np.ndarray  # its byte count


_OFFSET_DELTAS: dict[int, _Encoded] = {}


def _offset_deltas(count: int) -> _Encoded:
    cached = _OFFSET_DELTAS.get(count)
    if cached is not None:
        return cached
    zigzag = np.arange(count, dtype=np.uint32) * 2
    size = np.where(zigzag < 0x80, 1, np.where(zigzag < 0x4000, 2, 3)).astype(np.int64)
    groups = [zigzag & 0x7F, (zigzag >> 7) & 0x7F, (zigzag >> 14) & 0x7F]
    encoded = (groups[0] | np.where(size > 1, 0x80, 0) | (groups[1] << 8) | np.where(size > 2, 0x8000, 0)
               | (groups[2] << 16)).astype(np.uint32)
    mask = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)[size]
    if len(_OFFSET_DELTAS) > 64:  # batches of many different counts: keep the memory bounded
        _OFFSET_DELTAS.clear()
    _OFFSET_DELTAS[count] = cached = _Encoded(encoded, mask, size)
    return cached


# A little-endian window's three continuation bits (bit 0: its first byte's, ...) -> the varint's byte
# count (0: longer than three bytes), and the mask of its 7-bit groups once they are packed together.
_SIZES = np.array([1, 2, 1, 3, 1, 2, 1, 0], dtype=np.int64)
_MASKS = np.array([0x7F, 0x3FFF, 0x7F, 0x1FFFFF, 0x7F, 0x3FFF, 0x7F, 0], dtype=np.uint32)


def _varint(window: np.ndarray) -> tuple[np.ndarray, np.ndarray | int] | None:
    """The unsigned varint of up to three bytes that starts each little-endian window: its raw value
    (zigzag still applied) and its byte count, one for all when they agree (the usual case); None when
    one is longer than three bytes."""
    if not (window & 0x80).any():
        return window & 0x7F, 1
    if ((window & 0x8080) == 0x80).all():
        return (window & 0x7F) | ((window >> 1) & 0x3F80), 2
    code = ((window >> 7) & 1) | ((window >> 14) & 2) | ((window >> 21) & 4)
    size = _SIZES[code]
    if not size.all():
        return None
    packed = (window & 0x7F) | ((window >> 1) & 0x3F80) | ((window >> 2) & 0x1FC000)
    return packed & _MASKS[code], size


def _part(data: np.ndarray, little: np.ndarray, big: np.ndarray, at: np.ndarray):
    """A key or value at each position (its zigzag varint length, then its bytes): its prefix, and the
    position after it. None when a length is below -1 or takes more than three bytes; IndexError when a
    window would run past the bytes there are."""
    if (data[at] == 1).all():  # every one null (zigzag -1): keys, mostly
        return ALL_NULL, at + 1
    varint = _varint(little[at])
    if varint is None:
        return None, at
    raw, size = varint
    at = at + size
    odd = (raw & 1) != 0
    has_null = odd.any()
    if has_null:
        null = raw == 1
        if (odd != null).any():  # zigzag: a length below -1
            return None, at
    length = (raw >> 1).astype(np.int64)
    if has_null:
        length[null] = 0
    wire = (length >= 5) & (data[at] == 0)
    return Prefixes(big[at + 1], null if has_null else False, wire, None, (at, length)), at + length


# Every part null: nothing to check, whatever the strategy.
ALL_NULL = Prefixes(np.zeros(0, dtype=np.uint32), True, np.zeros(0, dtype=bool))
