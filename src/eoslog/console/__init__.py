"""The web console (issue 18): topics, consumer groups and transactions of any Kafka-compatible cluster
in a browser, served by ``eoslog console --bootstrap HOST:PORT`` or by a broker itself
(``eoslog serve --console-listen HOST:PORT``, wired in ``eoslog.server.console``).

Parts, top to bottom: ``cli`` (the command), ``server`` (uvicorn on a socket we bind), ``app`` (Starlette
routes rendering Jinja2 templates, htmx polling fragments), ``views`` (blocking calls of the admin tools in
``eoslog.tools``, run in worker threads), ``actions`` (the write actions, only with ``--allow-writes``:
aborting transactions, resetting a group's offsets, deleting records), ``history`` (the charts' samples,
bounded) and ``records_view`` (the pure core that marks records of aborted and open transactions on a page).
Nothing here is imported by ``eoslog serve`` unless its console is configured.
"""
