package consumer_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/testbed"
)

// TestMemberWhoseJoinFailsLeavesTheGroup holds the join that waits for the
// rebalance past the runner's read timeout, as a coordinator waiting for a
// killed member does: Run fails, and the member it was has left the group
// by the time the coordinator answers that join, so no member is left
// behind that nothing ever removes (docs/adr/0020-consumer-group-after-crashes.md).
func TestMemberWhoseJoinFailsLeavesTheGroup(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	defer cluster.Close()
	held, answered := make(chan struct{}), make(chan struct{})
	var holding atomic.Bool
	cluster.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		join := req.(*kmsg.JoinGroupRequest)
		if join.Version >= 4 && join.MemberID == "" {
			cluster.KeepControl() // KIP-394's first round trip is answered at once
			return nil, nil, false
		}
		if holding.CompareAndSwap(false, true) {
			cluster.SleepControl(func() { <-held })
			defer close(answered)
		}
		return nil, nil, false
	})

	cfg := kafka.ConsumerConfig("join-test")
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second // kfake's least
	cfg.Consumer.Group.Heartbeat.Interval = 2 * time.Second
	cfg.Consumer.Group.Rebalance.Timeout = time.Second
	cfg.Net.ReadTimeout = 7 * time.Second
	db := testbed.NewDatabase(t)
	r, err := consumer.NewRunner(db.Gorm, consumer.Config{Name: "join-test", Topic: topic, Brokers: cluster.ListenAddrs(), Sarama: cfg},
		flakyHandler{}, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	require.NoError(t, err)

	runErr := make(chan error, 1)
	go func() { runErr <- r.Run(context.Background()) }()
	select {
	case err := <-runErr:
		require.ErrorContains(t, err, "i/o timeout", "the held join is cut off by the read timeout")
	case <-time.After(testbed.ForwardDeadline):
		t.Fatal("Run did not fail while its join was held")
	}
	close(held)
	<-answered

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	groups, err := kadm.NewClient(cl).DescribeGroups(context.Background(), "join-test")
	require.NoError(t, err)
	require.Empty(t, groups["join-test"].Members, "group state %s", groups["join-test"].State)
}
