package conformance_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The verdict at commit time: each consumer runs without --crash; only
// the order of its write and its commit differs.

// TestVerifyFailsACommitBeforeItsEffect: a consumer that commits what it
// polled, then writes, fails in every run, naming a record.
func TestVerifyFailsACommitBeforeItsEffect(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "-commit first")
	cfg.Scenarios = named(t, "duplicates")
	stdout, _, failed := verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL duplicates: .*purchase [AB]'s Active \(version 1\) \(partition \d, offset \d+\) was committed before its effect was visible`, stdout)
}

// TestVerifyFailsTimerCommitsOfWhatWasPolled: librdkafka's default, offsets
// stored when polled and committed on a timer, with a slow write: a timer
// commit lands during a write of the steady stream.
func TestVerifyFailsTimerCommitsOfWhatWasPolled(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "-commit polled -write-delay 150ms")
	cfg.Scenarios = named(t, "steady-stream")
	stdout, _, failed := verifyRun(t, cfg)
	require.True(t, failed)
	require.Regexp(t, `^FAIL steady-stream: purchase [A-Z]+'s Active \(version 1\) \(partition \d, offset \d+\) was committed before its effect was visible`, stdout)
}

// TestVerifyPassesTimerCommitsOfWhatWasWritten: librdkafka's correct
// recipe, each offset stored once its record is written and committed on a
// timer, passes with the same slow write.
func TestVerifyPassesTimerCommitsOfWhatWasWritten(t *testing.T) {
	t.Parallel()
	cfg := reference(t, "-commit stored -write-delay 150ms")
	cfg.Scenarios = named(t, "duplicates", "steady-stream", "hostile-records")
	stdout, stderr, failed := verifyRun(t, cfg)
	require.False(t, failed, stderr)
	require.Equal(t, "PASS duplicates\nPASS steady-stream\nPASS hostile-records\n", stdout)
}
