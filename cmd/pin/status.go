package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/consumer"
	"github.com/pinmarket/pin/platform/kafka"
	"github.com/pinmarket/pin/platform/outbox/relay"
	"github.com/pinmarket/pin/platform/postgres"
)

// moduleStatus is what `pin status --json` prints: the modules' state on one
// screen (docs/adr/0017-operators-never-stuck.md). Each module's section
// is a key of its own (MarshalJSON).
type moduleStatus struct {
	AsOf      time.Time           `json:"asOf"`
	Sections  []sectionStatus     `json:"-"`
	Outbox    []relay.TopicStatus `json:"outbox"`
	Consumers []consumerStatus    `json:"consumers"`
}

// sectionStatus is a module's section as it was read.
type sectionStatus struct {
	*statusSection
	value any
}

// MarshalJSON writes asOf, then each module's section under its key, then
// outbox and consumers.
func (s moduleStatus) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	field := func(key string, v any) error {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		val, err := json.Marshal(v)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		return err
	}
	err := field("asOf", s.AsOf)
	for _, sec := range s.Sections {
		err = errors.Join(err, field(sec.key, sec.value))
	}
	err = errors.Join(err, field("outbox", s.Outbox), field("consumers", s.Consumers))
	return append(append([]byte{'{'}, b.Bytes()...), '}'), err
}

// consumerStatus is a consumer's state: the database's, and its lag, which
// only the broker knows.
type consumerStatus struct {
	consumer.GroupStatus
	// Lag is the records of the module's topics the group has not
	// committed; null when the broker was not asked or did not answer.
	Lag *int64 `json:"lag"`
	// LagUnknown says why Lag is null.
	LagUnknown string `json:"lagUnknown,omitempty"`
	// OldestWaitingAt is when the oldest record the group has still to take
	// was written; null when none waits or the broker was not asked.
	OldestWaitingAt *time.Time `json:"oldestWaitingAt"`
	// NotConsuming: records wait and none is taken (GroupStatus.NotConsuming).
	NotConsuming bool `json:"notConsuming"`
}

// status runs `pin status [--json]`. It needs only PIN_DATABASE_URL; with
// PIN_KAFKA_BROKERS it also asks the broker for the consumers' lag.
func status(ctx context.Context, args, environ []string, stdout io.Writer) error {
	fs := cli.NewFlags("status")
	asJSON := fs.Bool("json", false, "print one JSON object (for scripts) instead of the text")
	if err := cli.ParseFlags(fs, "status [--json]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("status: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return err
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	s, err := readStatus(ctx, db, cfg)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(s)
	}
	return printStatus(stdout, s)
}

// readStatus gathers each part from its owner: the module, the outbox, the
// consumer kit, all from one snapshot of the database so that they agree
// (a backlog of 0 never comes with an oldest unsent row), and, when it is
// configured, the broker.
func readStatus(ctx context.Context, db *sql.DB, cfg config.Config) (moduleStatus, error) {
	s := moduleStatus{AsOf: time.Now().UTC(), Outbox: []relay.TopicStatus{}, Consumers: []consumerStatus{}}
	var consumed []consumedTopics
	var groups []consumer.GroupStatus
	err := postgres.InSnapshot(ctx, db, func(q postgres.Querier) error {
		for _, m := range modules() {
			consumed = append(consumed, m.consumes...)
			if m.status == nil {
				continue
			}
			v, err := m.status.read(ctx, q)
			if err != nil {
				return err
			}
			s.Sections = append(s.Sections, sectionStatus{statusSection: m.status, value: v})
		}
		for _, topic := range declaredTopics() {
			t, err := relay.ReadStatus(ctx, q, topic)
			if err != nil {
				return err
			}
			s.Outbox = append(s.Outbox, t)
		}
		names := make([]string, len(consumed))
		for i, c := range consumed {
			names[i] = c.group
		}
		var err error
		groups, err = consumer.ReadStatus(ctx, q, names)
		return err
	})
	if err != nil {
		return s, err
	}
	for _, g := range groups {
		c := consumerStatus{GroupStatus: g}
		if len(cfg.KafkaBrokers) == 0 {
			c.LagUnknown = "PIN_KAFKA_BROKERS is not set"
		} else {
			var lag int64
			for _, topic := range topicsOf(consumed, g.Group) {
				b, err := kafka.GroupBacklog(cfg.KafkaBrokers, kafkaSecurity(cfg), g.Group, topic)
				if err != nil {
					c.LagUnknown = err.Error()
					break
				}
				lag += b.Lag
				if b.OldestWaitingAt != nil && (c.OldestWaitingAt == nil || b.OldestWaitingAt.Before(*c.OldestWaitingAt)) {
					c.OldestWaitingAt = b.OldestWaitingAt
				}
			}
			if c.LagUnknown == "" {
				c.Lag = &lag
				c.NotConsuming = g.NotConsuming(c.OldestWaitingAt, s.AsOf)
			}
		}
		s.Consumers = append(s.Consumers, c)
	}
	return s, nil
}

// printStatus writes s for a person: one line a fact, problems first in
// each line's wording.
func printStatus(w io.Writer, s moduleStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	at := func(t time.Time) string { return t.Format(time.RFC3339) }
	for _, sec := range s.Sections {
		sec.print(tw, sec.value, s.AsOf)
	}
	for _, t := range s.Outbox {
		fmt.Fprintf(tw, "outbox\t%s: backlog %d, dead letters %d (discarded %d)\n", t.Topic, t.Backlog, t.DeadLetters, t.DiscardedDeadLetters)
		if o := t.Oldest; o != nil {
			fmt.Fprintf(tw, "\toldest unsent: offset %d, messageId %s, created %s (%.1f s ago)\n", o.Offset, o.MessageID, at(o.CreatedAt), o.AgeSeconds)
		}
		if h := t.Held; h.Oldest != nil {
			fmt.Fprintf(tw, "\theld: %d keys wait behind a dead letter, %d records behind them; oldest key %s behind dead letter %d since %s (%.1f s ago): replay or discard it\n",
				h.Keys, h.Records, h.Oldest.Key, h.Oldest.DeadLetterID, at(h.Oldest.Since), h.Oldest.AgeSeconds)
		}
		if l := t.Leader; l == nil {
			fmt.Fprintf(tw, "\trelay leader: NONE (no pin serve holds the lock; nothing is sent)\n")
		} else {
			fmt.Fprintf(tw, "\trelay leader: %s (pid %d, %s, session since %s)\n", l.ApplicationName, l.PID, l.ClientAddr, at(l.BackendStart))
		}
	}
	for _, c := range s.Consumers {
		lag := "lag unknown: " + c.LagUnknown
		if c.Lag != nil {
			lag = fmt.Sprintf("lag %d", *c.Lag)
		}
		if c.NotConsuming {
			lag = fmt.Sprintf("NOT CONSUMING while lag grows: %s, oldest waiting record written %s ago", lag, s.AsOf.Sub(*c.OldestWaitingAt).Round(time.Second))
		}
		last := "never"
		if c.LastReceivedAt != nil {
			last = at(*c.LastReceivedAt)
		}
		fmt.Fprintf(tw, "consumer\t%s: dead letters %d (discarded %d), %s, last new message %s\n",
			c.Group, c.DeadLetters, c.DiscardedDeadLetters, strings.TrimSpace(lag), last)
	}
	return tw.Flush()
}

// topicsOf are the topics group reads, as its module declares them.
func topicsOf(consumed []consumedTopics, group string) []string {
	for _, c := range consumed {
		if c.group == group {
			return c.topics
		}
	}
	return nil
}
