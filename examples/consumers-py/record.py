"""From a Kafka record to an event of pin.promotion.purchase-changed, or the
rule it broke (the consumer dead-letters it).

The rules are the contract's (docs/contracts/purchase-changed.md): the released
JSON Schema for the value's bounds, plus what a schema cannot say (the record
agrees with itself, endsAt after startsAt, the event type, the origin header).
"""

import json
import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

EVENT_TYPE = "pin.promotion.purchase-changed"
CONTRACT_VERSION = 1
KNOWN = {
    "status": {"Pending", "Active", "Expired", "Cancelled"},
    "paymentStatus": {"NotRequired", "Pending", "Paid", "Refunded"},
    "packageKind": {"ProjectBoost", "PropertyObjectBoost", "PostBoost"},
    "targetKind": {"Project", "PropertyObject", "Post"},
}

# The canonical schema, read where the repository keeps it; a team that copies
# this example copies the file and points PIN_EXAMPLE_SCHEMA at it.
SCHEMA_FILE = os.environ.get("PIN_EXAMPLE_SCHEMA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "contracts",
    "pin.promotion.purchase-changed.v1.schema.json")


class Refused(Exception):
    """A record that can never be applied; its text names the rule it broke."""


class UnknownValue(Exception):
    """Raised only by the raise-on-unknown variant: an enum value this consumer predates."""


@dataclass
class Event:
    message_id: str
    origin: str  # "transition" or "snapshot"
    envelope: dict

    @property
    def payload(self):
        return self.envelope["payload"]


def warn(msg, **fields):
    sys.stderr.write(json.dumps({"level": "warn", "msg": msg, **fields}, default=str) + "\n")


def header(headers, name):
    """The first value of header name as text, or None."""
    for key, value in headers or []:
        if key == name:
            return "" if value is None else value.decode("utf-8", "backslashreplace")
    return None


def decode(key, value, headers, raise_on_unknown=False):
    """decode returns the Event a record carries, or raises Refused naming the
    rule it broke. key and value are bytes or None; headers a list of
    (name, bytes) as confluent-kafka gives them."""
    # Another event type is not this contract's, whatever the rest holds.
    event_type = header(headers, "event_type")
    if event_type is not None and event_type != EVENT_TYPE:
        raise Refused(f"unknown event type: event_type header {json.dumps(event_type)}")
    origin_header = header(headers, "event_origin")
    if origin_header is None or origin_header == "transition":
        origin = "transition"
    elif origin_header == "snapshot":
        origin = "snapshot"
    else:
        raise Refused(f"unknown event origin: event_origin header {json.dumps(origin_header)}")

    try:
        # Amounts as decimals, never binary floating point (the contract's Formats).
        envelope = json.loads((value or b"").decode("utf-8"), parse_float=Decimal,
                              parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as err:
        raise Refused(f"value: not JSON: {err}") from None
    if not isinstance(envelope, dict):
        raise Refused("value: not a JSON object")
    if envelope.get("eventType") != EVENT_TYPE:
        raise Refused(f"unknown event type: eventType {json.dumps(envelope.get('eventType'), default=str)}")
    errors = _SCHEMA.errors(envelope)
    if errors:
        raise Refused("out of bounds: " + "; ".join(errors))
    p = envelope["payload"]
    if _time(p["endsAt"]) <= _time(p["startsAt"]):
        raise Refused("out of bounds: payload.endsAt: must be after startsAt")
    record_key = (key or b"").decode("utf-8", "backslashreplace")
    if record_key != envelope["aggregateId"] or envelope["aggregateId"] != p["purchaseId"]:
        raise Refused(f"record mismatch: key {json.dumps(record_key)}, aggregateId {envelope['aggregateId']} "
                      f"and payload.purchaseId {p['purchaseId']} must be equal")
    message_id = header(headers, "message_id")
    if message_id != envelope["messageId"]:
        raise Refused(f"record mismatch: message_id header {json.dumps(message_id)} "
                      f"must equal messageId {envelope['messageId']}")

    # Compatibility: another contract version or an unknown enum value is kept
    # and warned about, never refused.
    if envelope["contractVersion"] != CONTRACT_VERSION:
        warn("event of another contract version, decoding as version 1",
             contract_version=envelope["contractVersion"], message_id=envelope["messageId"])
    unknown = [(f"payload.{f}", p[f]) for f in ("status", "paymentStatus", "packageKind") if p[f] not in KNOWN[f]]
    unknown += [(f"payload.targets[{i}].targetKind", t["targetKind"])
                for i, t in enumerate(p["targets"]) if t["targetKind"] not in KNOWN["targetKind"]]
    for field, value in unknown:
        if raise_on_unknown:
            raise UnknownValue(f"unknown enum value {value} in {field}, raised instead of kept")
        warn("unknown enum value kept as is", field=field, value=value, message_id=envelope["messageId"])
    p["version"] = int(p["version"])
    return Event(message_id=envelope["messageId"], origin=origin, envelope=envelope)


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _time(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class _Schema:
    """The subset of JSON Schema draft 2020-12 the contract's schema uses. A
    keyword outside it stops the consumer at start: a schema it cannot read
    whole must not pass records it would refuse."""

    ANNOTATIONS = {"$schema", "$id", "$defs", "$comment", "title", "description", "examples"}
    CHECKS = {"type", "required", "properties", "$ref", "const", "enum", "anyOf", "not", "pattern",
              "format", "minLength", "minimum", "maximum", "multipleOf", "items", "minItems",
              "maxItems", "uniqueItems"}

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.root = json.load(f, parse_float=Decimal)
        self._check_keywords(self.root, "#")

    def _check_keywords(self, node, where):
        unknown = set(node) - self.ANNOTATIONS - self.CHECKS
        if unknown:
            raise SystemExit(f"{SCHEMA_FILE}: {where}: keywords this consumer cannot check: {sorted(unknown)}")
        for name, sub in node.get("$defs", {}).items():
            self._check_keywords(sub, f"{where}/$defs/{name}")
        for name, sub in node.get("properties", {}).items():
            self._check_keywords(sub, f"{where}/properties/{name}")
        for i, sub in enumerate(node.get("anyOf", [])):
            self._check_keywords(sub, f"{where}/anyOf/{i}")
        for kw in ("items", "not"):
            if kw in node:
                self._check_keywords(node[kw], f"{where}/{kw}")

    def errors(self, value):
        out = []
        self._walk(self.root, value, "value", out)
        return list(dict.fromkeys(out))

    def _walk(self, s, v, path, out):
        if "$ref" in s:
            node = self.root
            for part in s["$ref"].removeprefix("#/").split("/"):
                node = node[part]
            self._walk(node, v, path, out)
        if "anyOf" in s:
            branch_errors = []
            for branch in s["anyOf"]:
                errs = []
                self._walk(branch, v, path, errs)
                if not errs:
                    break
                branch_errors = errs  # the last branch, the open one, says it best
            else:
                out.extend(branch_errors)
        if "not" in s:
            errs = []
            self._walk(s["not"], v, path, errs)
            if not errs:
                what = f"be {s['not']['const']}" if "const" in s["not"] else "match its `not`"
                out.append(f"{path}: must not {what}")
        if "const" in s and not _same(v, s["const"]):
            out.append(f"{path}: must be {json.dumps(s['const'], default=str)}")
        if "enum" in s and not any(_same(v, e) for e in s["enum"]):
            out.append(f"{path}: must be one of {', '.join(map(str, s['enum']))}")
        if "type" in s and not _is_type(v, s["type"]):
            out.append(f"{path}: must be {s['type']}")
            return  # the other keywords are about a value of that type
        if isinstance(v, str):
            if "minLength" in s and len(v) < s["minLength"]:
                out.append(f"{path}: must not be empty" if s["minLength"] == 1 else
                           f"{path}: must be at least {s['minLength']} characters long")
            if "pattern" in s and not re.search(s["pattern"], v):
                out.append(f"{path}: must match {s['pattern']}")
            if s.get("format") == "date-time" and not _is_time(v):
                out.append(f"{path}: must be a date-time")
        if _is_type(v, "number"):
            if "minimum" in s and v < s["minimum"]:
                out.append(f"{path}: must be >= {s['minimum']}")
            if "maximum" in s and v > s["maximum"]:
                out.append(f"{path}: must be <= {s['maximum']}")
            if "multipleOf" in s and Decimal(v) % Decimal(s["multipleOf"]) != 0:
                out.append(f"{path}: must be a multiple of {s['multipleOf']}")
        if isinstance(v, dict):
            for name in s.get("required", []):
                if name not in v:
                    out.append(f"{path}: must have property {name}")
            for name, sub in s.get("properties", {}).items():
                if name in v:
                    self._walk(sub, v[name], f"{path}.{name}".removeprefix("value."), out)
        if isinstance(v, list):
            if "minItems" in s and len(v) < s["minItems"]:
                out.append(f"{path}: must have at least {s['minItems']} items, has {len(v)}")
            if "maxItems" in s and len(v) > s["maxItems"]:
                out.append(f"{path}: must have at most {s['maxItems']} items, has {len(v)}")
            if s.get("uniqueItems") and len({_canonical(x) for x in v}) < len(v):
                out.append(f"{path}: must not hold an item twice")
            if "items" in s and len(v) <= 100:  # past the bound, each item's errors add nothing
                for i, x in enumerate(v):
                    self._walk(s["items"], x, f"{path}[{i}]", out)


def _is_type(v, t):
    if t == "integer":
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, Decimal) and v == v.to_integral_value())
    if t == "number":
        return isinstance(v, (int, Decimal)) and not isinstance(v, bool)
    return isinstance(v, {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}[t])


def _same(a, b):
    # JSON's true is not 1, though Python's is.
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _is_time(text):
    try:
        _time(text)
        return True
    except ValueError:
        return False


def _canonical(v):
    if isinstance(v, dict):
        return ("o", tuple(sorted((k, _canonical(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("a", tuple(_canonical(x) for x in v))
    if _is_type(v, "number"):
        return ("n", Decimal(v).normalize())
    return (type(v).__name__, v)


_SCHEMA = _Schema(SCHEMA_FILE)
