'use strict';
// Reference billing consumer of pin.promotion.purchase-changed
// (BillingPromotionPurchaseChangedConsumer): charges a purchase's price when it
// becomes Active and refunds that charge, as its reversal, when it is
// Cancelled. Dedupes by messageId, keeps the version guard, never refunds what
// it has not charged and never charges a purchase it already saw end.
// The semantics and why: README.md; `node billing.js --help`.

const { main, uuidOrNull } = require('./lib/consumer');

const SCHEMA = 'billing';

main({
  name: 'billing',
  schema: SCHEMA,
  variants: {
    'no-dedupe': 'neither the messageId inbox, the version guard nor the one-charge check: each delivery of an Active charges',
    'no-version-guard': 'messageId inbox only: an Active replayed after its Cancelled charges a cancelled purchase',
    'commit-before-write': 'commits the offset before writing the charge: a crash in between loses it',
    'refund-uncharged': 'refunds every Cancelled, charged or not',
    'no-bounds': 'takes any JSON with ids as an event: records outside the contract bounds charge',
  },
  // One row per money movement. A reversal points at the charge it undoes.
  ddl: `
CREATE TABLE IF NOT EXISTS ${SCHEMA}.ledger (
  id          bigserial PRIMARY KEY,
  purchase_id uuid NOT NULL,
  tenant_id   uuid,
  kind        text NOT NULL CHECK (kind IN ('charge', 'reversal')),
  status      text NOT NULL,
  version     bigint NOT NULL,
  amount      numeric(14, 2) NOT NULL,
  currency    text,
  message_id  uuid NOT NULL,
  reverses    bigint REFERENCES ${SCHEMA}.ledger (id),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ledger_purchase ON ${SCHEMA}.ledger (purchase_id);`,

  async apply(tx, event, ctx) {
    const p = event.envelope.payload;
    const entry = (kind, amount, reverses) => tx.query(
      `INSERT INTO ${SCHEMA}.ledger (purchase_id, tenant_id, kind, status, version, amount, currency, message_id, reverses)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
      [p.purchaseId, uuidOrNull(p.tenantId), kind, p.status, p.version, amount,
        p.price?.currency?.isoCode ?? null, event.messageId, reverses]);
    // The purchase's charge and its reversal so far. The version guard's row
    // lock (held since the guard) keeps another instance out meanwhile.
    const rows = (await tx.query(
      `SELECT id, kind, amount, reverses FROM ${SCHEMA}.ledger WHERE purchase_id = $1 ORDER BY id`, [p.purchaseId])).rows;
    const charge = rows.find((r) => r.kind === 'charge');
    const refunded = charge && rows.some((r) => r.kind === 'reversal' && r.reverses === charge.id);

    switch (p.status) {
      case 'Active': {
        if (charge && ctx.broken !== 'no-dedupe') {
          ctx.log('already charged');
          return;
        }
        // The amount is decimal(14,2) (at most 15 significant digits, which a
        // double holds exactly), so toFixed(2) gives back the number's text.
        const amount = Number(p.price?.amount ?? 0).toFixed(2);
        await entry('charge', amount, null);
        ctx.log('charged', { amount });
        return;
      }
      case 'Cancelled': {
        if (!charge) {
          if (ctx.broken === 'refund-uncharged') {
            await entry('reversal', Number(p.price?.amount ?? 0).toFixed(2), null);
            ctx.log('refunded');
            return;
          }
          ctx.log('cancelled before any charge: nothing to refund');
          return;
        }
        if (refunded) {
          ctx.log('already refunded');
          return;
        }
        // The refund is what was charged, not the price the event carries now.
        await entry('reversal', charge.amount, charge.id);
        ctx.log('refunded', { amount: charge.amount });
        return;
      }
      case 'Expired':
        ctx.log('expired: the charge stands'); // the promotion ran its course
        return;
      default:
        ctx.log('no money moves for this status'); // Pending, or a status this consumer predates
    }
  },

  async effects(pool) {
    const r = await pool.query(`SELECT purchase_id, status, version, kind FROM ${SCHEMA}.ledger ORDER BY id`);
    return r.rows.map((row) => {
      const line = { purchaseId: row.purchase_id, status: row.status, version: Number(row.version) };
      if (row.kind === 'reversal') line.kind = 'reversal';
      return line;
    });
  },
});
