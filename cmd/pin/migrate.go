package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/outbox"
	"github.com/pinmarket/pin/platform/postgres"
)

func migrate(ctx context.Context, args, environ []string, stdout io.Writer) error {
	if len(args) > 0 && cli.IsHelp(args[0]) {
		return cli.ParseFlags(cli.NewFlags("migrate"), "migrate up|down|status", args[:1], stdout)
	}
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "status") {
		return cli.Usage("migrate: want exactly one of up, down, status")
	}
	if err := cli.NoArgs("migrate "+args[0], "migrate "+args[0], args[1:], stdout); err != nil {
		return err
	}
	sqlDB, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	provider, err := postgres.MigrationProvider(sqlDB)
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		results, err := provider.Up(ctx)
		for _, r := range results {
			fmt.Fprintf(stdout, "applied %s (%s)\n", r.Source.Path, r.Duration)
		}
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		if len(results) == 0 {
			fmt.Fprintln(stdout, "no migrations to apply: the database is up to date")
		}
		// Each declared topic's outbox table, from the one definition: a
		// new topic needs no migration of its own.
		topics := declaredTopics()
		if err := outbox.EnsureTopics(ctx, sqlDB, topics...); err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		fmt.Fprintf(stdout, "outbox tables ready for %s\n", strings.Join(topics, ", "))
	case "down":
		r, err := provider.Down(ctx)
		if err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		fmt.Fprintf(stdout, "reverted %s (%s)\n", r.Source.Path, r.Duration)
	case "status":
		statuses, err := provider.Status(ctx)
		if err != nil {
			return fmt.Errorf("migrate status: %w", err)
		}
		for _, s := range statuses {
			applied := "pending"
			if s.State == "applied" {
				applied = "applied " + s.AppliedAt.UTC().Format("2006-01-02T15:04:05Z")
			}
			fmt.Fprintf(stdout, "%-40s %s\n", s.Source.Path, applied)
		}
	}
	return nil
}
