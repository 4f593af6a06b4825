package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/outbox"
)

// expirePromotions runs `pin expire-promotions --once [--batch-size N]`: one
// expiry cycle against PIN_DATABASE_URL, its events left in the outbox for
// whichever `pin serve` forwards them, and one JSON line of counters.
func expirePromotions(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlags("expire-promotions")
	once := fs.Bool("once", false, "run exactly one cycle and exit")
	batchSize := fs.String("batch-size", "", "purchases per batch, 1 to 10000 (default PIN_EXPIRE_BATCH_SIZE)")
	if err := cli.ParseFlags(fs, "expire-promotions --once [--batch-size N]", args, stdout); err != nil {
		return err
	}
	if !*once || fs.NArg() > 0 {
		return cli.Usage("expire-promotions: only --once [--batch-size N] is supported; the recurring job runs inside `pin serve`")
	}
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return err
	}
	size := cfg.ExpireBatchSize
	if *batchSize != "" {
		n, err := strconv.Atoi(*batchSize)
		if err != nil || n < 1 || n > 10000 {
			return cli.Usagef("expire-promotions: --batch-size %q must be an integer from 1 to 10000", *batchSize)
		}
		size = n
	}
	cfg.ExpireBatchSize = size

	p, err := newPlatform(ctx, cfg, "expire", stderr)
	if err != nil {
		return err
	}
	defer p.close()
	publisher, err := outbox.NewPublisher(p.tp)
	if err != nil {
		return err
	}
	module, err := p.promotionModule(nil, publisher)
	if err != nil {
		return err
	}
	// On SIGTERM the batch in flight still commits or rolls back whole, never
	// half: it runs on for half of PIN_SHUTDOWN_TIMEOUT, then its statement
	// is cancelled on the server and it rolls back (ExpireSettings.StopTimeout).
	result, err := module.ExpireOnce(ctx, size)
	if err != nil {
		return fmt.Errorf("expire-promotions: %w", err)
	}
	line, err := json.Marshal(result)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, string(line))
	return nil
}
