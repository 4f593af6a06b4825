package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion"
)

const snapshotSynopsis = "promotion snapshot [--tenant UUID] [--purchase UUID]... [--target-kind KIND] [--include-ended] [--rate N] [--batch-size N] [--snapshot-id UUID --after PURCHASE_ID]"

// snapshotPurchases runs `pin promotion snapshot`: it republishes the
// current state of the selected purchases through the outbox, prints
// progress on stderr and the result as one JSON line on stdout
// (docs/runbooks/consumer-current-state.md). A stop (SIGINT, SIGTERM) ends
// it after the batch in flight commits, with the result so far and the
// command that resumes it; it then exits 1.
func snapshotPurchases(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "promotion snapshot"
	fs := newFlags(name)
	var opts promotion.SnapshotOptions
	uuidFlag(fs, &opts.TenantID, "tenant", "only this tenant's purchases")
	fs.Func("purchase", "only this purchase (repeatable)", func(s string) error {
		id, err := uuid.Parse(s)
		if err != nil {
			return fmt.Errorf("%q is not a UUID", s)
		}
		opts.PurchaseIDs = append(opts.PurchaseIDs, id)
		return nil
	})
	fs.StringVar(&opts.TargetKind, "target-kind", "", "only purchases with a target of this kind: Project, PropertyObject or Post")
	fs.BoolVar(&opts.IncludeEnded, "include-ended", false, "also Expired, Cancelled (and Pending) purchases; by default only Active ones")
	fs.IntVar(&opts.Rate, "rate", promotion.DefaultSnapshotRate, "events per second at most")
	fs.IntVar(&opts.BatchSize, "batch-size", promotion.DefaultSnapshotBatchSize,
		fmt.Sprintf("purchases per transaction, 1 to %d: the longest a transition of one of them waits", promotion.MaxSnapshotBatchSize))
	uuidFlag(fs, &opts.SnapshotID, "snapshot-id", "resume: the snapshotId of the stopped run (default: a new one)")
	uuidFlag(fs, &opts.After, "after", "resume: start after this purchase id (the stopped run's \"after\")")
	if err := parseFlags(fs, snapshotSynopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", name, fs.Arg(0))}
	}
	if err := opts.Check(); err != nil {
		return usageError{fmt.Sprintf("%s: %v", name, err)}
	}
	gdb, err := openGormDatabaseAs(ctx, environ, "snapshot")
	if err != nil {
		return err
	}
	db, err := gdb.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := promotion.Snapshot(ctx, db, opts, snapshotReport{stderr})
	if errors.Is(err, promotion.ErrInvalidSnapshot) {
		return usageError{fmt.Sprintf("%s: %v", name, err)}
	}
	if res.SnapshotID != uuid.Nil {
		if perr := printJSONLines(stdout, []promotion.SnapshotResult{res}); perr != nil {
			return errors.Join(err, perr)
		}
	}
	if err != nil {
		if res.SnapshotID != uuid.Nil {
			fmt.Fprintf(stderr, "pin: %s: to resume: %s\n", name, resumeCommand(opts, res))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// uuidFlag defines a flag that parses into id.
func uuidFlag(fs *flag.FlagSet, id *uuid.UUID, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		parsed, err := uuid.Parse(s)
		if err != nil {
			return fmt.Errorf("%q is not a UUID", s)
		}
		*id = parsed
		return nil
	})
}

// resumeCommand is the command line that resumes a stopped run: its
// options as given, its id, and the last purchase it did.
func resumeCommand(o promotion.SnapshotOptions, res promotion.SnapshotResult) string {
	parts := []string{"pin promotion snapshot"}
	if o.TenantID != uuid.Nil {
		parts = append(parts, "--tenant", o.TenantID.String())
	}
	for _, id := range o.PurchaseIDs {
		parts = append(parts, "--purchase", id.String())
	}
	if o.TargetKind != "" {
		parts = append(parts, "--target-kind", o.TargetKind)
	}
	if o.IncludeEnded {
		parts = append(parts, "--include-ended")
	}
	parts = append(parts, "--rate", strconv.Itoa(o.Rate), "--batch-size", strconv.Itoa(o.BatchSize),
		"--snapshot-id", res.SnapshotID.String())
	if res.After != uuid.Nil {
		parts = append(parts, "--after", res.After.String())
	}
	return strings.Join(parts, " ")
}

// snapshotReport writes a run's progress and the purchases it leaves out
// to stderr, one line each.
type snapshotReport struct{ w io.Writer }

func (r snapshotReport) Progress(p promotion.SnapshotResult) {
	fmt.Fprintf(r.w, "snapshot %s: %d events, %d failed, last purchase %s\n", p.SnapshotID, p.Events, p.Failed, p.After)
}

func (r snapshotReport) Failed(f promotion.FailedSnapshot) {
	fmt.Fprintf(r.w, "snapshot: purchase %s left out, no event could be built: %v\n", f.PurchaseID, f.Err)
}
