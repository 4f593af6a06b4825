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

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run runs the command args name: the host's own here, a module's through
// the list (moduleCommand); it returns the exit code.
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
