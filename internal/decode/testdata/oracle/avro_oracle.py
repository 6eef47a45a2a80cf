"""Avro oracle for internal/decode's differential test.

Writes to the directory given as argv[1]: schema.avsc, and cases.json, a
list of {"payload": base64, "bare": ..., "tagged": ...}. Each payload is
fastavro's schemaless_writer encoding of a record; bare and tagged are what
fastavro's schemaless_reader decodes from that payload, rendered by the
mappings of docs/decoding.md in this script's own code. Markers the Go side
compares specially: {"$decimal": "12.30"} (the exact number text) and
{"$f32": x} (equal as float32).
"""
import base64
import datetime
import decimal
import io
import json
import math
import random
import sys
import uuid

import fastavro

INNER = {"type": "record", "name": "Inner", "namespace": "t", "fields": [
    {"name": "n", "type": "long"}, {"name": "s", "type": "string"}]}
COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "Blue_3"]}
FIX4 = {"type": "fixed", "name": "Fix4", "size": 4}
DECFIX = {"type": "fixed", "name": "DecFix", "size": 16, "logicalType": "decimal", "precision": 30, "scale": 5}

SCHEMA = {"type": "record", "name": "Everything", "namespace": "t", "fields": [
    {"name": "nul", "type": "null"},
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "by", "type": "bytes"},
    {"name": "s", "type": "string"},
    {"name": "inner", "type": INNER},
    {"name": "color", "type": COLOR},
    {"name": "arr", "type": {"type": "array", "items": "long"}},
    {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "Inner"}}},
    {"name": "u", "type": ["null", "long", "string", "Inner", "double", "boolean",
                           {"type": "array", "items": "int"}]},
    {"name": "fx", "type": FIX4},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}},
    {"name": "dec0", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}},
    {"name": "decfix", "type": DECFIX},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "date", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tms", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "tus", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "tsms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsus", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "tsns", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
    {"name": "ltsms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    {"name": "ltsus", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "ltsns", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}},
    {"name": "opt_color", "type": ["null", "Color"]},
    {"name": "arr_rec", "type": {"type": "array", "items": "Inner"}},
]}

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
INT64 = (-(2**63), 2**63 - 1)
# Years 0001-9999 (Python's datetime): microseconds since the epoch.
TS_US = (-62135596800 * 10**6, 253402300799 * 10**6 + 999999)


def edge_floats():
    return [0.0, -0.0, 1.5, -2.25, 1e-7, 3.4028234663852886e38, 1.401298464324817e-45,
            float("nan"), float("inf"), float("-inf"), 0.1]


def edge_doubles():
    return [0.0, -0.0, 0.1, -1e300, 5e-324, 1.7976931348623157e308, 1e21, 1e-7,
            123456789.125, float("nan"), float("inf"), float("-inf")]


def rand_str(r):
    alphabet = "abcXYZ \"\\\n\t/é漢字😀\u2028\x01"
    return "".join(r.choice(alphabet) for _ in range(r.randint(0, 12)))


def rand_inner(r):
    return {"n": r.randint(*INT64), "s": rand_str(r)}


def record(r, k):
    """The k-th record: edge values for small k, random ones after."""
    def pick(edges, rnd):
        return edges[k] if k < len(edges) else rnd()
    f32 = pick(edge_floats(), lambda: r.uniform(-1e6, 1e6))
    dec_unscaled = pick([0, 1, -1, 5, -5, 1230, -1230, 10**36 - 1, -(10**36 - 1)],
                        lambda: r.randint(-(10**30), 10**30))
    decfix_unscaled = pick([0, -1, 10**29, -(10**29) + 7], lambda: r.randint(-(10**29), 10**29))
    unions = [None, 0, INT64[0], INT64[1], "", "ü", rand_inner(r), float("nan"), 2.5, True, False, [], [1, -2]]
    return {
        "nul": None,
        "b": k % 2 == 0,
        "i": pick([0, -1, 1, -(2**31), 2**31 - 1], lambda: r.randint(-(2**31), 2**31 - 1)),
        "l": pick([0, INT64[0], INT64[1], 2**53 + 1, -(2**53) - 1], lambda: r.randint(*INT64)),
        "f": f32,
        "d": pick(edge_doubles(), lambda: r.uniform(-1e12, 1e12)),
        "by": pick([b"", b"\x00", b"\xff\xfe", bytes(range(256))], lambda: r.randbytes(r.randint(0, 20))),
        "s": pick(["", "plain", "ü漢😀", "\u2028\u2029", "quote\" back\\ nl\n"], lambda: rand_str(r)),
        "inner": rand_inner(r),
        "color": ["RED", "GREEN", "Blue_3"][k % 3],
        "arr": [r.randint(*INT64) for _ in range(k % 4)],
        "m": {rand_str(r): [rand_inner(r) for _ in range(r.randint(0, 2))] for _ in range(k % 3)},
        "u": unions[k % len(unions)],
        "fx": r.randbytes(4),
        "dec": decimal.Decimal(dec_unscaled).scaleb(-2),
        "dec0": decimal.Decimal(pick([0, -1, 9999999999, -9999999999], lambda: r.randint(-(10**9), 10**9))),
        "decfix": decimal.Decimal(decfix_unscaled).scaleb(-5),
        "uid": str(uuid.UUID(int=r.getrandbits(128))),
        "date": pick([0, -1, -719162, 2932896, 19000], lambda: r.randint(-719162, 2932896)),
        "tms": pick([0, 86399999, 1], lambda: r.randint(0, 86399999)),
        "tus": pick([0, 86399999999, 1], lambda: r.randint(0, 86399999999)),
        "tsms": pick([0, -1, -1001, TS_US[0] // 1000, TS_US[1] // 1000], lambda: r.randint(TS_US[0] // 1000, TS_US[1] // 1000)),
        "tsus": pick([0, -1, -1000001, TS_US[0], TS_US[1]], lambda: r.randint(*TS_US)),
        "tsns": pick([0, -1, INT64[0], INT64[1]], lambda: r.randint(*INT64)),
        "ltsms": pick([0, -1], lambda: r.randint(TS_US[0] // 1000, TS_US[1] // 1000)),
        "ltsus": pick([0, -1], lambda: r.randint(*TS_US)),
        "ltsns": pick([0, -1, INT64[0], INT64[1]], lambda: r.randint(*INT64)),
        "opt_color": [None, "GREEN"][k % 2],
        "arr_rec": [rand_inner(r) for _ in range(k % 3)],
    }


def render_float(x, f32):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return {"$f32": x} if f32 else x


def frac(us_or_ns, digits):
    return "." + str(us_or_ns).rjust(digits, "0")


def render_ts(v, logical):
    local = logical.startswith("local-")
    z = "" if local else "Z"
    if logical.endswith("nanos"):  # fastavro leaves nanos as the long
        s, ns = divmod(v, 10**9)
        dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=s)
        return dt.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + frac(ns, 9) + z
    if not local:
        v = v.astimezone(UTC)
    base = "%04d-%02d-%02dT%02d:%02d:%02d" % (v.year, v.month, v.day, v.hour, v.minute, v.second)
    if logical.endswith("millis"):
        return base + frac(v.microsecond // 1000, 3) + z
    return base + frac(v.microsecond, 6) + z


def branch_of(schema, v):
    """The union branch fastavro's value v came from (by its Python type)."""
    for br in schema:
        t = br if isinstance(br, str) else br.get("type")
        if v is None and t == "null":
            return br
        if isinstance(v, bool):
            if t == "boolean":
                return br
            continue
        if isinstance(v, int) and t in ("long", "int"):
            return br
        if isinstance(v, float) and t in ("double", "float"):
            return br
        if isinstance(v, str) and t in ("string", "Color"):
            return br
        if isinstance(v, list) and t == "array":
            return br
        if isinstance(v, dict) and (t == "Inner" or t == "record"):
            return br
    raise ValueError("no branch for %r" % (v,))


NAMED = {"Inner": INNER, "t.Inner": INNER, "Color": COLOR, "Fix4": FIX4, "DecFix": DECFIX}


def branch_name(br):
    if isinstance(br, str):
        return {"Inner": "t.Inner", "Color": "t.Color"}.get(br, br)
    if br.get("type") in ("record", "enum", "fixed"):
        return "t." + br["name"]
    return br["type"]


def render(schema, v, tagged):
    if isinstance(schema, list):
        br = branch_of(schema, v)
        out = render(br, v, tagged)
        if tagged and v is not None:
            return {branch_name(br): out}
        return out
    if isinstance(schema, str):
        if schema in NAMED:
            return render(NAMED[schema], v, tagged)
        schema = {"type": schema}
    t, logical = schema["type"], schema.get("logicalType")
    if isinstance(t, (dict, list)) or t in NAMED:
        return render(t, v, tagged)
    if logical == "decimal":
        return {"$decimal": format(v, "f")}
    if logical == "uuid":
        return str(v)
    if logical == "date":
        return v.isoformat()
    if logical == "time-millis":
        return v.isoformat(timespec="milliseconds")
    if logical == "time-micros":
        return v.isoformat(timespec="microseconds")
    if logical and "timestamp" in logical:
        return render_ts(v, logical)
    if t in ("null", "boolean", "int", "long", "string") or t == "enum":
        return v
    if t == "float":
        return render_float(v, True)
    if t == "double":
        return render_float(v, False)
    if t in ("bytes", "fixed"):
        return base64.b64encode(v).decode()
    if t == "record":
        return {f["name"]: render(f["type"], v[f["name"]], tagged) for f in schema["fields"]}
    if t == "array":
        return [render(schema["items"], x, tagged) for x in v]
    if t == "map":
        return {k: render(schema["values"], x, tagged) for k, x in v.items()}
    raise ValueError("unknown type %r" % (schema,))


def main():
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
    parsed = fastavro.parse_schema(SCHEMA)
    r = random.Random(20261207)
    cases = []
    for k in range(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record(r, k))
        payload = buf.getvalue()
        got = fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)
        cases.append({"payload": base64.b64encode(payload).decode(),
                      "bare": render(SCHEMA, got, False), "tagged": render(SCHEMA, got, True)})
    with open(out + "/schema.avsc", "w") as f:
        json.dump(SCHEMA, f)
    with open(out + "/cases.json", "w") as f:
        json.dump(cases, f, allow_nan=False)


if __name__ == "__main__":
    main()
