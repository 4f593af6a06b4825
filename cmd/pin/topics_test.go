package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServeRefusesTopicsNoCommandDeclares: a module on the host whose topic
// is missing from the list's topics would be relayed with no outbox table
// and no Kafka topic made for it; serve refuses it at start.
func TestServeRefusesTopicsNoCommandDeclares(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkDeclaredTopics(declaredTopics()))
	err := checkDeclaredTopics(append(declaredTopics(), "pin.other.thing.v1"))
	require.ErrorContains(t, err, "pin.other.thing.v1")
	require.ErrorContains(t, err, "declaredTopics")
	require.Error(t, checkDeclaredTopics(nil))
}
