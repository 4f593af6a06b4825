// Package promotioncli is the promotion module's operator commands, `pin
// promotion …` and `pin contract verify`: cmd/pin runs them by their first
// word, as the module's entry in its list hands them over. They need only
// PIN_DATABASE_URL (contract verify: nothing), and share their shape with
// the host's commands through platform/cli.
package promotioncli

import (
	"context"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/modules/promotion"
	"github.com/pinmarket/pin/platform/cli"
)

// Commands are the module's operator commands, by their first word.
func Commands() map[string]cli.Command {
	return map[string]cli.Command{"promotion": promotionCommand, "contract": contractCommand}
}

// promotionCommand runs `pin promotion …`.
var promotionCommand = cli.Group("promotion", map[string]cli.Command{
	"poison": cli.Group("promotion poison", map[string]cli.Command{
		"list":    listPoison,
		"release": releasePoison,
	}),
	"snapshot": snapshotPurchases,
})

// listPoison prints the purchases the expiry job remembers as poison, one
// JSON object a line, the first to fail first.
func listPoison(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if err := cli.NoArgs("promotion poison list", "promotion poison list", args, stdout); err != nil {
		return err
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	poison, err := promotion.ListPoison(ctx, db)
	if err != nil {
		return err
	}
	return cli.PrintList(stdout, stderr, poison, "poison purchases")
}

// releasePoison forgets the named poison purchases (or with --all every
// one), so the next expiry cycle takes them in normal order, and prints
// each one released as list does.
func releasePoison(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const name = "promotion poison release"
	fs := cli.NewFlags(name)
	all := fs.Bool("all", false, "release every poison purchase; required when no PURCHASE_ID is named")
	if err := cli.ParseFlags(fs, name+" PURCHASE_ID...|--all", args, stdout); err != nil {
		return err
	}
	ids, err := cli.NamedOrAll(name, "a purchase id (a UUID, the purchaseId of list)", fs.Args(), *all,
		func(arg string) (uuid.UUID, bool) {
			id, err := uuid.Parse(arg)
			return id, err == nil
		})
	if err != nil {
		return err
	}
	db, err := cli.OpenDatabase(ctx, environ)
	if err != nil {
		return err
	}
	defer db.Close()
	released, err := promotion.ReleasePoison(ctx, db, ids, *all)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return cli.PrintList(stdout, stderr, released, "poison purchases to release")
}
