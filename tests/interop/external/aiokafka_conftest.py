# ruff: noqa: F821 -- a fragment: pytest, os and the fixtures it uses are the host conftest's names
# Appended to aiokafka's own tests/conftest.py by tests/interop/external/run_suites.py (issue 41): the
# suite's fixtures start Kafka in Docker (the `kafka_server` fixture, ACLs and SCRAM users through
# `docker exec`); these definitions, later in the same module, replace them with an eoslog broker already
# running at EOSLOG_BOOTSTRAP. The Docker-only parts (Kerberos, kafka-acls.sh, kafka-configs.sh inside
# the container) are deselected by the runner rather than faked. Not collected by eoslog's own suite.
import os as _eoslog_os

if _eoslog_os.environ.get("EOSLOG_BOOTSTRAP"):
    _eoslog_host, _eoslog_port = _eoslog_os.environ["EOSLOG_BOOTSTRAP"].rsplit(":", 1)

    @pytest.fixture(scope="session")
    def docker(request):
        yield None

    @pytest.fixture(scope="session")
    def kafka_image(request):
        return request.config.getoption("--docker-image")

    @pytest.fixture(scope="session")
    def ssl_folder():
        return pathlib.Path(_eoslog_os.environ.get("EOSLOG_SSL_FOLDER", "tests/ssl_cert"))

    @pytest.fixture(scope="session")
    def kafka_server(kafka_image):
        return KafkaServer(_eoslog_host, int(_eoslog_port),
                           int(_eoslog_os.environ.get("EOSLOG_SSL_PORT", "0")),
                           int(_eoslog_os.environ.get("EOSLOG_SASL_PLAIN_PORT", "0")),
                           int(_eoslog_os.environ.get("EOSLOG_SASL_SSL_PORT", "0")), None)

    @pytest.fixture(scope="class")
    def kerberos_utils(kafka_server):
        return None
