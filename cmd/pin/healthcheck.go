package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/pinmarket/pin/platform/config"
)

// healthcheck asks the local `pin serve` whether it is ready: images without
// a shell or curl use it as their container health check.
func healthcheck(ctx context.Context, environ []string) error {
	cfg, err := config.Load(environ, 0)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil {
		return err
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: /readyz answered %s", resp.Status)
	}
	return nil
}
