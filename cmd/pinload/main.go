// Command pinload is the load generator of the promotion API: it POSTs
// purchases (POST /api/developers/v1/promotions, 1 to 3 targets each) from
// a number of concurrent clients for a fixed time against a running `pin
// serve`, and reports purchases per second, p50/p99 latency and errors.
//
//	pinload -url http://127.0.0.1:8080 -secret "$PIN_AUTH_JWT_SECRET" -clients 32 -duration 20s
//
// With -rate, -targets and -cancel-after it offers a steady event rate on a
// fixed set of targets, purchases and cancellations mixed (the hot-table
// measurement of docs/performance.md).
//
// With -secret (default: $PIN_AUTH_JWT_SECRET) it issues its own tenant and
// admin tokens and, unless -package is given, creates a package through the
// admin API; with -token and -package it needs neither. With -pid it also
// reports the server's peak resident memory (VmHWM) before and after.
//
// `make bench` runs it in-process through BenchmarkAPI (pinload_bench_test.go),
// which also starts the server and runs pgbench for comparison.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/platform/auth"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pinload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("pinload", flag.ContinueOnError)
	baseURL := fs.String("url", "http://127.0.0.1:8080", "base URL of pin serve")
	secret := fs.String("secret", os.Getenv("PIN_AUTH_JWT_SECRET"), "JWT secret of the server, to issue tokens")
	token := fs.String("token", "", "tenant token (instead of -secret)")
	pkg := fs.String("package", "", "package id to buy (default: create one, needs -secret)")
	clients := fs.Int("clients", 32, "concurrent clients")
	duration := fs.Duration("duration", 20*time.Second, "measured time")
	warmup := fs.Duration("warmup", 2*time.Second, "load before the measured time, not counted")
	pid := fs.Int("pid", 0, "server process id, to report its peak RSS (VmHWM)")
	rate := fs.Float64("rate", 0, "requests per second of all clients together (0: no cap)")
	targets := fs.Int("targets", 0, "draw targets from a pool of this many (0: new targets each purchase)")
	cancelAfter := fs.Int("cancel-after", 0, "each client cancels its purchase from this many purchases earlier (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := loadConfig{BaseURL: *baseURL, Clients: *clients, Duration: *duration, Warmup: *warmup, TenantToken: *token,
		Rate: *rate, Targets: *targets, CancelAfter: *cancelAfter}

	var authn *auth.Authenticator
	if *secret != "" {
		var err error
		if authn, err = auth.NewAuthenticator([]byte(*secret)); err != nil {
			return err
		}
	}
	if cfg.TenantToken == "" {
		if authn == nil {
			return errors.New("either -token or -secret is required")
		}
		t, err := authn.Issue(auth.Principal{UserID: uuid.New(), TenantID: uuid.New()}, time.Hour)
		if err != nil {
			return err
		}
		cfg.TenantToken = t
	}
	if *pkg != "" {
		id, err := uuid.Parse(*pkg)
		if err != nil {
			return fmt.Errorf("-package: %w", err)
		}
		cfg.PackageID = id
	} else {
		if authn == nil {
			return errors.New("-package or -secret (to create one) is required")
		}
		admin, err := authn.Issue(auth.Principal{UserID: uuid.New(), Roles: []string{auth.RoleAdmin}}, time.Hour)
		if err != nil {
			return err
		}
		if cfg.PackageID, err = createPackage(ctx, cfg.BaseURL, admin); err != nil {
			return err
		}
	}
	if err := waitReady(ctx, cfg.BaseURL, 10*time.Second); err != nil {
		return err
	}
	if *pid > 0 {
		m, err := readMemory(*pid)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "server before: VmHWM %.1f MB, VmRSS %.1f MB\n", m.HWM, m.RSS)
	}
	res, err := runLoad(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, res.summary())
	if *pid > 0 {
		m, err := readMemory(*pid)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "server after: VmHWM %.1f MB, VmRSS %.1f MB\n", m.HWM, m.RSS)
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d requests failed", res.Errors, res.Requests)
	}
	return nil
}
