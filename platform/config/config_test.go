package config_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pinmarket/pin/platform/config"
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
		{"short secret", []string{"PIN_AUTH_JWT_SECRET=short"}, "PIN_AUTH_JWT_SECRET"},
		{"broker without port", []string{"PIN_KAFKA_BROKERS=localhost"}, "PIN_KAFKA_BROKERS"},
		{"log level", []string{"PIN_LOG_LEVEL=loud"}, "PIN_LOG_LEVEL"},
		{"http addr", []string{"PIN_HTTP_ADDR=8080"}, "PIN_HTTP_ADDR"},
		{"boost projection not on/off", []string{"PIN_BOOST_PROJECTION=yes"}, "PIN_BOOST_PROJECTION"},
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

func TestLoadMissingRequired(t *testing.T) {
	t.Parallel()
	_, err := config.Load([]string{"PIN_AUTH_JWT_SECRET=" + secret}, config.NeedKafka|config.NeedJWTSecret)
	require.ErrorContains(t, err, "PIN_KAFKA_BROKERS")
	_, err = config.Load([]string{"PIN_KAFKA_BROKERS=127.0.0.1:9092"}, config.NeedKafka|config.NeedJWTSecret)
	require.ErrorContains(t, err, "PIN_AUTH_JWT_SECRET")
	_, err = config.Load(nil, 0)
	require.NoError(t, err, "dev and migrate need neither")
}
