"""The registry's errors as clients parse them: an HTTP status and a JSON body
``{"error_code": 40401, "message": "..."}``. The numbers are Confluent Schema Registry's, which its clients
(confluent-kafka's ``SchemaRegistryClient``, the Java serializers) read; never renumber them."""

from __future__ import annotations

# 401/403: who the caller is and what it may do
UNAUTHORIZED = 40101
FORBIDDEN = 40301
# 404: what was asked for does not exist (or is soft-deleted and the request did not ask for deleted ones)
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMA_VERSION_SOFT_DELETED = 40406
SCHEMA_VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
# 409: the schema breaks the subject's compatibility rule
INCOMPATIBLE_SCHEMA = 409
# 422: the request itself is wrong
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_CONFLICT = 42207
INVALID_SUBJECT = 42208
# 500: the registry's side
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004



def http_status(error_code: int) -> int:
    return error_code if error_code < 1000 else error_code // 100


class RegistryError(Exception):
    """A refusal with the registry's error code; the HTTP layer turns it into the status and body."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def status(self) -> int:
        return http_status(self.error_code)

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}

    def __repr__(self) -> str:
        return f"RegistryError({self.error_code}, {self.message!r})"


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found for subject '{subject}'.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(SCHEMA_NOT_FOUND, detail)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(INVALID_SCHEMA, f"Invalid schema: {detail}")
