package billing

// Allowed: the relay through the outbox's test support.
import _ "example.com/fake/platform/outbox/outboxtest"
