"""eoslog and what it runs with, started on this machine: a broker in this process (embedded.py),
``eoslog serve`` as a child process (process.py), Debian's ZooKeeper (zookeeper.py), a cluster of both
(cluster.py), a fault-injecting proxy (faultproxy.py) and a standalone Spark cluster (spark_standalone.py).

``eoslog cluster up``, ``bench``, ``demo``, ``verify`` and ``pipeline`` start what they need with these, so
no command imports the test harness; eoslog.testing re-exports them for tests.
"""
