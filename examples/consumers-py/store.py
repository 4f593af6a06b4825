"""The consumer's own PostgreSQL database: the tables every consumer keeps
beside its effects (the message ids it took, the last version applied per
purchase, the records it refused), and the statements on them."""

import json
import os

import psycopg2
import psycopg2.errors
import psycopg2.extensions
from psycopg2 import sql

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/pin_examples?sslmode=disable"


def database_url():
    return os.environ.get("PIN_EXAMPLE_DATABASE_URL") or DEFAULT_DATABASE_URL


def connect(log):
    """connect opens PIN_EXAMPLE_DATABASE_URL, creating the database when it
    does not exist yet, so a new consumer group needs nothing prepared."""
    url = database_url()
    database = psycopg2.extensions.parse_dsn(url).get("dbname")
    admin = psycopg2.connect(psycopg2.extensions.make_dsn(url, dbname="postgres"))
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            if cur.fetchone() is None:
                try:
                    cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
                    log("info", "database created", database=database)
                except (psycopg2.errors.DuplicateDatabase, psycopg2.errors.UniqueViolation):
                    pass  # created meanwhile by another instance
    finally:
        admin.close()
    return psycopg2.connect(url)


def connect_if_exists():
    """The database for --effects and --dead-letters, which only read: None
    when no consumer has created it yet."""
    url = database_url()
    database = psycopg2.extensions.parse_dsn(url).get("dbname")
    admin = psycopg2.connect(psycopg2.extensions.make_dsn(url, dbname="postgres"))
    try:
        with admin.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
            exists = cur.fetchone() is not None
    finally:
        admin.close()
    return psycopg2.connect(url) if exists else None


COMMON_DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.inbox (
  message_id  uuid PRIMARY KEY,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.purchase_versions (
  purchase_id uuid PRIMARY KEY,
  version     bigint NOT NULL,
  status      text NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.dead_letters (
  id         bigserial PRIMARY KEY,
  group_id   text NOT NULL,
  topic      text NOT NULL,
  partition  int NOT NULL,
  "offset"   bigint NOT NULL,
  key        bytea,
  value      bytea,
  headers    text NOT NULL, -- JSON; text, since jsonb refuses the escaped NUL a hostile header may hold
  rule       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (group_id, topic, partition, "offset")
);
"""


def migrate(conn, schema, ddl):
    """Creates the tables. Two instances starting together (a restart racing
    the old one's end) would collide on CREATE ... IF NOT EXISTS; the advisory
    lock serialises them."""
    with conn, conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"pin-example:{schema}",))
        cur.execute(COMMON_DDL.format(schema=schema) + ddl)


def table_exists(conn, table):
    with conn.cursor() as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (table,))
        return cur.fetchone()[0]


def rows_of(conn, table, query):
    """query's rows, or none while table does not exist yet (no consumer has started)."""
    if not table_exists(conn, table):
        return []
    with conn.cursor() as cur:
        cur.execute(query)
        return cur.fetchall()


def take_message(cur, schema, message_id):
    """The inbox: records message_id as taken and returns False when it was
    already (a redelivery: relay resend, dead-letter replay, snapshot)."""
    cur.execute(f"INSERT INTO {schema}.inbox (message_id) VALUES (%s) ON CONFLICT DO NOTHING", (message_id,))
    return cur.rowcount == 1


def guard(cur, schema, purchase_id, version, status):
    """The version guard: in one statement (so two instances racing on a
    purchase cannot both pass) records version as the purchase's last applied
    one, and returns False (stale) when version is not above it. The row stays
    locked until the transaction ends, which serialises the purchase's effects."""
    cur.execute(
        f"""INSERT INTO {schema}.purchase_versions AS v (purchase_id, version, status) VALUES (%s, %s, %s)
            ON CONFLICT (purchase_id) DO UPDATE SET version = EXCLUDED.version, status = EXCLUDED.status
            WHERE v.version < EXCLUDED.version""",
        (purchase_id, version, status))
    return cur.rowcount == 1


def dead_letter(cur, schema, group, topic, partition, offset, key, value, headers, rule):
    headers_text = json.dumps([[k, (v or b"").decode("utf-8", "backslashreplace")] for k, v in headers or []])
    cur.execute(
        f"""INSERT INTO {schema}.dead_letters (group_id, topic, partition, "offset", key, value, headers, rule)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING""",
        (group, topic, partition, offset, key, value, no_nul(headers_text), no_nul(rule)))


def dead_letters(conn, schema, group):
    """What group dead-lettered, in the order refused."""
    if not table_exists(conn, f"{schema}.dead_letters"):
        return []
    with conn.cursor() as cur:
        cur.execute(f"""SELECT partition, "offset", rule FROM {schema}.dead_letters
                        WHERE group_id = %s ORDER BY id""", (group,))
        return [{"partition": p, "offset": o, "rule": r} for p, o, r in cur.fetchall()]


def no_nul(text):
    """PostgreSQL text refuses NUL, which an error quoting a hostile value may hold."""
    return text.replace("\x00", "\\u0000")
