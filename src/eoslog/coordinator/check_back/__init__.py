"""Check-back transactions (eoslog's extension after RocketMQ's transaction check-back; docs/transactions.md,
"Check-back transactions"): a transaction past its timeout is asked about, its producer group answers.
The decisions are the transaction core's (coordinator/transaction/decisions.py: the Checking state);
``extension`` carries out BeginCheckBack / PollCheckBack / AnswerCheckBack over the transaction
coordinator's engine interface, ``metrics`` counts them."""
