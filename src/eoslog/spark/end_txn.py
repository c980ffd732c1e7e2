"""EndTxn for a transaction another process opened: the sink's fallback when the broker lacks
transaction groups (``requireExactlyOnce=false``).

Kafka's coordinator checks only (transactional_id, producer_id, producer_epoch), so the driver can end
a task's transaction with the identity the task reported. A commit retried after a lost answer gets
NONE (CompleteCommit already), so retrying is safe.
"""

from __future__ import annotations

import time

from eoslog.client.txn_groups import TxnGroupClient, TxnGroupError, TxnMember
from eoslog.protocol import messages
from eoslog.protocol.errors import ErrorCode

END_TXN = 26
END_TXN_VERSION = 2  # non-flexible; PRODUCER_FENCED appears from v2 on
_RETRIABLE = {ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR,
              ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}


def end_transaction(bootstrap: str, member: TxnMember, commit: bool, timeout_s: float = 60.0,
                    security=None) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        with TxnGroupClient(bootstrap, timeout_s, security=security) as client:
            conn = client._coordinator(member.transactional_id)
            response = conn.request(END_TXN, END_TXN_VERSION, messages.EndTxnRequest(
                transactional_id=member.transactional_id, producer_id=member.producer_id,
                producer_epoch=member.producer_epoch, committed=commit))
        code = response.error_code
        if code == 0:
            return
        if code not in _RETRIABLE or time.monotonic() + delay > deadline:
            raise TxnGroupError(f"EndTxn({'commit' if commit else 'abort'}) of {member.transactional_id}", code)
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
