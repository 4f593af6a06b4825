package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/config"
	"github.com/pinmarket/pin/platform/testbed"
)

const secret = "0123456789abcdef0123456789abcdef"

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(nil, 0)
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/pin?sslmode=disable", cfg.DatabaseURL)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Equal(t, 60*time.Second, cfg.ExpireInterval)
	require.Equal(t, 200, cfg.ExpireBatchSize)
	require.Equal(t, 1, cfg.ExpireMaxBatchesPerCycle)
	require.Equal(t, "info", cfg.LogLevel)
	require.Equal(t, "127.0.0.1:9092", cfg.DevKafkaAddr)
	require.Equal(t, "off", cfg.BoostProjection)
	require.Empty(t, cfg.AdminAddr, "no admin listener unless asked for")
	require.Equal(t, 50*time.Millisecond, cfg.OutboxPollInterval)
	require.Equal(t, cfg, config.Defaults())
}

func TestLoadServeRequirements(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]string{
		"PIN_KAFKA_BROKERS=127.0.0.1:9092, 127.0.0.1:9093",
		"PIN_AUTH_JWT_SECRET=" + secret,
		"PIN_EXPIRE_INTERVAL=2m",
	}, config.NeedKafka|config.NeedJWTSecret)
	require.NoError(t, err)
	require.Len(t, cfg.KafkaBrokers, 2)
	require.Equal(t, 2*time.Minute, cfg.ExpireInterval)
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	base := []string{"PIN_KAFKA_BROKERS=127.0.0.1:9092", "PIN_AUTH_JWT_SECRET=" + secret}
	tests := []struct {
		name    string
		env     []string
		wantVar string
	}{
		{"interval below 1m", []string{"PIN_EXPIRE_INTERVAL=10s"}, "PIN_EXPIRE_INTERVAL"},
		{"interval above 5m", []string{"PIN_EXPIRE_INTERVAL=6m"}, "PIN_EXPIRE_INTERVAL"},
		{"interval not a duration", []string{"PIN_EXPIRE_INTERVAL=soon"}, "PIN_EXPIRE_INTERVAL"},
		{"batch size zero", []string{"PIN_EXPIRE_BATCH_SIZE=0"}, "PIN_EXPIRE_BATCH_SIZE"},
		{"batch size too big", []string{"PIN_EXPIRE_BATCH_SIZE=10001"}, "PIN_EXPIRE_BATCH_SIZE"},
		{"batch size not a number", []string{"PIN_EXPIRE_BATCH_SIZE=many"}, "PIN_EXPIRE_BATCH_SIZE"},
		{"database url scheme", []string{"PIN_DATABASE_URL=mysql://x/y"}, "PIN_DATABASE_URL"},
		{"database url malformed", []string{"PIN_DATABASE_URL=postgres://%zz"}, "PIN_DATABASE_URL"},
		{"database url without db", []string{"PIN_DATABASE_URL=postgres://127.0.0.1:5432"}, "PIN_DATABASE_URL"},
		{"database url without host", []string{"PIN_DATABASE_URL=postgres://u@/pin"}, "PIN_DATABASE_URL"},
		{"database hosts without target_session_attrs", []string{"PIN_DATABASE_URL=postgres://db-a:5432,db-b:5432/pin"}, "PIN_DATABASE_URL"},
		{"database target_session_attrs misspelt", []string{"PIN_DATABASE_URL=postgres://db-a,db-b/pin?target_session_attrs=read_write"}, "PIN_DATABASE_URL"},
		{"short secret", []string{"PIN_AUTH_JWT_SECRET=short"}, "PIN_AUTH_JWT_SECRET"},
		{"broker without port", []string{"PIN_KAFKA_BROKERS=localhost"}, "PIN_KAFKA_BROKERS"},
		{"log level", []string{"PIN_LOG_LEVEL=loud"}, "PIN_LOG_LEVEL"},
		{"http addr", []string{"PIN_HTTP_ADDR=8080"}, "PIN_HTTP_ADDR"},
		{"boost projection not on/off", []string{"PIN_BOOST_PROJECTION=yes"}, "PIN_BOOST_PROJECTION"},
		{"admin addr without port", []string{"PIN_ADMIN_ADDR=127.0.0.1"}, "PIN_ADMIN_ADDR"},
		{"admin addr on the public port", []string{"PIN_HTTP_ADDR=0.0.0.0:8080", "PIN_ADMIN_ADDR=127.0.0.1:8080"}, "PIN_ADMIN_ADDR"},
		{"admin addr on every interface without the opt-in", []string{"PIN_ADMIN_ADDR=0.0.0.0:6060"}, "PIN_ADMIN_ALLOW_REMOTE"},
		{"admin addr on a network address without the opt-in", []string{"PIN_ADMIN_ADDR=10.0.0.5:6060", "PIN_ADMIN_ALLOW_REMOTE=false"}, "PIN_ADMIN_ALLOW_REMOTE"},
		{"metrics nowhere", []string{"PIN_METRICS_PUBLIC=false"}, "PIN_METRICS_PUBLIC"},
		{"drain negative", []string{"PIN_SHUTDOWN_DRAIN=-1s"}, "PIN_SHUTDOWN_DRAIN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(append(append([]string{}, base...), tt.env...), config.NeedKafka|config.NeedJWTSecret)
			var cfgErr *config.Error
			require.ErrorAs(t, err, &cfgErr)
			require.Equal(t, tt.wantVar, cfgErr.Var)
			require.Contains(t, err.Error(), tt.wantVar)
		})
	}
}

// TestLoadAcceptsHostLists: a PIN_DATABASE_URL listing several hosts, IPv6
// literals included, passes as pgx reads it (ADR 0021).
func TestLoadAcceptsHostLists(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://pin:pw@db-a:5432,db-b:5433/pin?sslmode=disable&target_session_attrs=read-write",
		"postgres://pin@[::1]:5432,[::2]:5432/pin?target_session_attrs=primary",
		"postgresql://pin@db-a,db-b/pin?target_session_attrs=any",
	} {
		cfg, err := config.Load([]string{"PIN_DATABASE_URL=" + u}, 0)
		require.NoError(t, err, u)
		require.Equal(t, u, cfg.DatabaseURL)
	}
}

// TestLoadDatabaseURLErrorHidesThePassword: the error of a bad URL names
// what is wrong, without the password.
func TestLoadDatabaseURLErrorHidesThePassword(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]string{"PIN_DATABASE_URL=postgres://pin:s3cret@db-a/pin?target_session_attrs=bogus"}, 0)
	require.ErrorContains(t, err, "target_session_attrs")
	require.NotContains(t, err.Error(), "s3cret")
}

func TestLoadAdminAddr(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]string{"PIN_ADMIN_ADDR=127.0.0.1:6060"}, 0)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6060", cfg.AdminAddr)
	require.True(t, cfg.MetricsPublic, "/metrics stays on the public port by default")

	cfg, err = config.Load([]string{"PIN_ADMIN_ADDR=:6060", "PIN_METRICS_PUBLIC=false"}, 0)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:6060", cfg.AdminAddr, "no host: loopback")
	require.False(t, cfg.MetricsPublic)

	cfg, err = config.Load([]string{"PIN_ADMIN_ADDR=0.0.0.0:6060", "PIN_ADMIN_ALLOW_REMOTE=true"}, 0)
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:6060", cfg.AdminAddr, "every interface, opted in")
}

func TestLoadMissingRequired(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]string{"PIN_AUTH_JWT_SECRET=" + secret}, config.NeedKafka|config.NeedJWTSecret)
	require.ErrorContains(t, err, "PIN_KAFKA_BROKERS")
	_, err = config.Load([]string{"PIN_KAFKA_BROKERS=127.0.0.1:9092"}, config.NeedKafka|config.NeedJWTSecret)
	require.ErrorContains(t, err, "PIN_AUTH_JWT_SECRET")
	_, err = config.Load(nil, 0)
	require.NoError(t, err, "dev and migrate need neither")
}

func TestLoadKafkaSecurity(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	_, client := ca.Issue(t, "pin")
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(passwordFile, []byte("s3cret-from-file\n"), 0o600))

	cfg, err := config.Load([]string{
		"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
		"PIN_KAFKA_SASL_USERNAME=pin",
		"PIN_KAFKA_SASL_PASSWORD_FILE=" + passwordFile,
		"PIN_KAFKA_TLS=true",
		"PIN_KAFKA_TLS_CA_FILE=" + ca.File,
		"PIN_KAFKA_TLS_CERT_FILE=" + client.Cert,
		"PIN_KAFKA_TLS_KEY_FILE=" + client.Key,
		"PIN_KAFKA_TLS_SERVER_NAME=kafka.internal",
	}, 0)
	require.NoError(t, err)
	require.Equal(t, "s3cret-from-file", cfg.KafkaSASLPassword, "one trailing newline of the file is dropped")
	require.NotNil(t, cfg.KafkaTLSConfig)
	require.Equal(t, "kafka.internal", cfg.KafkaTLSConfig.ServerName)
	require.Len(t, cfg.KafkaTLSConfig.Certificates, 1)
	require.NotNil(t, cfg.KafkaTLSConfig.RootCAs)

	cfg, err = config.Load([]string{"PIN_KAFKA_TLS=true"}, 0)
	require.NoError(t, err)
	require.NotNil(t, cfg.KafkaTLSConfig, "TLS with the system roots")
	require.Nil(t, cfg.KafkaTLSConfig.RootCAs)
	cfg, err = config.Load(nil, 0)
	require.NoError(t, err)
	require.Nil(t, cfg.KafkaTLSConfig, "plaintext by default")
}

func TestLoadRejectsKafkaSecurity(t *testing.T) {
	t.Parallel()
	ca := testbed.NewCA(t)
	_, client := ca.Issue(t, "pin")
	_, other := ca.Issue(t, "other")
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("hello"), 0o600))
	missing := filepath.Join(dir, "missing")
	const password = "do-not-print-me"
	sasl := []string{"PIN_KAFKA_SASL_MECHANISM=PLAIN", "PIN_KAFKA_SASL_USERNAME=pin", "PIN_KAFKA_SASL_PASSWORD=" + password}
	tests := []struct {
		name    string
		env     []string
		wantVar string
	}{
		{"unknown mechanism", []string{"PIN_KAFKA_SASL_MECHANISM=GSSAPI", "PIN_KAFKA_SASL_USERNAME=pin", "PIN_KAFKA_SASL_PASSWORD=" + password}, "PIN_KAFKA_SASL_MECHANISM"},
		{"mechanism without user", []string{"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-256", "PIN_KAFKA_SASL_PASSWORD=" + password}, "PIN_KAFKA_SASL_USERNAME"},
		{"mechanism without password", []string{"PIN_KAFKA_SASL_MECHANISM=SCRAM-SHA-256", "PIN_KAFKA_SASL_USERNAME=pin"}, "PIN_KAFKA_SASL_PASSWORD"},
		{"credentials without mechanism", []string{"PIN_KAFKA_SASL_USERNAME=pin", "PIN_KAFKA_SASL_PASSWORD=" + password}, "PIN_KAFKA_SASL_MECHANISM"},
		{"password and password file", append([]string{"PIN_KAFKA_SASL_PASSWORD_FILE=" + notPEM}, sasl...), "PIN_KAFKA_SASL_PASSWORD_FILE"},
		{"unreadable password file", []string{"PIN_KAFKA_SASL_MECHANISM=PLAIN", "PIN_KAFKA_SASL_USERNAME=pin", "PIN_KAFKA_SASL_PASSWORD_FILE=" + missing}, "PIN_KAFKA_SASL_PASSWORD_FILE"},
		{"tls not a boolean", []string{"PIN_KAFKA_TLS=yes please"}, "PIN_KAFKA_TLS"},
		{"ca file without tls", []string{"PIN_KAFKA_TLS_CA_FILE=" + ca.File}, "PIN_KAFKA_TLS"},
		{"unreadable ca file", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_CA_FILE=" + missing}, "PIN_KAFKA_TLS_CA_FILE"},
		{"ca file without a certificate", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_CA_FILE=" + notPEM}, "PIN_KAFKA_TLS_CA_FILE"},
		{"key without certificate", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_KEY_FILE=" + client.Key}, "PIN_KAFKA_TLS_CERT_FILE"},
		{"certificate without key", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_CERT_FILE=" + client.Cert}, "PIN_KAFKA_TLS_KEY_FILE"},
		{"unreadable key", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_CERT_FILE=" + client.Cert, "PIN_KAFKA_TLS_KEY_FILE=" + missing}, "PIN_KAFKA_TLS_KEY_FILE"},
		{"key of another certificate", []string{"PIN_KAFKA_TLS=true", "PIN_KAFKA_TLS_CERT_FILE=" + client.Cert, "PIN_KAFKA_TLS_KEY_FILE=" + other.Key}, "PIN_KAFKA_TLS_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(tt.env, 0)
			var cfgErr *config.Error
			require.ErrorAs(t, err, &cfgErr)
			require.Equal(t, tt.wantVar, cfgErr.Var, err.Error())
			require.NotContains(t, err.Error(), password, "a secret never appears in an error")
		})
	}
}
