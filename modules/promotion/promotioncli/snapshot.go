package promotioncli

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
	"github.com/pinmarket/pin/platform/cli"
)

const snapshotSynopsis = "promotion snapshot [--tenant UUID] [--purchase UUID]... [--target-kind KIND] [--include-ended] [--rate N] [--batch-size N] [--send-derived-ids] | --snapshot-id UUID [--rate N] [--batch-size N] [--send-derived-ids]"

// derivedIDWarning is what --help and the run say of --send-derived-ids.
const derivedIDWarning = "a consumer that dedupes by messageId alone counts each such record again"

// snapshotPurchases runs `pin promotion snapshot`: it redelivers the last
// published event of each selected purchase through the outbox, prints
// progress on stderr and the result as one JSON line on stdout
// (docs/runbooks/consumer-current-state.md). Its id and the command that
// resumes it go to stderr before the first batch: the position is stored
// with every batch, so that command resumes it after any stop, SIGKILL
// included. A stop (SIGINT, SIGTERM) ends it after the batch in flight
// commits, with the result so far; it then exits 1. A purchase whose last
// messageId is unknown is skipped and listed on stderr, one JSON line each,
// unless --send-derived-ids sends it under a derived id (ADR 0012).
func snapshotPurchases(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "promotion snapshot"
	fs := cli.NewFlags(name)
	var opts promotion.SnapshotOptions
	uuidFlag(fs, &opts.TenantID, "tenant", "only this tenant's purchases")
	fs.Func("purchase", "only this purchase (repeatable)", func(s string) error {
		id, err := parseUUID(s)
		opts.PurchaseIDs = append(opts.PurchaseIDs, id)
		return err
	})
	fs.StringVar(&opts.TargetKind, "target-kind", "", "only purchases with a target of this kind: Project, PropertyObject or Post")
	fs.BoolVar(&opts.IncludeEnded, "include-ended", false, "also Expired, Cancelled (and Pending) purchases; by default only Active ones")
	fs.IntVar(&opts.Rate, "rate", promotion.DefaultSnapshotRate, "events per second at most")
	fs.IntVar(&opts.BatchSize, "batch-size", promotion.DefaultSnapshotBatchSize,
		fmt.Sprintf("purchases per transaction, 1 to %d: the longest a transition of one of them waits", promotion.MaxSnapshotBatchSize))
	uuidFlag(fs, &opts.SnapshotID, "snapshot-id", "resume the stored snapshot of this id, with its filter, where it stopped (default: a new snapshot)")
	fs.BoolVar(&opts.SendDerivedIDs, "send-derived-ids", false,
		"also send purchases whose last event's messageId is unknown (it left the outbox before migration 00008), "+
			"under an id derived from the purchase, instead of skipping them: "+derivedIDWarning)
	uuidFlag(fs, &opts.After, "after", "with --snapshot-id only, for resume lines of earlier versions: ignored, the stored position decides")
	if err := cli.ParseFlags(fs, snapshotSynopsis, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if err := opts.Check(); err != nil {
		return cli.Usagef("%s: %v", name, err)
	}
	gdb, err := cli.OpenGormDatabaseAs(ctx, environ, "snapshot")
	if err != nil {
		return err
	}
	db, err := gdb.DB()
	if err != nil {
		return err
	}
	defer db.Close()
	report := snapshotReport{w: stderr, resume: func(id uuid.UUID) string { return resumeCommand(opts, id) }, derived: opts.SendDerivedIDs}
	res, err := promotion.Snapshot(ctx, db, opts, report)
	switch {
	case errors.Is(err, promotion.ErrInvalidSnapshot):
		return cli.Usagef("%s: %v", name, err)
	case errors.Is(err, promotion.ErrSnapshotNotFound):
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.SnapshotID != uuid.Nil {
		if perr := cli.PrintJSONLines(stdout, []promotion.SnapshotResult{res}); perr != nil {
			return errors.Join(err, perr)
		}
	}
	if res.SkippedUnknownID > 0 {
		fmt.Fprintf(stderr, "snapshot %s: %d purchase(s) skipped, their last messageId is unknown (listed above, \"unknownMessageId\":\"skipped\"); "+
			"see docs/runbooks/consumer-current-state.md, step 1\n", res.SnapshotID, res.SkippedUnknownID)
	}
	if err != nil {
		if res.SnapshotID != uuid.Nil {
			fmt.Fprintf(stderr, "pin: %s: to resume: %s\n", name, resumeCommand(opts, res.SnapshotID))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// uuidFlag defines a flag that parses into id and refuses the nil UUID,
// which names nothing (as --tenant it would read as "every tenant").
func uuidFlag(fs *flag.FlagSet, id *uuid.UUID, name, usage string) {
	fs.Func(name, usage, func(s string) (err error) {
		*id, err = parseUUID(s)
		return err
	})
}

// parseUUID parses a flag's UUID, the nil one refused.
func parseUUID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	switch {
	case err != nil:
		return uuid.Nil, fmt.Errorf("%q is not a UUID", s)
	case id == uuid.Nil:
		return uuid.Nil, fmt.Errorf("%q is the nil UUID, which names nothing", s)
	}
	return id, nil
}

// resumeCommand is the command line that resumes the snapshot id: the id
// alone (the snapshot's filter and position are stored), with the pace
// this run was given.
func resumeCommand(o promotion.SnapshotOptions, id uuid.UUID) string {
	args := []string{"pin promotion snapshot --snapshot-id", id.String(),
		"--rate", strconv.Itoa(o.Rate), "--batch-size", strconv.Itoa(o.BatchSize)}
	if o.SendDerivedIDs {
		args = append(args, "--send-derived-ids")
	}
	return strings.Join(args, " ")
}

// snapshotReport writes a run's start, progress and the purchases it
// leaves out to stderr, one line each; a purchase whose last messageId is
// unknown as a JSON line, for a team to read.
type snapshotReport struct {
	w       io.Writer
	resume  func(uuid.UUID) string
	derived bool
}

func (r snapshotReport) Started(p promotion.SnapshotResult) {
	from := "from the start"
	if p.After != uuid.Nil {
		from = fmt.Sprintf("after purchase %s (%d events before)", p.After, p.TotalEvents)
	}
	fmt.Fprintf(r.w, "snapshot %s: running %s; after any stop, resume it with: %s\n", p.SnapshotID, from, r.resume(p.SnapshotID))
	if r.derived {
		fmt.Fprintf(r.w, "snapshot %s: --send-derived-ids: purchases whose last messageId is unknown go under a derived id: %s\n",
			p.SnapshotID, derivedIDWarning)
	}
}

func (r snapshotReport) Progress(p promotion.SnapshotResult) {
	fmt.Fprintf(r.w, "snapshot %s: %d events (%d in all), %d failed, %d skipped (messageId unknown), last purchase %s\n",
		p.SnapshotID, p.Events, p.TotalEvents, p.Failed, p.SkippedUnknownID, p.After)
}

func (r snapshotReport) Failed(f promotion.FailedSnapshot) {
	fmt.Fprintf(r.w, "snapshot: purchase %s left out, no event could be built: %v\n", f.PurchaseID, f.Err)
}

func (r snapshotReport) UnknownID(u promotion.UnknownIDSnapshot) {
	_ = cli.PrintJSONLines(r.w, []promotion.UnknownIDSnapshot{u})
}
