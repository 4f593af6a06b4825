package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pinmarket/pin/platform/host"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/outbox/internal/store"
)

// RetentionConfig configures a RetentionCleaner. Zero values take the
// defaults.
type RetentionConfig struct {
	// Topics are the Kafka topics whose outbox tables are cleaned. Required.
	Topics []string
	// Retention is how long an acknowledged row is kept, for investigations and
	// replays (default 7 days, PIN_OUTBOX_RETENTION).
	Retention time.Duration
	// Interval is the pause between cleaning rounds (default 10 minutes).
	Interval time.Duration
	// BatchSize is how many rows one DELETE removes (default 500): small
	// batches keep each transaction, and its locks and xid, short.
	BatchSize int
}

// RetentionCleaner is the host.Runner that deletes outbox rows which were
// acknowledged (published or dead-lettered) and are older than the
// retention. Unacknowledged rows are never deleted, however old.
type RetentionCleaner struct {
	db     *sql.DB
	cfg    RetentionConfig
	logger *slog.Logger
}

// NewRetentionCleaner returns a RetentionCleaner on db.
func NewRetentionCleaner(db *sql.DB, cfg RetentionConfig, logger *slog.Logger) (*RetentionCleaner, error) {
	if db == nil || logger == nil {
		return nil, errors.New("outbox: NewRetentionCleaner: db and logger are required")
	}
	if len(cfg.Topics) == 0 {
		return nil, errors.New("outbox: NewRetentionCleaner: no topics")
	}
	for _, t := range cfg.Topics {
		if err := outbox.CheckTopic(t); err != nil {
			return nil, err
		}
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	return &RetentionCleaner{db: db, cfg: cfg, logger: logger.With("runner", "outbox-retention")}, nil
}

// Name implements host.Runner.
func (c *RetentionCleaner) Name() string { return "outbox-retention" }

// Run cleans every Interval until ctx is cancelled.
func (c *RetentionCleaner) Run(ctx context.Context) error {
	return host.RunCleaner(ctx, c.cfg.Interval, c.logger, "outbox retention", c.CleanOnce)
}

// CleanOnce deletes, batch by batch, every acknowledged row older than the
// retention, and returns how many it deleted.
func (c *RetentionCleaner) CleanOnce(ctx context.Context) (int64, error) {
	var total int64
	for _, topic := range c.cfg.Topics {
		for {
			n, err := store.DeleteAcked(ctx, c.db, topic, c.cfg.Retention.Seconds(), c.cfg.BatchSize)
			if err != nil {
				return total, fmt.Errorf("outbox: retention of %s: %w", topic, err)
			}
			total += n
			if n < int64(c.cfg.BatchSize) {
				break
			}
		}
	}
	return total, nil
}
