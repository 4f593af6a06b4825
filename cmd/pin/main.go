// Command pin is the Pin backend's modular monolith: it serves the HTTP API,
// runs the modules' background runners and forwards the outbox to Kafka.
//
// See README.md ("Commands") or `pin help` for the commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/pinmarket/pin/platform/buildinfo"
	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2 // bad configuration or bad command line
)

const usage = `pin — the Pin backend (promotion module)

Usage:
  pin serve                                   HTTP API, background runners and the outbox relay
  pin dev                                     serve on one machine with only PostgreSQL (embedded Kafka-protocol broker)
  pin dev make-due PURCHASE_ID                make an Active purchase due now (only on a database pin dev created)
  pin migrate up|down|status                  apply, revert one, or list the embedded migrations
  pin expire-promotions --once [--batch-size N]  run exactly one expiry cycle and print its JSON result
  pin kafka create-topics [--replication-factor N] [--retention D]  create the module's missing topics (3 partitions)
  pin token --tenant UUID [--user UUID] [--role ROLE]...  print a development JWT
  pin outbox dead-letters list [--topic T] [--limit N] [--discarded]  list the relay's dead letters, one JSON object a line
  pin outbox dead-letters replay ID...|--all  put dead letters back in the outbox with their original messageId
  pin outbox dead-letters discard ID... --reason TEXT  set dead letters aside for good, the reason kept
  pin promotion poison list                   list the purchases the expiry job remembers as poison, one JSON object a line
  pin promotion poison release PURCHASE_ID...|--all  forget poison purchases: the next cycle takes them in normal order
  pin promotion snapshot [--tenant UUID] [--purchase UUID]... [--target-kind KIND] [--include-ended] [--rate N]  redeliver purchases' last events (event_origin=snapshot); --snapshot-id ID resumes one
  pin consumer dead-letters list [--group G] [--limit N] [--discarded]  list the consumers' dead letters, one JSON object a line
  pin consumer dead-letters replay ID...|--all  hand dead letters to their consumer again (the boost projection, in this process)
  pin consumer dead-letters discard ID... --reason TEXT  set dead letters aside for good, the reason kept
  pin contract verify --consumer CMD --effects CMD [--brokers HOST:PORT] [--scenario NAME]... [--crash] [--timeout D]  run a consumer of the event, in any language, through the conformance kit's scenarios
  pin status [--json]                         the module's state on one screen: expiry, poison, outbox, relay leader, dead letters, consumer lag
  pin healthcheck                             exit 0 when the local server's /readyz answers 200
  pin version                                 print the version, commit and Go toolchain (also: pin --version)

Each command's flags: pin COMMAND --help.

Configuration comes from the environment (PIN_*); see README.md.
`

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var err error
	switch args[0] {
	case "serve":
		if err = cli.NoArgsWithEnvironment("serve", "serve", environmentHelp["serve"], args[1:], stdout); err == nil {
			err = serve(ctx, environ, stderr)
		}
	case "dev":
		err = dev(ctx, args[1:], environ, stdout, stderr)
	case "kafka":
		err = kafkaCommand(ctx, args[1:], environ, stdout)
	case "migrate":
		err = migrate(ctx, args[1:], environ, stdout)
	case "outbox":
		err = outboxCommand(ctx, args[1:], environ, stdout, stderr)
	case "consumer":
		err = consumerCommand(ctx, args[1:], environ, stdout, stderr)
	case "status":
		err = status(ctx, args[1:], environ, stdout)
	case "token":
		err = token(args[1:], environ, stdout)
	case "healthcheck":
		if err = cli.NoArgs("healthcheck", "healthcheck", args[1:], stdout); err == nil {
			err = healthcheck(ctx, environ)
		}
	case "version", "-version", "--version":
		if err = cli.NoArgs("version", "version", args[1:], stdout); err == nil {
			b := buildinfo.Read()
			fmt.Fprintf(stdout, "pin %s (revision %s, %s)\n", b.Version, b.Revision, b.GoVersion)
		}
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		if command := moduleCommand(args[0]); command != nil {
			err = command(ctx, args[1:], environ, stdout, stderr)
		} else {
			err = cli.Usagef("unknown command %q (try: pin help)", args[0])
		}
	}
	return report(err, stderr)
}

// report prints err as the process's last line and picks the exit code.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var cfgErr *config.Error
	var useErr cli.UsageError
	switch {
	case errors.Is(err, cli.ErrHelpShown):
		return exitOK
	case errors.As(err, &cfgErr):
		fmt.Fprintf(stderr, "pin: configuration: %s\n", cfgErr)
		return exitUsage
	case errors.As(err, &useErr):
		fmt.Fprintf(stderr, "pin: %s\n", useErr)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "pin: %v\n", err)
		return exitFailed
	}
}
