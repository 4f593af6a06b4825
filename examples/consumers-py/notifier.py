#!/usr/bin/python3
"""Reference notifier of pin.promotion.purchase-changed (notifications'
PromotionPurchaseChangedConsumer) on librdkafka: tells the buying company when
its promotion starts (Active) and ends (Expired, Cancelled), each exactly once,
never for a stale version. The notice goes into notifier.notices, the service's
own outbox, in the transaction that records the message id and the version; a
sender (not part of the example) delivers from there.
See README.md; ./notifier.py --help."""

import consumer
import store

SCHEMA = "notifier"

# What the buyer is told, by status (the design document's texts).
NOTICES = {
    "Active": "продвижение запущено",
    "Expired": "срок истёк",
    "Cancelled": "отменено",
}

DDL = f"""
CREATE TABLE IF NOT EXISTS {SCHEMA}.notices (
  id          bigserial PRIMARY KEY,
  message_id  uuid NOT NULL,
  tenant_id   uuid NOT NULL,
  purchase_id uuid NOT NULL,
  status      text NOT NULL,
  version     bigint NOT NULL,
  ends_at     timestamptz NOT NULL,
  text        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
"""


def apply(cur, event, ctx):
    p = event.payload
    if event.origin == "snapshot":
        # A redelivery, not a change: the buyer heard of this state already, or
        # it is too late to tell. Its version is recorded all the same.
        ctx.log("snapshot not notified")
        return
    text = NOTICES.get(p["status"])
    if text is None:
        ctx.log("no notice for this status")  # Pending, or a status this consumer predates
        return
    cur.execute(
        f"""INSERT INTO {SCHEMA}.notices (message_id, tenant_id, purchase_id, status, version, ends_at, text)
            VALUES (%s, %s, %s, %s, %s, %s, %s)""",
        (event.message_id, p["tenantId"], p["purchaseId"], p["status"], p["version"], p["endsAt"], text))
    ctx.log("notice queued", text=text)


def effects(conn):
    rows = store.rows_of(conn, f"{SCHEMA}.notices",
                         f"SELECT purchase_id, status, version FROM {SCHEMA}.notices ORDER BY id")
    return [{"purchaseId": pid, "status": status, "version": version} for pid, status, version in rows]

if __name__ == "__main__":
    consumer.main({"name": "notifier", "schema": SCHEMA, "ddl": DDL, "apply": apply, "effects": effects})
