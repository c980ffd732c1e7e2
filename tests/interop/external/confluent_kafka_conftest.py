# ruff: noqa: F821 -- a fragment: pytest, os and the fixtures it uses are the host conftest's names
# Appended to confluent-kafka-python's tests/integration/conftest.py by tests/interop/external/run_suites.py
# (issue 41). The suite takes an external cluster for its plain fixture (BROKERS, its own ByoFixture) but
# starts its SASL cluster with trivup; this makes that one external too: EOSLOG_SASL_BROKERS names an
# eoslog SASL_PLAINTEXT listener with PLAIN, user sasl_user (password sasl_user), as trivup's is set up.
# Not collected by eoslog's own suite.
if os.environ.get("EOSLOG_SASL_BROKERS"):

    @pytest.fixture(scope="session")
    def sasl_cluster(request):
        cluster = create_byo_cluster({
            "bootstrap.servers": os.environ["EOSLOG_SASL_BROKERS"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "sasl_user", "sasl.password": "sasl_user"})
        yield cluster
        cluster.stop()
