package main

// usage is `pin help`: every command, nested ones spelled out
// (TestEveryCommandsHelpExitsZero asks each one for its --help).
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
