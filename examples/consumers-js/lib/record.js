'use strict';
// From a Kafka record to an event of pin.promotion.purchase-changed, or the
// reason it can never be applied (the consumer dead-letters it). The rules are
// the contract's (docs/contracts/purchase-changed.md): the released JSON Schema
// for the value's bounds, plus what a schema cannot say (the record agrees with
// itself, endsAt after startsAt, the event type, the origin header).

const fs = require('node:fs');
const path = require('node:path');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

const EVENT_TYPE = 'pin.promotion.purchase-changed';
const CONTRACT_VERSION = 1;
const KNOWN = {
  status: ['Pending', 'Active', 'Expired', 'Cancelled'],
  paymentStatus: ['NotRequired', 'Pending', 'Paid', 'Refunded'],
  packageKind: ['ProjectBoost', 'PropertyObjectBoost', 'PostBoost'],
  targetKind: ['Project', 'PropertyObject', 'Post'],
};

// The canonical schema, read where the repository keeps it; a team that copies
// this example copies the file and points PIN_EXAMPLE_SCHEMA at it.
const SCHEMA_FILE = process.env.PIN_EXAMPLE_SCHEMA ||
  path.join(__dirname, '..', '..', '..', 'docs', 'contracts', 'pin.promotion.purchase-changed.v1.schema.json');

// multipleOfPrecision: amounts are decimals; 0.29 / 0.01 is not an integer in
// binary floating point, so the multipleOf 0.01 check allows a rounding error.
const ajv = new Ajv2020({ allErrors: true, strict: false, multipleOfPrecision: 6 });
addFormats(ajv);
const validate = ajv.compile(JSON.parse(fs.readFileSync(SCHEMA_FILE, 'utf8')));

/** A record that can never be applied; message names the rule it broke. */
class Refused extends Error {}

function header(message, name) {
  const v = message.headers && message.headers[name];
  if (v === undefined || v === null) return undefined;
  return Buffer.isBuffer(v) ? v.toString('utf8') : String(Array.isArray(v) ? v[0] : v);
}

function warn(fields) {
  process.stderr.write(JSON.stringify({ level: 'warn', ...fields }) + '\n');
}

/**
 * decode returns {messageId, origin, envelope} for a kafkajs message, or
 * throws Refused naming the rule the record broke.
 */
function decode(message) {
  // Another event type is not this contract's, whatever the rest holds.
  const eventTypeHeader = header(message, 'event_type');
  if (eventTypeHeader !== undefined && eventTypeHeader !== EVENT_TYPE) {
    throw new Refused(`unknown event type: event_type header ${JSON.stringify(eventTypeHeader)}`);
  }
  const originHeader = header(message, 'event_origin');
  let origin;
  if (originHeader === undefined || originHeader === 'transition') origin = 'transition';
  else if (originHeader === 'snapshot') origin = 'snapshot';
  else throw new Refused(`unknown event origin: event_origin header ${JSON.stringify(originHeader)}`);

  let envelope;
  try {
    envelope = JSON.parse(message.value ? message.value.toString('utf8') : '');
  } catch (err) {
    throw new Refused(`value: not JSON: ${err.message}`);
  }
  if (envelope === null || typeof envelope !== 'object' || Array.isArray(envelope)) {
    throw new Refused('value: not a JSON object');
  }
  if (envelope.eventType !== EVENT_TYPE) {
    throw new Refused(`unknown event type: eventType ${JSON.stringify(envelope.eventType)}`);
  }
  if (!validate(envelope)) {
    throw new Refused('out of bounds: ' + schemaErrors(validate.errors));
  }
  const p = envelope.payload;
  if (Date.parse(p.endsAt) <= Date.parse(p.startsAt)) {
    throw new Refused('out of bounds: payload.endsAt: must be after startsAt');
  }
  const key = message.key ? message.key.toString('utf8') : '';
  if (key !== envelope.aggregateId || envelope.aggregateId !== p.purchaseId) {
    throw new Refused(`record mismatch: key ${JSON.stringify(key)}, aggregateId ${envelope.aggregateId} and payload.purchaseId ${p.purchaseId} must be equal`);
  }
  const messageIdHeader = header(message, 'message_id');
  if (messageIdHeader !== envelope.messageId) {
    throw new Refused(`record mismatch: message_id header ${JSON.stringify(messageIdHeader ?? null)} must equal messageId ${envelope.messageId}`);
  }

  // Compatibility: another contract version or an unknown enum value is kept
  // and warned about, never refused.
  if (envelope.contractVersion !== CONTRACT_VERSION) {
    warn({ msg: 'event of another contract version, decoding as version 1', contract_version: envelope.contractVersion, message_id: envelope.messageId });
  }
  const unknown = [];
  for (const field of ['status', 'paymentStatus', 'packageKind']) {
    if (!KNOWN[field].includes(p[field])) unknown.push([`payload.${field}`, p[field]]);
  }
  p.targets.forEach((t, i) => {
    if (!KNOWN.targetKind.includes(t.targetKind)) unknown.push([`payload.targets[${i}].targetKind`, t.targetKind]);
  });
  for (const [field, value] of unknown) {
    warn({ msg: 'unknown enum value kept as is', field, value, message_id: envelope.messageId });
  }
  return { messageId: envelope.messageId, origin, envelope };
}

// "payload.targets: must NOT have more than 10 items": the path first, as the
// contract names the rules.
function schemaErrors(errors) {
  const seen = new Set();
  for (const e of errors) {
    // The open enums' anyOf reports each branch; the branch errors say it better.
    if (e.keyword === 'anyOf' || e.schemaPath.includes('/anyOf/0/')) continue;
    const where = e.instancePath.replace(/^\//, '').replace(/\/(\d+)(?=\/|$)/g, '[$1]').replace(/\//g, '.') || 'value';
    // The Uuid definition's `not: {const: nil}` would read "must NOT be valid".
    const message = e.keyword === 'not' && e.schemaPath.includes('/Uuid/') ? 'must not be the nil UUID' : e.message;
    seen.add(`${where}: ${message}`);
  }
  return [...seen].join('; ');
}

module.exports = { decode, Refused, EVENT_TYPE };
