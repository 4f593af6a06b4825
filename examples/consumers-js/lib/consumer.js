'use strict';
// The loop both reference consumers share: read a record, write its effect and
// the dedupe state in one PostgreSQL transaction, THEN commit the offset. A
// SIGKILL anywhere leaves either nothing written (the record comes again) or
// everything written and the offset behind (it comes again and is a duplicate).

const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs');
const SnappyCodec = require('kafkajs-snappy');
const pg = require('pg');
const { decode, Refused } = require('./record');

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// kafkajs decodes only gzip by itself; a broker or producer may hand over
// snappy batches (franz-go's default), so register it.
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec;

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/pin_examples?sslmode=disable';

function log(level, msg, fields = {}) {
  process.stderr.write(JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields }) + '\n');
}

function usage(name, variants) {
  return `usage: node ${name}.js [--effects | --dead-letters] [--broken VARIANT]\n` +
    `  --effects         print the side effects so far, one JSON object a line, and exit\n` +
    `  --dead-letters    print the records refused so far, one JSON object a line, and exit\n` +
    `  --broken VARIANT  run a deliberately broken variant (also PIN_EXAMPLE_BROKEN): ${Object.keys(variants).join(', ')}\n` +
    `environment: PIN_EXAMPLE_DATABASE_URL (default ${DEFAULT_DATABASE_URL}),\n` +
    `  PIN_CONTRACT_BROKERS (default 127.0.0.1:9092), PIN_CONTRACT_TOPIC, PIN_CONTRACT_GROUP\n`;
}

function parseArgs(argv, name, variants) {
  const opts = { effects: false, deadLetters: false, broken: process.env.PIN_EXAMPLE_BROKEN || '' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--effects') opts.effects = true;
    else if (a === '--dead-letters') opts.deadLetters = true;
    else if (a === '--broken') opts.broken = argv[++i] ?? '';
    else if (a.startsWith('--broken=')) opts.broken = a.slice('--broken='.length);
    else if (a === '--help' || a === '-h') { process.stdout.write(usage(name, variants)); process.exit(0); }
    else { process.stderr.write(`${name}: unknown argument ${JSON.stringify(a)}\n` + usage(name, variants)); process.exit(2); }
  }
  if (opts.broken !== '' && !(opts.broken in variants)) {
    process.stderr.write(`${name}: unknown broken variant ${JSON.stringify(opts.broken)}; known: ${Object.keys(variants).join(', ')}\n`);
    process.exit(2);
  }
  return opts;
}

// openPool connects to PIN_EXAMPLE_DATABASE_URL, creating the database when
// it does not exist yet, so a new consumer group needs nothing prepared.
async function openPool(name) {
  const url = process.env.PIN_EXAMPLE_DATABASE_URL || DEFAULT_DATABASE_URL;
  let parsed;
  try { parsed = new URL(url); } catch { failConfig(name, `PIN_EXAMPLE_DATABASE_URL: not a URL: ${JSON.stringify(url)}`); }
  let pool = new pg.Pool({ connectionString: url, max: 2 });
  try {
    (await pool.connect()).release();
  } catch (err) {
    if (err.code !== '3D000') throw err; // 3D000: invalid_catalog_name, the database is missing
    await pool.end();
    const database = decodeURIComponent(parsed.pathname.slice(1));
    const admin = new URL(url);
    admin.pathname = '/postgres';
    const c = new pg.Client({ connectionString: admin.toString() });
    await c.connect();
    try {
      await c.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}`);
      log('info', 'database created', { database });
    } catch (e) {
      // Created meanwhile by another instance: 42P04, or 23505 when both
      // reached the catalog at the same moment.
      if (e.code !== '42P04' && e.code !== '23505') throw e;
    } finally {
      await c.end();
    }
    pool = new pg.Pool({ connectionString: url, max: 2 });
  }
  return pool;
}

function failConfig(name, line) {
  process.stderr.write(`${name}: ${line}\n`);
  process.exit(2);
}

// The tables every consumer has beside its own: the message ids it took, the
// last version applied per purchase, and the records it refused.
function commonDDL(schema) {
  return `
CREATE SCHEMA IF NOT EXISTS ${schema};
CREATE TABLE IF NOT EXISTS ${schema}.inbox (
  message_id  uuid PRIMARY KEY,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS ${schema}.purchase_versions (
  purchase_id uuid PRIMARY KEY,
  version     bigint NOT NULL,
  status      text NOT NULL
);
CREATE TABLE IF NOT EXISTS ${schema}.dead_letters (
  id         bigserial PRIMARY KEY,
  topic      text NOT NULL,
  partition  int NOT NULL,
  "offset"   bigint NOT NULL,
  key        bytea,
  value      bytea,
  headers    text NOT NULL, -- JSON; text, since jsonb refuses the escaped NUL a hostile header may hold
  error      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (topic, partition, "offset")
);`;
}

// Two instances starting together (a restart racing the old one's end) would
// collide on CREATE ... IF NOT EXISTS; the advisory lock serialises them.
async function migrate(pool, schema, ddl) {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`pin-example:${schema}`]);
    await c.query(commonDDL(schema) + ddl);
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    c.release();
  }
}

/**
 * guard is the version guard: in one statement (so two instances racing on a
 * purchase cannot both pass) it records version as the purchase's last applied
 * one, and returns false (stale) when version is not above it. The row stays
 * locked until the transaction ends, which serialises the purchase's effects.
 */
async function guard(tx, schema, purchaseId, version, status) {
  const r = await tx.query(
    `INSERT INTO ${schema}.purchase_versions AS v (purchase_id, version, status) VALUES ($1, $2, $3)
     ON CONFLICT (purchase_id) DO UPDATE SET version = EXCLUDED.version, status = EXCLUDED.status
     WHERE v.version < EXCLUDED.version`,
    [purchaseId, version, status]);
  return r.rowCount === 1;
}

// noNUL escapes NUL, which a PostgreSQL text column refuses and an error
// quoting a hostile value may hold.
function noNUL(s) {
  return s.replace(/\u0000/g, '\\u0000');
}

function headersJSON(headers) {
  const out = {};
  for (const [k, v] of Object.entries(headers || {})) {
    out[k] = Buffer.isBuffer(v) ? v.toString('utf8') : Array.isArray(v) ? v.map(String) : String(v);
  }
  return out;
}

/**
 * run is a consumer's main: --effects prints its effects; otherwise it
 * consumes the topic until SIGTERM. spec: {name, schema, ddl, variants,
 * effects(pool) -> rows, apply(tx, event, ctx) -> void}.
 */
async function run(spec) {
  const opts = parseArgs(process.argv.slice(2), spec.name, spec.variants);
  const pool = await openPool(spec.name);
  await migrate(pool, spec.schema, spec.ddl);
  if (opts.effects) {
    for (const line of await spec.effects(pool)) process.stdout.write(JSON.stringify(line) + '\n');
    await pool.end();
    return;
  }
  if (opts.deadLetters) {
    // What `pin contract verify --dead-letters` reads: where each refused record was, and the rule.
    const r = await pool.query(`SELECT partition, "offset", error FROM ${spec.schema}.dead_letters ORDER BY id`);
    for (const d of r.rows) {
      process.stdout.write(JSON.stringify({ partition: d.partition, offset: Number(d.offset), rule: d.error }) + '\n');
    }
    await pool.end();
    return;
  }
  const broken = opts.broken;
  if (broken) log('warn', 'running a deliberately broken variant', { variant: broken, what: spec.variants[broken] });

  const brokers = (process.env.PIN_CONTRACT_BROKERS || '127.0.0.1:9092').split(',').map((s) => s.trim()).filter(Boolean);
  const topic = process.env.PIN_CONTRACT_TOPIC || 'pin.promotion.purchase-changed.v1';
  const groupId = process.env.PIN_CONTRACT_GROUP || `pin-example-${spec.name}`;
  const sessionTimeout = Number(process.env.PIN_EXAMPLE_SESSION_TIMEOUT_MS || 10000);
  // kafkajs logs to stdout by default; stdout is left to --effects.
  const logCreator = () => ({ level, log: entry }) => {
    const { message, ...rest } = entry;
    log(level === logLevel.ERROR ? 'error' : level === logLevel.WARN ? 'warn' : 'info', `kafkajs: ${message}`, rest);
  };
  const kafka = new Kafka({ clientId: `pin-example-${spec.name}`, brokers, logLevel: logLevel.WARN, logCreator });
  const consumer = kafka.consumer({ groupId, sessionTimeout, heartbeatInterval: Math.min(3000, sessionTimeout / 3) });

  const stop = async (signal) => {
    log('info', 'stopping', { signal });
    await consumer.disconnect().catch(() => {});
    await pool.end().catch(() => {});
    process.exit(0);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  const commit = (partition, offset) =>
    consumer.commitOffsets([{ topic, partition, offset: (BigInt(offset) + 1n).toString() }]);

  // kafkajs restarts itself after a retriable failure; after any other it
  // stops consuming, and a process that consumes nothing must not look alive.
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (payload.restart) return;
    log('error', 'consumer crashed, not restarting', { error: String(payload.error) });
    process.exit(1);
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  log('info', 'consuming', { topic, groupId, brokers });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const at = { partition, offset: message.offset };
      // Broken: the offset is committed before the effect is written, so a
      // crash in between loses the record for good.
      if (broken === 'commit-before-write') await commit(partition, message.offset);
      const tx = await pool.connect();
      try {
        await tx.query('BEGIN');
        await handle(tx, spec, broken, topic, partition, message, at);
        await tx.query('COMMIT');
      } catch (err) {
        await tx.query('ROLLBACK').catch(() => {});
        throw err; // nothing written, the offset not committed: kafkajs retries the record
      } finally {
        tx.release();
      }
      if (broken !== 'commit-before-write') await commit(partition, message.offset);
    },
  });
}

async function handle(tx, spec, broken, topic, partition, message, at) {
  let event;
  try {
    event = broken === 'no-bounds' ? lenientDecode(message) : decode(message);
  } catch (err) {
    if (!(err instanceof Refused)) throw err;
    await tx.query(
      `INSERT INTO ${spec.schema}.dead_letters (topic, partition, "offset", key, value, headers, error)
       VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (topic, partition, "offset") DO NOTHING`,
      [topic, partition, message.offset, message.key, message.value, JSON.stringify(headersJSON(message.headers)), noNUL(err.message)]);
    log('warn', 'record dead-lettered', { ...at, error: err.message });
    return;
  }
  const p = event.envelope.payload;
  const fields = { ...at, message_id: event.messageId, purchase_id: p.purchaseId, status: p.status, version: p.version, origin: event.origin };
  if (broken !== 'no-dedupe') {
    const fresh = await tx.query(
      `INSERT INTO ${spec.schema}.inbox (message_id) VALUES ($1) ON CONFLICT DO NOTHING`, [event.messageId]);
    if (fresh.rowCount === 0) {
      log('info', 'duplicate skipped', fields);
      return;
    }
  }
  if (broken !== 'no-dedupe' && broken !== 'no-version-guard') {
    if (!(await guard(tx, spec.schema, p.purchaseId, p.version, p.status))) {
      log(event.origin === 'snapshot' ? 'debug' : 'info', 'stale event skipped', fields);
      return;
    }
  }
  await spec.apply(tx, event, { broken, log: (msg, more) => log('info', msg, { ...fields, ...more }) });
}

// The no-bounds variant: whatever carries ids, a status and a version it can
// store is taken as an event, whatever else it holds (5000 targets, a negative
// amount, endsAt before startsAt, another event type).
function lenientDecode(message) {
  let envelope;
  try { envelope = JSON.parse(message.value.toString('utf8')); } catch (err) { throw new Refused(`value: not JSON: ${err.message}`); }
  const p = (envelope && envelope.payload) || {};
  if (!UUID.test(envelope.messageId) || !UUID.test(p.purchaseId) || typeof p.status !== 'string' || !Number.isInteger(p.version)) {
    throw new Refused('value: no message id, purchase id, status or version to store');
  }
  return { messageId: envelope.messageId, origin: 'transition', envelope: { ...envelope, payload: p } };
}

function main(spec) {
  run(spec).catch((err) => {
    log('error', 'consumer stopped', { error: err.stack || String(err) });
    process.exit(1);
  });
}

// uuidOrNull keeps a value a uuid column takes; only the no-bounds variant
// hands over anything else.
function uuidOrNull(v) {
  return typeof v === 'string' && UUID.test(v) ? v : null;
}

module.exports = { main, log, uuidOrNull };
