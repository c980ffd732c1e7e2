"""Hypothesis strategies shared by the record format tests."""

from hypothesis import strategies as st

from eoslog.records import CompressionType, Record, SimpleRecord

INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

optional_bytes = st.one_of(st.none(), st.just(b""), st.binary(max_size=64))
header_names = st.text(max_size=12)  # any Unicode, including non-ASCII and empty
headers = st.lists(st.tuples(header_names, optional_bytes), max_size=4).map(tuple)
timestamps = st.integers(0, 2**45)
compressions = st.sampled_from(list(CompressionType))


@st.composite
def simple_records(draw, max_size=12):
    return draw(
        st.lists(
            st.builds(
                SimpleRecord, optional_bytes, optional_bytes, headers, st.one_of(st.none(), timestamps)
            ),
            max_size=max_size,
        )
    )


@st.composite
def delta_records(draw, max_size=12):
    """Records with explicit, strictly increasing (possibly gapped) offset deltas."""
    gaps = draw(st.lists(st.integers(1, 1000), max_size=max_size))
    offset_delta = -1
    records = []
    for gap in gaps:
        offset_delta += gap
        records.append(
            Record(
                offset_delta,
                draw(st.integers(-(2**40), 2**40)),
                draw(optional_bytes),
                draw(optional_bytes),
                draw(headers),
            )
        )
    return records


@st.composite
def producer_fields(draw):
    if draw(st.booleans()):
        return {"producer_id": -1, "producer_epoch": -1, "base_sequence": -1, "is_transactional": False}
    return {
        "producer_id": draw(st.integers(0, 2**63 - 1)),
        "producer_epoch": draw(st.integers(0, 2**15 - 1)),
        "base_sequence": draw(st.integers(0, 2**31 - 1)),
        "is_transactional": draw(st.booleans()),
    }
