"""The loop both reference consumers share: read a record, write its effect
and the dedupe state in one PostgreSQL transaction, THEN hand its offset to
librdkafka. A SIGKILL anywhere leaves either nothing written (the record comes
again) or everything written and the offset behind (it comes again and is a
duplicate). README.md says why each setting is what it is."""

import argparse
import json
import os
import random
import signal
import sys
import time
from datetime import datetime, timezone

import record
import store

COMMIT_MODES = {
    "store": "auto-commit on, auto offset store off: store_offsets() after the transaction's COMMIT, "
             "librdkafka commits what was stored every 5 s and at close",
    "sync": "auto-commit off: commit(asynchronous=False) after the transaction's COMMIT",
}

# The variants every consumer has; billing.py and notifier.py add their own.
VARIANTS = {
    "default-auto-commit": "librdkafka's defaults: offsets stored when polled, committed on the 5 s timer, "
                           "whether the write has happened or not",
    "memory-dedupe": "the inbox and the version guard in process memory: a restart forgets them",
    "commit-before-write": "commits the offset, then writes: killed in between, the effect is lost",
    "no-version-guard": "the messageId inbox only: an older event after a newer one acts",
    "raise-on-unknown": "raises on an enum value it does not know instead of keeping it: the consumer exits",
    "skip-refused": "refuses a record outside the contract's bounds but keeps no dead letter: it is gone unseen",
}


def log(level, msg, **fields):
    line = {"time": datetime.now(timezone.utc).isoformat(), "level": level, "msg": msg, **fields}
    sys.stderr.write(json.dumps(line, default=str, ensure_ascii=False) + "\n")
    sys.stderr.flush()


def parse_args(spec):
    variants = {**VARIANTS, **spec.get("variants", {})}
    p = argparse.ArgumentParser(
        prog=f"{spec['name']}.py",
        description=f"Reference {spec['name']} consumer of pin.promotion.purchase-changed on librdkafka.",
        epilog="environment: PIN_EXAMPLE_DATABASE_URL, PIN_CONTRACT_BROKERS, PIN_CONTRACT_TOPIC, PIN_CONTRACT_GROUP, "
               "PIN_EXAMPLE_SESSION_TIMEOUT_MS, PIN_EXAMPLE_MAX_POLL_INTERVAL_MS, PIN_EXAMPLE_BROKEN (README.md)")
    p.add_argument("--effects", action="store_true", help="print the effects so far, one JSON object a line, and exit")
    p.add_argument("--dead-letters", action="store_true",
                   help="print what the group dead-lettered so far, one JSON object a line, and exit")
    p.add_argument("--commit", choices=COMMIT_MODES, default="store",
                   help="how offsets are committed: " + "; ".join(f"{k}: {v}" for k, v in COMMIT_MODES.items()))
    p.add_argument("--slow-write", metavar="MIN-MAX", type=_millis_range,
                   help="make each write take MIN to MAX ms more (held inside the transaction)")
    p.add_argument("--broken", metavar="VARIANT", choices=variants, default=os.environ.get("PIN_EXAMPLE_BROKEN") or None,
                   help="run a deliberately broken variant: " + "; ".join(f"{k}: {v}" for k, v in variants.items()))
    return p.parse_args(), variants


def _millis_range(text):
    try:
        low, high = (int(x) for x in text.split("-", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want MIN-MAX in milliseconds, like 200-600") from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"{text!r}: want 0 <= MIN <= MAX")
    return low / 1000, high / 1000


def main(spec):
    """A consumer's main. spec: name, schema, ddl, variants, apply(cur, event, ctx), effects(conn) -> rows."""
    args, variants = parse_args(spec)
    group = os.environ.get("PIN_CONTRACT_GROUP") or f"pin-example-{spec['name']}"
    if args.effects or args.dead_letters:
        conn = store.connect_if_exists()
        rows = []
        if conn is not None:
            rows = spec["effects"](conn) if args.effects else store.dead_letters(conn, spec["schema"], group)
        for row in rows:
            sys.stdout.write(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n")
        return
    try:
        consume(spec, args, variants, group)
    except Exception as err:  # noqa: BLE001 — logged as one line, so the runner's stderr tail shows why
        log("error", "consumer stopped", error=f"{type(err).__name__}: {err}")
        sys.exit(1)


def consume(spec, args, variants, group):
    # Imported here: --effects and --dead-letters run at every commit the
    # verdict checks and need no Kafka client.
    from confluent_kafka import Consumer, KafkaException

    broken = args.broken
    if broken:
        log("warn", "running a deliberately broken variant", variant=broken, what=variants[broken])
    conn = store.connect(log)
    store.migrate(conn, spec["schema"], spec["ddl"])

    topic = os.environ.get("PIN_CONTRACT_TOPIC") or "pin.promotion.purchase-changed.v1"
    brokers = os.environ.get("PIN_CONTRACT_BROKERS") or "127.0.0.1:9092"
    session_ms = int(os.environ.get("PIN_EXAMPLE_SESSION_TIMEOUT_MS") or 10000)
    max_poll_ms = int(os.environ.get("PIN_EXAMPLE_MAX_POLL_INTERVAL_MS") or 20000)
    # The recipe: auto-commit on, but only of the offsets this loop stores after
    # each COMMIT; or no auto-commit and a synchronous commit after each COMMIT.
    # The broken variants: librdkafka's defaults (offsets stored as poll()
    # returns the records), or a synchronous commit before the write.
    auto_commit = args.commit == "store" and broken != "commit-before-write"
    auto_store = broken == "default-auto-commit"
    config = {
        "bootstrap.servers": brokers,
        "group.id": group,
        "client.id": f"pin-example-{spec['name']}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": auto_commit,
        "enable.auto.offset.store": auto_store,
        # How soon the group drops a killed member, and how long a rebalance
        # may wait for one to rejoin: README.md, "librdkafka on the embedded broker".
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": max(1000, session_ms // 3),
        "max.poll.interval.ms": max(max_poll_ms, session_ms),
    }
    consumer = Consumer(config)

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append("SIGTERM"))
    signal.signal(signal.SIGINT, lambda *_: stopping.append("SIGINT"))
    consumer.subscribe([topic])
    log("info", "consuming", topic=topic, group=group, brokers=brokers, commit=args.commit,
        session_timeout_ms=config["session.timeout.ms"], max_poll_interval_ms=config["max.poll.interval.ms"])

    memory = {"inbox": set(), "versions": {}, "charges": {}}  # the memory-dedupe variant's only state
    ctx = Context(broken=broken, memory=memory)
    while not stopping:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().fatal():
                raise KafkaException(msg.error())
            log("warn", "kafka", error=str(msg.error()))
            continue
        at = {"partition": msg.partition(), "offset": msg.offset()}
        if broken == "commit-before-write":
            consumer.commit(message=msg, asynchronous=False)
        with conn:  # one transaction: COMMIT on leaving, ROLLBACK on an exception
            with conn.cursor() as cur:
                handle(cur, spec, ctx, group, msg, at)
                if args.slow_write:
                    time.sleep(random.uniform(*args.slow_write))
        # Only now is the effect durable, so only now may the offset move past it.
        if broken in ("commit-before-write", "default-auto-commit"):
            continue
        try:
            if args.commit == "sync":
                consumer.commit(message=msg, asynchronous=False)
            else:
                consumer.store_offsets(message=msg)
        except KafkaException as err:
            # The partition was taken away meanwhile (a rebalance): its next
            # owner reads the record again, and the inbox finds it a duplicate.
            log("warn", "offset not kept", **at, error=str(err))
    log("info", "stopping", signal=stopping[0])
    consumer.close()  # commits what was stored, and leaves the group
    conn.close()


class Context:
    """What apply gets besides the event: the variant, and a log line with the record's fields."""

    def __init__(self, broken, memory):
        self.broken = broken
        self.memory = memory
        self.fields = {}

    def log(self, msg, **more):
        log("info", msg, **self.fields, **more)


def handle(cur, spec, ctx, group, msg, at):
    schema = spec["schema"]
    try:
        event = record.decode(msg.key(), msg.value(), msg.headers(),
                              raise_on_unknown=ctx.broken == "raise-on-unknown")
    except record.Refused as err:
        if ctx.broken == "skip-refused":
            log("warn", "record refused, not kept", **at, rule=str(err))
            return
        store.dead_letter(cur, schema, group, msg.topic(), msg.partition(), msg.offset(),
                          msg.key(), msg.value(), msg.headers(), str(err))
        log("warn", "record dead-lettered", **at, rule=str(err))
        return
    p = event.payload
    ctx.fields = {**at, "message_id": event.message_id, "purchase_id": p["purchaseId"], "status": p["status"],
                  "version": p["version"], "origin": event.origin}
    if ctx.broken == "memory-dedupe":
        if event.message_id in ctx.memory["inbox"]:
            ctx.log("duplicate skipped")
            return
        ctx.memory["inbox"].add(event.message_id)
        if ctx.memory["versions"].get(p["purchaseId"], 0) >= p["version"]:
            ctx.log("stale event skipped")
            return
        ctx.memory["versions"][p["purchaseId"]] = p["version"]
    else:
        if not store.take_message(cur, schema, event.message_id):
            ctx.log("duplicate skipped")
            return
        if ctx.broken != "no-version-guard" and not store.guard(cur, schema, p["purchaseId"], p["version"], p["status"]):
            ctx.log("stale event skipped")
            return
    spec["apply"](cur, event, ctx)

