"""eoslog and what it runs with, started on this machine as child processes: ``eoslog serve``
(process.py), Debian's ZooKeeper (zookeeper.py), a cluster of both (cluster.py), a fault-injecting proxy
(faultproxy.py) and a standalone Spark cluster (spark_standalone.py).

``eoslog cluster up``, ``verify`` and ``pipeline`` start what they need with these, so no command imports
the test harness; eoslog.testing re-exports them for tests. None imports server/: the web console, which
the broker serves, uses tools/ (a broker in this process is server/embedded.py).
"""
