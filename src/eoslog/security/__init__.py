"""Authorization: ACLs with Kafka's semantics (docs/security.md, "Authorization (ACLs)")."""
