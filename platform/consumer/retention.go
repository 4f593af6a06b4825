package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"github.com/pinmarket/pin/platform/consumer/internal/store"
	"github.com/pinmarket/pin/platform/host"
)

// InboxCleaner is the host.Runner that deletes a consumer's inbox entries
// older than the retention. A record re-delivered after that is still
// stopped by the version guard, so the retention needs only to outlast the
// window in which a duplicate can arrive (redelivery after a crash or a
// rebalance), not the topic's retention.
type InboxCleaner struct {
	db        *gorm.DB
	consumer  string
	retention time.Duration
	interval  time.Duration
	batch     int
	logger    *slog.Logger
}

// DefaultInboxRetention is how long an inbox entry is kept.
const DefaultInboxRetention = 7 * 24 * time.Hour

// NewInboxCleaner returns the inbox cleaner of the consumer named consumer;
// retention 0 means DefaultInboxRetention.
func NewInboxCleaner(db *gorm.DB, consumer string, retention time.Duration, logger *slog.Logger) (*InboxCleaner, error) {
	if db == nil || consumer == "" || logger == nil {
		return nil, errors.New("consumer: NewInboxCleaner: db, consumer and logger are required")
	}
	if retention <= 0 {
		retention = DefaultInboxRetention
	}
	return &InboxCleaner{db: db, consumer: consumer, retention: retention, interval: 10 * time.Minute, batch: 1000,
		logger: logger.With("runner", "consumer-inbox-retention-"+consumer)}, nil
}

// Name implements host.Runner.
func (c *InboxCleaner) Name() string { return "consumer-inbox-retention-" + c.consumer }

// Run cleans every ten minutes until ctx is cancelled.
func (c *InboxCleaner) Run(ctx context.Context) error {
	return host.RunCleaner(ctx, c.interval, c.logger, "inbox retention", c.CleanOnce)
}

// CleanOnce deletes, in short batches, every entry older than the retention
// and returns how many it deleted.
func (c *InboxCleaner) CleanOnce(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := store.DeleteOldInbox(ctx, c.db.Statement.ConnPool, c.consumer, c.retention.Seconds(), c.batch)
		if err != nil {
			return total, fmt.Errorf("consumer %s: inbox retention: %w", c.consumer, err)
		}
		total += n
		if n < int64(c.batch) {
			return total, nil
		}
	}
}
