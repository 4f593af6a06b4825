package billing_test

// Planted: a module's test drives the relay itself.
import _ "example.com/fake/platform/outbox/relay"
