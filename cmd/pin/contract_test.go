package main_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractVerifyUsage: help exits 0, a missing flag 2, an unknown
// scenario 1 naming the scenarios.
func TestContractVerifyUsage(t *testing.T) {
	t.Parallel()
	stdout, _, code := run(t, nil, "contract", "verify", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "Usage: pin contract verify --consumer CMD --effects CMD")
	_, stderr, code := run(t, nil, "contract", "verify", "--consumer", "true")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--consumer and --effects are required")
	_, stderr, code = run(t, nil, "contract", "verify", "--consumer", "true", "--effects", "true", "--scenario", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no scenario "nope" (the scenarios: duplicates, `)
	_, _, code = run(t, nil, "contract", "check")
	require.Equal(t, 2, code)
}
