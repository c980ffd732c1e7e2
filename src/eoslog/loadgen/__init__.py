"""`eoslog bench`: the load generator (bench.py), what a run measured (report.py), its plot (plot.py) and
the in-memory brokers it compares with (targets.py)."""
