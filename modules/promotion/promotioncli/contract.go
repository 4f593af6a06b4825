package promotioncli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pinmarket/pin/modules/promotion/conformance"
	"github.com/pinmarket/pin/modules/promotion/contract/scenarios"
	"github.com/pinmarket/pin/platform/cli"
)

// contractCommand runs `pin contract verify …`: it parses the flags and
// hands the run to package conformance.
func contractCommand(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	const synopsis = "contract verify --consumer CMD --effects CMD [--dead-letters CMD] [--brokers HOST:PORT] [--scenario NAME]... [--crash] [--timeout D]"
	if len(args) > 0 && cli.IsHelp(args[0]) {
		return cli.ParseFlags(cli.NewFlags("contract"), synopsis, args[:1], stdout)
	}
	if len(args) == 0 || args[0] != "verify" {
		return cli.Usage("contract: the only subcommand is verify")
	}
	fs := cli.NewFlags("contract verify")
	consumerCmd := fs.String("consumer", "", "the consumer under test, run with sh -c and "+conformance.EnvBrokers+", "+conformance.EnvTopic+", "+conformance.EnvGroup)
	effectsCmd := fs.String("effects", "", `prints the consumer's side effects so far, one JSON object a line: {"purchaseId":"…","status":"Active","version":1} ("kind":"reversal" for a refund)`)
	deadLettersCmd := fs.String("dead-letters", "", `prints what the consumer dead-lettered so far, one JSON object a line: {"partition":P,"offset":O,"rule":"…"}; without it, refused records are judged by effects only`)
	brokers := fs.String("brokers", "", "a Kafka cluster to use (HOST:PORT[,HOST:PORT…]) instead of the embedded broker")
	var names cli.StringList
	fs.Var(&names, "scenario", "run only this scenario (repeatable): "+strings.Join(scenarios.Names(), ", "))
	crash := fs.Bool("crash", false, "also SIGKILL the consumer at its offset commits (before and after one is applied) and start it again")
	timeout := fs.Duration("timeout", 30*time.Second, "how long a scenario may take the consumer to commit past its records, and each run of the effects command (killed with its process group past it)")
	if err := cli.ParseFlags(fs, synopsis, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.Usagef("contract verify: unexpected argument %q", fs.Arg(0))
	case *consumerCmd == "" || *effectsCmd == "":
		return cli.Usage("contract verify: --consumer and --effects are required")
	case *timeout <= 0:
		return cli.Usagef("contract verify: --timeout %s must be above 0", *timeout)
	}
	cfg := conformance.Config{Consumer: *consumerCmd, Effects: *effectsCmd, DeadLetters: *deadLettersCmd, Crash: *crash, Timeout: *timeout,
		Environ: environ, Stdout: stdout, Stderr: stderr}
	if *brokers != "" {
		cfg.Brokers = strings.Split(*brokers, ",")
	}
	for _, name := range names {
		s, ok := scenarios.Named(name)
		if !ok {
			return fmt.Errorf("contract verify: no scenario %q (the scenarios: %s)", name, strings.Join(scenarios.Names(), ", "))
		}
		cfg.Scenarios = append(cfg.Scenarios, s)
	}
	err := conformance.Verify(ctx, cfg)
	if errors.Is(err, conformance.ErrNoEmbeddedBroker) {
		return cli.Usage(err.Error())
	}
	return err
}
