// Package config reads the service's configuration from the environment and
// validates it at start, so that a bad value stops the process before it
// takes any work.
package config

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pinmarket/pin/platform/admin"
	"github.com/pinmarket/pin/platform/auth"
	"github.com/pinmarket/pin/platform/observability"
)

// Config is the whole configuration of the pin process. The variable names
// are part of the outward interface (README.md, "Configuration").
type Config struct {
	DatabaseURL  string   `env:"PIN_DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/pin?sslmode=disable"`
	HTTPAddr     string   `env:"PIN_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	KafkaBrokers []string `env:"PIN_KAFKA_BROKERS" envSeparator:","`
	JWTSecret    string   `env:"PIN_AUTH_JWT_SECRET"`
	// JWTIssuer and JWTAudience, when set, are required in every token's
	// iss and aud claims (and written into tokens `pin token` mints).
	JWTIssuer   string        `env:"PIN_AUTH_JWT_ISSUER"`
	JWTAudience string        `env:"PIN_AUTH_JWT_AUDIENCE"`
	JWTMaxTTL   time.Duration `env:"PIN_AUTH_JWT_MAX_TTL" envDefault:"720h"`
	LogLevel    string        `env:"PIN_LOG_LEVEL" envDefault:"info"`

	ExpireInterval           time.Duration `env:"PIN_EXPIRE_INTERVAL" envDefault:"60s"`
	ExpireBatchSize          int           `env:"PIN_EXPIRE_BATCH_SIZE" envDefault:"200"`
	ExpireMaxBatchesPerCycle int           `env:"PIN_EXPIRE_MAX_BATCHES_PER_CYCLE" envDefault:"1"`
	ExpireCycleBudget        time.Duration `env:"PIN_EXPIRE_CYCLE_BUDGET" envDefault:"30s"`

	OutboxPollInterval time.Duration `env:"PIN_OUTBOX_POLL_INTERVAL" envDefault:"50ms"`
	OutboxRetention    time.Duration `env:"PIN_OUTBOX_RETENTION" envDefault:"168h"`

	// BoostProjection runs the reference boost projection in `pin serve`
	// ("on" or "off"); `pin dev` always runs it.
	BoostProjection string `env:"PIN_BOOST_PROJECTION" envDefault:"off"`

	// Kafka security (README, "Running in production").
	KafkaSASLMechanism    string `env:"PIN_KAFKA_SASL_MECHANISM"`
	KafkaSASLUsername     string `env:"PIN_KAFKA_SASL_USERNAME"`
	KafkaSASLPassword     string `env:"PIN_KAFKA_SASL_PASSWORD"`
	KafkaSASLPasswordFile string `env:"PIN_KAFKA_SASL_PASSWORD_FILE"`
	KafkaTLS              bool   `env:"PIN_KAFKA_TLS" envDefault:"false"`
	KafkaTLSCAFile        string `env:"PIN_KAFKA_TLS_CA_FILE"`
	KafkaTLSCertFile      string `env:"PIN_KAFKA_TLS_CERT_FILE"`
	KafkaTLSKeyFile       string `env:"PIN_KAFKA_TLS_KEY_FILE"`
	KafkaTLSServerName    string `env:"PIN_KAFKA_TLS_SERVER_NAME"`
	// KafkaTLSConfig is built by Load from the PIN_KAFKA_TLS* variables; nil
	// when PIN_KAFKA_TLS is false.
	KafkaTLSConfig *tls.Config `env:"-"`
	// KafkaTopicCheckInterval is how often `pin serve` checks that the
	// module's topics exist with their partition count.
	KafkaTopicCheckInterval time.Duration `env:"PIN_KAFKA_TOPIC_CHECK_INTERVAL" envDefault:"1m"`

	ShutdownTimeout time.Duration `env:"PIN_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	DevKafkaAddr    string        `env:"PIN_DEV_KAFKA_ADDR" envDefault:"127.0.0.1:9092"`

	// AdminAddr, when set, is the host:port of a second listener serving
	// /debug/pprof/ and /metrics (platform/admin); unset, no profile is
	// served anywhere. Load gives ":port" the loopback host.
	AdminAddr string `env:"PIN_ADMIN_ADDR"`
	// AdminAllowRemote must be true for an AdminAddr that is not loopback:
	// the admin listener has no authentication.
	AdminAllowRemote bool `env:"PIN_ADMIN_ALLOW_REMOTE" envDefault:"false"`
	// MetricsPublic keeps /metrics on PIN_HTTP_ADDR too, as before the admin
	// listener served it (docs/adr/0019-admin-surface.md).
	MetricsPublic bool `env:"PIN_METRICS_PUBLIC" envDefault:"true"`
	// ShutdownDrain is how long /readyz answers 503 after SIGTERM before the
	// listener closes, so that load balancers stop sending requests first.
	ShutdownDrain time.Duration `env:"PIN_SHUTDOWN_DRAIN" envDefault:"5s"`
}

// Defaults is the configuration of an empty environment: each variable's
// default, from the tags above, the one place a default is written. Code
// that runs as production does with nothing set (tests, benchmarks) reads
// them here; TestLoadDefaults holds that they load.
func Defaults() Config {
	cfg, err := Load(nil, 0)
	if err != nil {
		panic(fmt.Sprintf("config: the defaults do not load: %v", err))
	}
	return cfg
}

// AuthOptions are the token rules of the configuration.
func (c Config) AuthOptions() []auth.Option {
	return []auth.Option{auth.WithIssuer(c.JWTIssuer), auth.WithAudience(c.JWTAudience), auth.WithMaxTTL(c.JWTMaxTTL)}
}

// MinJWTSecretBytes is the shortest HS256 key accepted.
const MinJWTSecretBytes = 32

// Error names the variable that is wrong and the rule it breaks; it is
// printed as the one line the process ends with.
type Error struct {
	Var  string
	Rule string
}

func (e *Error) Error() string { return e.Var + ": " + e.Rule }

// Requirement says which optional variables a command cannot do without.
type Requirement int

const (
	// NeedKafka requires PIN_KAFKA_BROKERS.
	NeedKafka Requirement = 1 << iota
	// NeedJWTSecret requires PIN_AUTH_JWT_SECRET.
	NeedJWTSecret
)

// Load reads the configuration from environ (os.Environ() form: "K=V")
// and validates it against what the command needs.
func Load(environ []string, needs Requirement) (Config, error) {
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: env.ToMap(environ)}); err != nil {
		return Config{}, fromParseError(err)
	}
	cfg.KafkaBrokers = trimList(cfg.KafkaBrokers)
	if err := cfg.validate(needs); err != nil {
		return Config{}, err
	}
	if cfg.AdminAddr != "" {
		cfg.AdminAddr, _, _ = admin.Resolve(cfg.AdminAddr) // validated above
	}
	if err := cfg.loadKafkaSecurity(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func (c Config) validate(needs Requirement) error {
	if err := validateDatabaseURL(c.DatabaseURL); err != nil {
		return &Error{"PIN_DATABASE_URL", err.Error()}
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return &Error{"PIN_HTTP_ADDR", "must be host:port: " + err.Error()}
	}
	if needs&NeedKafka != 0 && len(c.KafkaBrokers) == 0 {
		return &Error{"PIN_KAFKA_BROKERS", "is required: comma-separated host:port list"}
	}
	for _, b := range c.KafkaBrokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			return &Error{"PIN_KAFKA_BROKERS", fmt.Sprintf("%q is not host:port", b)}
		}
	}
	if needs&NeedJWTSecret != 0 && c.JWTSecret == "" {
		return &Error{"PIN_AUTH_JWT_SECRET", fmt.Sprintf("is required: an HS256 key of at least %d bytes", MinJWTSecretBytes)}
	}
	if c.JWTSecret != "" && len(c.JWTSecret) < MinJWTSecretBytes {
		return &Error{"PIN_AUTH_JWT_SECRET", fmt.Sprintf("must be at least %d bytes, got %d", MinJWTSecretBytes, len(c.JWTSecret))}
	}
	for name, v := range map[string]string{"PIN_AUTH_JWT_ISSUER": c.JWTIssuer, "PIN_AUTH_JWT_AUDIENCE": c.JWTAudience} {
		if len(v) > 256 || strings.IndexFunc(v, func(r rune) bool { return r < 0x21 || r == 0x7f }) >= 0 {
			return &Error{name, "must be at most 256 characters without spaces or control characters"}
		}
	}
	if c.JWTMaxTTL < time.Minute || c.JWTMaxTTL > 8760*time.Hour {
		return &Error{"PIN_AUTH_JWT_MAX_TTL", fmt.Sprintf("must be between 1m and 8760h, got %s", c.JWTMaxTTL)}
	}
	if _, err := observability.ParseLevel(c.LogLevel); err != nil {
		return &Error{"PIN_LOG_LEVEL", "must be one of debug, info, warn, error"}
	}
	if c.ExpireInterval < time.Minute || c.ExpireInterval > 5*time.Minute {
		return &Error{"PIN_EXPIRE_INTERVAL", fmt.Sprintf("must be between 1m and 5m, got %s", c.ExpireInterval)}
	}
	if c.ExpireBatchSize < 1 || c.ExpireBatchSize > 10000 {
		return &Error{"PIN_EXPIRE_BATCH_SIZE", fmt.Sprintf("must be between 1 and 10000, got %d", c.ExpireBatchSize)}
	}
	if c.ExpireMaxBatchesPerCycle < 0 {
		return &Error{"PIN_EXPIRE_MAX_BATCHES_PER_CYCLE", "must be 0 (unlimited within the budget) or more"}
	}
	if c.ExpireCycleBudget <= 0 || c.ExpireCycleBudget > c.ExpireInterval {
		return &Error{"PIN_EXPIRE_CYCLE_BUDGET", fmt.Sprintf("must be positive and at most PIN_EXPIRE_INTERVAL (%s)", c.ExpireInterval)}
	}
	if c.OutboxPollInterval < 10*time.Millisecond || c.OutboxPollInterval > time.Minute {
		return &Error{"PIN_OUTBOX_POLL_INTERVAL", "must be between 10ms and 1m"}
	}
	if c.OutboxRetention < time.Hour {
		return &Error{"PIN_OUTBOX_RETENTION", "must be at least 1h"}
	}
	if c.BoostProjection != "on" && c.BoostProjection != "off" {
		return &Error{"PIN_BOOST_PROJECTION", fmt.Sprintf("must be on or off, got %q", c.BoostProjection)}
	}
	if c.KafkaTopicCheckInterval < time.Second || c.KafkaTopicCheckInterval > time.Hour {
		return &Error{"PIN_KAFKA_TOPIC_CHECK_INTERVAL", "must be between 1s and 1h"}
	}
	if c.ShutdownTimeout < time.Second || c.ShutdownTimeout > 10*time.Minute {
		return &Error{"PIN_SHUTDOWN_TIMEOUT", "must be between 1s and 10m"}
	}
	if c.ShutdownDrain < 0 || c.ShutdownDrain > 5*time.Minute {
		return &Error{"PIN_SHUTDOWN_DRAIN", fmt.Sprintf("must be between 0s and 5m, got %s", c.ShutdownDrain)}
	}
	if _, _, err := net.SplitHostPort(c.DevKafkaAddr); err != nil {
		return &Error{"PIN_DEV_KAFKA_ADDR", "must be host:port"}
	}
	return c.validateAdminAddr()
}

// validateAdminAddr keeps the profiles off the public listener (the admin
// port must be its own) and off the network unless the operator opts in.
func (c Config) validateAdminAddr() error {
	if c.AdminAddr == "" {
		if !c.MetricsPublic {
			return &Error{"PIN_METRICS_PUBLIC", "false needs PIN_ADMIN_ADDR: /metrics would be served nowhere"}
		}
		return nil
	}
	_, port, err := net.SplitHostPort(c.AdminAddr)
	if err != nil || port == "" {
		return &Error{"PIN_ADMIN_ADDR", fmt.Sprintf("must be host:port, or unset for no admin listener; got %q", c.AdminAddr)}
	}
	if _, httpPort, _ := net.SplitHostPort(c.HTTPAddr); port == httpPort && port != "0" {
		return &Error{"PIN_ADMIN_ADDR", fmt.Sprintf("must not use PIN_HTTP_ADDR's port %s: profiles are never served on the public listener", port)}
	}
	if _, loopback, _ := admin.Resolve(c.AdminAddr); !loopback && !c.AdminAllowRemote {
		return &Error{"PIN_ADMIN_ALLOW_REMOTE", fmt.Sprintf("must be true to serve the unauthenticated admin listener on PIN_ADMIN_ADDR=%s, which is not loopback", c.AdminAddr)}
	}
	return nil
}

func validateDatabaseURL(raw string) error {
	scheme, rest, _ := strings.Cut(raw, "://")
	if scheme != "postgres" && scheme != "postgresql" {
		return fmt.Errorf("must be a postgres:// URL, got scheme %q", scheme)
	}
	// pgx's own parser, not net/url: it is the one that connects, and it
	// reads host lists net/url cannot (postgres://u@[::1]:5432,[::2]:5432/db).
	pgCfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return fmt.Errorf("is not a URL pgx can use: %v", err)
	}
	authority, path, _ := strings.Cut(strings.SplitN(rest, "?", 2)[0], "/")
	if hosts := authority[strings.LastIndex(authority, "@")+1:]; strings.Trim(hosts, ",") == "" {
		return errors.New("must name a host (postgres://user@host:port/db)")
	}
	if strings.Trim(path, "/") == "" {
		return errors.New("must name a database (postgres://user@host:port/db)")
	}
	if manyHosts(pgCfg) && pgCfg.ValidateConnect == nil && !strings.Contains(raw, "target_session_attrs=any") {
		// Without it pgx takes the first host that answers, which after a
		// failover is the old primary, now read-only (ADR 0021).
		return errors.New("lists several hosts but no target_session_attrs: add target_session_attrs=read-write so that only a writable primary is used")
	}
	return nil
}

// manyHosts reports whether cfg lists more than one host:port (sslmode
// prefer repeats each one, with and without TLS).
func manyHosts(cfg *pgconn.Config) bool {
	for _, fb := range cfg.Fallbacks {
		if fb.Host != cfg.Host || fb.Port != cfg.Port {
			return true
		}
	}
	return false
}

// trimList drops blanks around and between the items of a comma list.
func trimList(items []string) []string {
	var out []string
	for _, item := range items {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// fromParseError turns the env library's error into one naming the variable.
func fromParseError(err error) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var parseErr env.ParseError
	if errors.As(err, &parseErr) {
		name := parseErr.Name
		if f, ok := reflect.TypeOf(Config{}).FieldByName(parseErr.Name); ok {
			name = f.Tag.Get("env")
		}
		return &Error{name, fmt.Sprintf("cannot parse as %s: %v", describe(parseErr.Type), unwrapNum(parseErr.Err))}
	}
	return &Error{"environment", err.Error()}
}

func describe(t reflect.Type) string {
	switch t {
	case reflect.TypeOf(time.Duration(0)):
		return "a Go duration (e.g. 60s, 2m)"
	case reflect.TypeOf(0):
		return "an integer"
	case reflect.TypeOf(false):
		return "a boolean (true or false)"
	}
	return t.String()
}

func unwrapNum(err error) error {
	var numErr *strconv.NumError
	if errors.As(err, &numErr) {
		return numErr.Err
	}
	return err
}
