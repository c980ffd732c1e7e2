r"""Options of a JAAS line, the way Kafka configurations carry SASL logins:

    org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cret";

Only what eoslog needs: a quoted option's value by name, ``\"`` and ``\\`` unescaped as Kafka's parser
(Java's StreamTokenizer) does. The module name and the control flag are not checked: PLAIN and SCRAM
logins both carry username and password.
"""

from __future__ import annotations

import re


def jaas_option(jaas: str, name: str) -> str | None:
    match = re.search(rf'\b{re.escape(name)}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas)
    return re.sub(r"\\(.)", r"\1", match.group(1)) if match else None
