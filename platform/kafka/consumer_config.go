package kafka

import (
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// The consumer group's timeouts (docs/adr/0020-consumer-group-after-crashes.md).
const (
	// GroupSessionTimeout is how long the coordinator keeps a member that
	// stopped heartbeating: a killed consumer's member is gone after it.
	GroupSessionTimeout = 10 * time.Second
	// GroupRebalanceTimeout is how long a rebalance waits for the members to
	// join again, and how long a member has to finish the batch in flight.
	GroupRebalanceTimeout = 20 * time.Second
	// groupReadTimeout outlasts the longest answer the coordinator may hold
	// back: a JoinGroup waits up to the rebalance timeout, and Sarama reads
	// it under Net.ReadTimeout like any other response. The 5 s margin is
	// the Java client's (rebalance.timeout.ms + 5 s for a JoinGroup).
	groupReadTimeout = GroupRebalanceTimeout + 5*time.Second
)

// ConsumerConfig returns the Sarama configuration of a consumer-group
// subscriber (platform/consumer):
//
//   - Version 2.3: JoinGroup v5, where the coordinator names the member
//     before it waits (KIP-394), so a member whose join fails can leave;
//   - a new group starts at the oldest offset, so a new projection is built
//     from the whole topic, not only from what arrives after it started;
//   - marked offsets are committed every second: a consumer marks a record
//     only after its database transaction committed, so a crash re-delivers
//     at most the last second, which the inbox then skips;
//   - the group timeouts above, with a read timeout longer than a join may
//     wait (CheckGroupTimeouts);
//   - consumer errors are returned, so the subscriber logs them.
func ConsumerConfig(clientID string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = clientID
	c.Version = sarama.V2_3_0_0
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = true
	c.Consumer.Offsets.AutoCommit.Interval = time.Second
	setNetworkDefaults(c)
	c.Consumer.Group.Session.Timeout = GroupSessionTimeout
	c.Consumer.Group.Heartbeat.Interval = GroupSessionTimeout / 3
	c.Consumer.Group.Rebalance.Timeout = GroupRebalanceTimeout
	c.Net.ReadTimeout = groupReadTimeout
	return c
}

// CheckGroupTimeouts refuses a consumer-group configuration under which the
// client can cut off a join the coordinator still holds: the coordinator
// keeps the abandoned member, and every retry adds one more. Sarama reads a
// JoinGroup or SyncGroup answer under Net.ReadTimeout, which must therefore
// exceed the rebalance and the session timeout.
func CheckGroupTimeouts(c *sarama.Config) error {
	g := c.Consumer.Group
	if c.Net.ReadTimeout <= g.Rebalance.Timeout || c.Net.ReadTimeout <= g.Session.Timeout {
		return fmt.Errorf("kafka: Net.ReadTimeout %s must exceed Consumer.Group.Rebalance.Timeout %s and Session.Timeout %s: a join waits up to them",
			c.Net.ReadTimeout, g.Rebalance.Timeout, g.Session.Timeout)
	}
	return nil
}

// StaticMember makes the consumer of c a static member of its group
// (KIP-345) named instance: a process restarted under the same name takes
// its predecessor's place at once, fencing it, instead of waiting beside it
// for its session to time out. Two live processes must never share a name
// (they would fence each other in turn); an empty instance keeps c dynamic.
func StaticMember(c *sarama.Config, instance string) {
	c.Consumer.Group.InstanceId = instance
}

// LeaveStatic takes the static member instance out of group, as a clean stop
// should: Sarama's Close leaves a static member in (KIP-345), which would
// keep its partitions from the others, and the group from being deleted, for
// a session timeout. c is the consumer's configuration (brokers, security).
func LeaveStatic(brokers []string, c *sarama.Config, group, instance string) error {
	leave := *c
	leave.Version = sarama.V2_4_0_0 // LeaveGroup v3 names members by instance
	client, err := sarama.NewClient(brokers, &leave)
	if err != nil {
		return fmt.Errorf("kafka: leave group %s: %w", group, err)
	}
	defer func() { _ = client.Close() }()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("kafka: leave group %s: %w", group, err)
	}
	resp, err := coordinator.LeaveGroup(&sarama.LeaveGroupRequest{Version: 3, GroupId: group,
		Members: []sarama.MemberIdentity{{GroupInstanceId: &instance}}})
	if err != nil {
		return fmt.Errorf("kafka: leave group %s: %w", group, err)
	}
	for _, m := range resp.Members {
		if !errors.Is(m.Err, sarama.ErrNoError) && !errors.Is(m.Err, sarama.ErrUnknownMemberId) {
			return fmt.Errorf("kafka: leave group %s as %s: %w", group, instance, m.Err)
		}
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return fmt.Errorf("kafka: leave group %s: %w", group, resp.Err)
	}
	return nil
}

// setNetworkDefaults sets what producer and consumer share: short dial and
// metadata retries, so an unreachable broker is reported within seconds, and
// metadata of the topics in use only, not the whole cluster's.
func setNetworkDefaults(c *sarama.Config) {
	c.Net.DialTimeout = 3 * time.Second
	c.Net.ReadTimeout = 10 * time.Second
	c.Net.WriteTimeout = 10 * time.Second
	c.Metadata.Retry.Max = 2
	c.Metadata.Retry.Backoff = 250 * time.Millisecond
	c.Metadata.Full = false
}
