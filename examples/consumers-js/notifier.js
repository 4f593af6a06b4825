'use strict';
// Reference notifier of pin.promotion.purchase-changed (notifications'
// PromotionPurchaseChangedConsumer): tells the buying company when its
// promotion starts (Active) and ends (Expired, Cancelled), each exactly once,
// never for a stale version. The notice goes into notifier.notices, the
// service's own outbox, in the transaction that records the message id and the
// version; a sender (not part of the example) delivers from there.
// See README.md; `node notifier.js --help`.

const { main, uuidOrNull } = require('./lib/consumer');

const SCHEMA = 'notifier';

// What the buyer is told, by status (the design document's texts).
const NOTICES = {
  Active: 'продвижение запущено',
  Expired: 'срок истёк',
  Cancelled: 'отменено',
};

main({
  name: 'notifier',
  schema: SCHEMA,
  variants: {
    'no-dedupe': 'neither the messageId inbox nor the version guard: each delivery notifies',
    'no-version-guard': 'messageId inbox only: an older event arriving after a newer one still notifies',
    'commit-before-write': 'commits the offset before writing the notice: a crash in between loses it',
    'no-bounds': 'takes any JSON with ids as an event: records outside the contract bounds notify',
  },
  ddl: `
CREATE TABLE IF NOT EXISTS ${SCHEMA}.notices (
  id          bigserial PRIMARY KEY,
  message_id  uuid NOT NULL,
  tenant_id   uuid,
  purchase_id uuid NOT NULL,
  status      text NOT NULL,
  version     bigint NOT NULL,
  ends_at     timestamptz,
  text        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);`,

  async apply(tx, event, ctx) {
    const p = event.envelope.payload;
    if (event.origin === 'snapshot') {
      // A redelivery, not a change: the buyer heard of this state already, or
      // it is too late to tell. Its version is recorded all the same.
      ctx.log('snapshot not notified');
      return;
    }
    const text = NOTICES[p.status];
    if (text === undefined) {
      ctx.log('no notice for this status'); // Pending, or a status this consumer predates
      return;
    }
    await tx.query(
      `INSERT INTO ${SCHEMA}.notices (message_id, tenant_id, purchase_id, status, version, ends_at, text)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [event.messageId, uuidOrNull(p.tenantId), p.purchaseId, p.status, p.version, Number.isNaN(Date.parse(p.endsAt)) ? null : p.endsAt, text]);
    ctx.log('notice queued', { text });
  },

  async effects(pool) {
    const r = await pool.query(`SELECT purchase_id, status, version FROM ${SCHEMA}.notices ORDER BY id`);
    return r.rows.map((row) => ({ purchaseId: row.purchase_id, status: row.status, version: Number(row.version) }));
  },
});
