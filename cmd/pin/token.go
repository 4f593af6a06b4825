package main

import (
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/cli"
	"github.com/pinmarket/pin/platform/config"
)

func token(args, environ []string, stdout io.Writer) error {
	fs := cli.NewFlags("token")
	tenant := fs.String("tenant", "", "tenant (company) UUID")
	user := fs.String("user", "", "user UUID (default: a new random one)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid (at most PIN_AUTH_JWT_MAX_TTL)")
	var roles cli.StringList
	fs.Var(&roles, "role", "a role to grant (repeatable), e.g. admin")
	if err := cli.ParseFlags(fs, "token --tenant UUID [--user UUID] [--role ROLE]... [--ttl D]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("token: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(environ, config.NeedJWTSecret)
	if err != nil {
		return err
	}
	p := auth.Principal{UserID: uuid.New(), Roles: roles}
	if *tenant == "" {
		return cli.Usage("token: --tenant UUID is required")
	}
	if p.TenantID, err = uuid.Parse(*tenant); err != nil || p.TenantID == uuid.Nil {
		return cli.Usagef("token: --tenant %q is not a non-nil UUID", *tenant)
	}
	if *user != "" {
		if p.UserID, err = uuid.Parse(*user); err != nil || p.UserID == uuid.Nil {
			return cli.Usagef("token: --user %q is not a non-nil UUID", *user)
		}
	}
	if *ttl <= 0 || *ttl > cfg.JWTMaxTTL {
		return cli.Usagef("token: --ttl %s must be positive and at most PIN_AUTH_JWT_MAX_TTL (%s)", *ttl, cfg.JWTMaxTTL)
	}
	authn, err := auth.NewAuthenticator([]byte(cfg.JWTSecret), cfg.AuthOptions()...)
	if err != nil {
		return err
	}
	signed, err := authn.Issue(p, *ttl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, signed)
	return nil
}
