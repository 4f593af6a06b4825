// Package outboxtest is test support that runs the relay for a module's tests.
package outboxtest

import _ "example.com/fake/platform/outbox/relay"
