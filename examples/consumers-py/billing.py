#!/usr/bin/python3
"""Reference billing consumer of pin.promotion.purchase-changed
(BillingPromotionPurchaseChangedConsumer) on librdkafka: charges a purchase's
price when it becomes Active and refunds that charge, as its reversal, when it
is Cancelled. Dedupes by messageId, keeps the version guard (ADR 0022), never
refunds what it has not charged and never charges a purchase it saw end.
The semantics and why: README.md; ./billing.py --help."""

import consumer
import store

SCHEMA = "billing"

# One row per money movement. A reversal points at the charge it undoes.
DDL = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA}.ledger (
  id          bigserial PRIMARY KEY,
  purchase_id uuid NOT NULL,
  tenant_id   uuid NOT NULL,
  kind        text NOT NULL CHECK (kind IN ('charge', 'reversal')),
  status      text NOT NULL,
  version     bigint NOT NULL,
  amount      numeric(14, 2) NOT NULL,
  currency    text NOT NULL,
  message_id  uuid NOT NULL,
  reverses    bigint REFERENCES {SCHEMA}.ledger (id),
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS ledger_purchase ON {SCHEMA}.ledger (purchase_id);
"""


def apply(cur, event, ctx):
    p = event.payload

    def entry(kind, amount, reverses):
        cur.execute(
            f"""INSERT INTO {SCHEMA}.ledger (purchase_id, tenant_id, kind, status, version, amount, currency, message_id, reverses)
                VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id""",
            (p["purchaseId"], p["tenantId"], kind, p["status"], p["version"], amount,
             p["price"]["currency"]["isoCode"], event.message_id, reverses))
        return cur.fetchone()[0]

    # The purchase's charge and its reversal so far. The version guard's row
    # lock (held since the guard) keeps another instance out meanwhile.
    if ctx.broken == "memory-dedupe":
        charge, refunded = ctx.memory["charges"].get(p["purchaseId"], (None, False))
    else:
        cur.execute(f"""SELECT id, amount FROM {SCHEMA}.ledger WHERE purchase_id = %s AND kind = 'charge'
                        ORDER BY id LIMIT 1""", (p["purchaseId"],))
        charge = cur.fetchone()
        refunded = False
        if charge:
            cur.execute(f"SELECT 1 FROM {SCHEMA}.ledger WHERE kind = 'reversal' AND reverses = %s", (charge[0],))
            refunded = cur.fetchone() is not None

    status = p["status"]
    if status == "Active":
        if charge:
            ctx.log("already charged")
            return
        amount = p["price"]["amount"]  # a Decimal: read as the decimal it is, never a float
        charge_id = entry("charge", amount, None)
        if ctx.broken == "memory-dedupe":
            ctx.memory["charges"][p["purchaseId"]] = ((charge_id, amount), False)
        ctx.log("charged", amount=amount)
    elif status == "Cancelled":
        if not charge:
            # A refund of nothing would pay the buyer money (Pending -> Cancelled,
            # or the Active came late and the version guard skipped it).
            ctx.log("cancelled before any charge: nothing to refund")
            return
        if refunded:
            ctx.log("already refunded")
            return
        # The refund is what was charged, not the price the event carries now.
        entry("reversal", charge[1], charge[0])
        if ctx.broken == "memory-dedupe":
            ctx.memory["charges"][p["purchaseId"]] = (charge, True)
        ctx.log("refunded", amount=charge[1])
    elif status == "Expired":
        ctx.log("expired: the charge stands")  # the promotion ran its course
    else:
        ctx.log("no money moves for this status")  # Pending, or a status this consumer predates


def effects(conn):
    rows = store.rows_of(conn, f"{SCHEMA}.ledger",
                         f"SELECT purchase_id, status, version, kind FROM {SCHEMA}.ledger ORDER BY id")
    lines = []
    for purchase_id, status, version, kind in rows:
        line = {"purchaseId": purchase_id, "status": status, "version": version}
        if kind == "reversal":
            line["kind"] = "reversal"  # a refund undoes the charge before it
        lines.append(line)
    return lines

if __name__ == "__main__":
    consumer.main({"name": "billing", "schema": SCHEMA, "ddl": DDL, "apply": apply, "effects": effects})
