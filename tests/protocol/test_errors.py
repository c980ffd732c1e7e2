"""Wire error codes keep Kafka's numbers; exceptions carry them."""

from __future__ import annotations

import pytest

from eoslog.protocol import errors
from eoslog.protocol.errors import ErrorCode, KafkaError, error_for_code

# Spot checks of numbers clients depend on (Kafka's Errors.java).
KNOWN = {
    "UNKNOWN_SERVER_ERROR": -1, "NONE": 0, "OFFSET_OUT_OF_RANGE": 1, "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3, "NOT_LEADER_OR_FOLLOWER": 6, "MESSAGE_TOO_LARGE": 10,
    "NOT_COORDINATOR": 16, "INVALID_TOPIC_EXCEPTION": 17, "REBALANCE_IN_PROGRESS": 27,
    "UNSUPPORTED_VERSION": 35, "INVALID_REQUEST": 42, "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46, "INVALID_PRODUCER_EPOCH": 47, "INVALID_TXN_STATE": 48,
    "INVALID_PRODUCER_ID_MAPPING": 49, "CONCURRENT_TRANSACTIONS": 51, "UNKNOWN_PRODUCER_ID": 59,
    "FENCED_LEADER_EPOCH": 74, "MEMBER_ID_REQUIRED": 79, "FENCED_INSTANCE_ID": 82,
    "UNSTABLE_OFFSET_COMMIT": 88, "PRODUCER_FENCED": 90, "UNKNOWN_TOPIC_ID": 100,
    "TRANSACTIONAL_ID_NOT_FOUND": 105, "TRANSACTION_ABORTABLE": 120, "VOTER_NOT_FOUND": 127,
}


def test_numbers_are_kafkas():
    for name, number in KNOWN.items():
        assert ErrorCode[name] == number


# Kafka 4.x's codes above kafka-python 3.0's table: (number, retriable) as in Kafka's Errors.java and
# the exception class each maps to (InvalidRegularExpression is a plain, not retriable, ApiException).
KAFKA_4 = {"INVALID_REGULAR_EXPRESSION": (128, False), "REBOOTSTRAP_REQUIRED": (129, False),
           "STREAMS_INVALID_TOPOLOGY": (130, False), "STREAMS_INVALID_TOPOLOGY_EPOCH": (131, False),
           "STREAMS_TOPOLOGY_FENCED": (132, False),
           # ShareSessionLimitReachedException is a RetriableException.
           "SHARE_SESSION_LIMIT_REACHED": (133, True)}


def test_codes_are_contiguous_and_unique():
    values = [int(c) for c in ErrorCode]
    assert len(values) == len(set(values))
    assert sorted(v for v in values if v < 128) == list(range(-1, 128))
    assert sorted(v for v in values if v >= 128) == list(range(128, 128 + len(KAFKA_4)))


def test_kafka_4_codes_are_kafkas_and_listed_in_one_place():
    assert {c.name: (int(c), c.retriable) for c in errors.KAFKA_4_CODES} == KAFKA_4
    assert {c for c in ErrorCode if c >= 128} == errors.KAFKA_4_CODES
    assert error_for_code(128).__name__ == "InvalidRegularExpressionError"


def test_agrees_with_kafka_python_numbers_and_retriable_flags():
    import kafka.errors as kp
    theirs = {c.errno: c for c in vars(kp).values()
              if isinstance(c, type) and issubclass(c, kp.BrokerResponseError) and c.errno is not None}
    known = [c for c in ErrorCode if c not in errors.KAFKA_4_CODES]
    for code in known:
        assert code in theirs, code
    # Where we differ from kafka-python we follow Kafka's Java client (CorruptRecordException is retriable).
    differ = {c for c in known if c.retriable != theirs[c].retriable}
    assert differ == {ErrorCode.CORRUPT_MESSAGE}
    # Kafka 4.x's codes are beyond its table; should a newer kafka-python know one, it must agree.
    for code in errors.KAFKA_4_CODES:
        assert code not in theirs or theirs[code].retriable == code.retriable, code


def test_retriable_flags_and_descriptions():
    assert ErrorCode.NOT_COORDINATOR.retriable and ErrorCode.CONCURRENT_TRANSACTIONS.retriable
    assert not ErrorCode.PRODUCER_FENCED.retriable and not ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER.retriable
    assert all(c.description and len(c.description) < 100 for c in ErrorCode)


@pytest.mark.parametrize("cls,code", [
    (errors.OffsetOutOfRangeError, 1), (errors.InvalidTopicError, 17), (errors.MessageTooLargeError, 10),
    (errors.CorruptMessageError, 2), (errors.NotCoordinatorError, 16), (errors.InvalidProducerEpochError, 47),
    (errors.OutOfOrderSequenceError, 45), (errors.UnknownProducerIdError, 59), (errors.ProducerFencedError, 90),
    (errors.InvalidTxnStateError, 48), (errors.ConcurrentTransactionsError, 51),
])
def test_named_exceptions(cls, code):
    assert issubclass(cls, KafkaError) and cls.code == code
    assert error_for_code(code) is cls
    error = cls("partition t-0")
    assert str(error) == f"{ErrorCode(code).name}: partition t-0"
    assert error.retriable == ErrorCode(code).retriable


def test_error_for_code_generates_the_rest_and_caches_them():
    cls = error_for_code(44)
    assert cls.__name__ == "PolicyViolationError" and cls.code == ErrorCode.POLICY_VIOLATION
    assert error_for_code(44) is cls
    assert issubclass(cls, KafkaError)
    assert str(cls()) == "POLICY_VIOLATION: The request breaks a configured policy."
    assert error_for_code(9999) is errors.UnknownServerError


def test_codec_errors_are_wire_errors():
    assert issubclass(errors.InvalidRequest, ValueError)
    assert issubclass(errors.InvalidRequest, errors.InvalidRequestError)
    assert errors.UnknownApiKey(77, 0, 1).code == ErrorCode.INVALID_REQUEST
    error = errors.UnsupportedVersion(18, 9)
    assert error.code == ErrorCode.UNSUPPORTED_VERSION and error.header is None
    assert isinstance(error, errors.UnsupportedVersionError)
