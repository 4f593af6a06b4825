package main

// environmentHelp is what a command needs from the environment, printed
// with its --help where its flags alone would say nothing.
var environmentHelp = map[string]string{
	"serve": `
Environment:
  PIN_DATABASE_URL     PostgreSQL 15+, default postgres://postgres@127.0.0.1:5432/pin?sslmode=disable.
                       The database must exist: unreachable at start, serve exits 1. Apply the
                       migrations first (pin migrate up): until then /readyz answers 503.
                       Several hosts, for failover: postgres://u@db-a,db-b/pin?target_session_attrs=read-write.
  PIN_KAFKA_BROKERS    required: comma-separated host:port; for a secured cluster also
                       PIN_KAFKA_SASL_* and PIN_KAFKA_TLS* (README.md, "Running in production").
  PIN_AUTH_JWT_SECRET  required: the HS256 key of the API's tokens, at least 32 bytes.
  PIN_HTTP_ADDR        where the API listens, default 127.0.0.1:8080.
Optional tuning (PIN_EXPIRE_*, PIN_OUTBOX_*, PIN_LOG_LEVEL, PIN_BOOST_PROJECTION, OTEL_*) has defaults.
Stops gracefully on SIGTERM or SIGINT.
`,
	"dev": `
Environment (development only; nothing but PostgreSQL is needed):
  PIN_DATABASE_URL     PostgreSQL 15+, default postgres://postgres@127.0.0.1:5432/pin?sslmode=disable;
                       dev creates the database if missing, applies the migrations and seeds demo packages.
  PIN_DEV_KAFKA_ADDR   where the embedded Kafka-protocol broker listens, default 127.0.0.1:9092
                       (PIN_KAFKA_BROKERS set: that cluster instead).
  PIN_AUTH_JWT_SECRET  optional: without it dev makes one for this run, and its printed tokens die with it.
  PIN_HTTP_ADDR        where the API listens, default 127.0.0.1:8080.
It prints the exports and curl lines for a second shell once it is ready.
`,
}
