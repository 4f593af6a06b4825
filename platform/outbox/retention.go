package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// RetentionConfig configures a RetentionCleaner. Zero values take the
// defaults.
type RetentionConfig struct {
	// Topics are the Kafka topics whose outbox tables are cleaned. Required.
	Topics []string
	// Retention is how long a forwarded row is kept, for investigations and
	// replays (default 7 days, PIN_OUTBOX_RETENTION).
	Retention time.Duration
	// Interval is the pause between cleaning rounds (default 10 minutes).
	Interval time.Duration
	// BatchSize is how many rows one DELETE removes (default 500): small
	// batches keep each transaction, and its locks and xid, short.
	BatchSize int
	// ConsumerGroup is the forwarder's consumer group (default ConsumerGroup).
	ConsumerGroup string
}

// RetentionCleaner is the host.Runner that deletes outbox rows which were
// forwarded (at or before the consumer group's acknowledged position) and
// are older than the retention. Unforwarded rows are never deleted, however
// old.
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
		if err := checkTopic(t); err != nil {
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
	if cfg.ConsumerGroup == "" {
		cfg.ConsumerGroup = ConsumerGroup
	}
	return &RetentionCleaner{db: db, cfg: cfg, logger: logger.With("runner", "outbox-retention")}, nil
}

// Name implements host.Runner.
func (c *RetentionCleaner) Name() string { return "outbox-retention" }

// Run cleans every Interval until ctx is cancelled.
func (c *RetentionCleaner) Run(ctx context.Context) error {
	for {
		n, err := c.CleanOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			c.logger.WarnContext(ctx, "outbox retention failed", "err", err)
		case n > 0:
			c.logger.InfoContext(ctx, "outbox retention deleted forwarded messages", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(c.cfg.Interval):
		}
	}
}

// CleanOnce deletes, batch by batch, every forwarded row older than the
// retention, and returns how many it deleted.
func (c *RetentionCleaner) CleanOnce(ctx context.Context) (int64, error) {
	var total int64
	for _, topic := range c.cfg.Topics {
		for {
			res, err := c.db.ExecContext(ctx, `
				DELETE FROM `+TableName(topic)+`
				WHERE (transaction_id, "offset") IN (
					SELECT m.transaction_id, m."offset"
					FROM `+TableName(topic)+` m
					JOIN `+OffsetsTableName(topic)+` o ON o.consumer_group = $1
					WHERE (m.transaction_id, m."offset") <= (o.last_processed_transaction_id, COALESCE(o.offset_acked, 0))
					  AND m.created_at < (now() AT TIME ZONE 'UTC') - make_interval(secs => $2)
					ORDER BY m.transaction_id, m."offset"
					LIMIT $3)`,
				c.cfg.ConsumerGroup, c.cfg.Retention.Seconds(), c.cfg.BatchSize)
			if err != nil {
				return total, fmt.Errorf("outbox: retention of %s: %w", topic, err)
			}
			n, err := res.RowsAffected()
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
