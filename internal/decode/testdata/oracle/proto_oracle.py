"""Protobuf oracle for internal/decode's differential test.

argv[1]: the output directory; argv[2]: the number of records. Compiles
cases.proto with protoc (grpcio-tools), builds messages with the generated
classes, and writes cases.json: a list of {"payload": base64 of
SerializeToString, "indexes": the Confluent message-index path, "bare":
what Python's protobuf parses back from the payload, rendered by the
mappings of docs/decoding.md in this script's own code}. Markers as in
avro_oracle.py: {"$f32": x}.
"""
import base64
import datetime
import importlib
import json
import math
import os
import random
import shutil
import sys

from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
INT64 = (-(2**63), 2**63 - 1)
UINT64 = 2**64 - 1


def compile_proto(out):
    shutil.copy(os.path.join(HERE, "cases.proto"), out)
    inc = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    if protoc.main(["protoc", "-I" + out, "-I" + inc, "--python_out=" + out, os.path.join(out, "cases.proto")]) != 0:
        raise SystemExit("protoc failed")
    sys.path.insert(0, out)
    return importlib.import_module("cases_pb2")


def fl(x):
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def ts_text(seconds, nanos):
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    return dt.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + "." + str(nanos).rjust(9, "0") + "Z"


def dur_text(seconds, nanos):
    sign = "-" if seconds < 0 or nanos < 0 else ""
    text = sign + str(abs(seconds))
    if nanos:
        frac = str(abs(nanos)).rjust(9, "0")
        while frac.endswith("000"):
            frac = frac[:-3]
        text += "." + frac
    return text + "s"


def scalar(fd, v, pb):
    t = fd.type
    if t == fd.TYPE_FLOAT:
        x = fl(v)
        return x if isinstance(x, str) else {"$f32": x}
    if t == fd.TYPE_DOUBLE:
        return fl(v)
    if t == fd.TYPE_BYTES:
        return base64.b64encode(v).decode()
    if t == fd.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else v
    if t == fd.TYPE_MESSAGE:
        return message(v, pb)
    return v  # ints, bool, string


def value(v, pb):
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "number_value":
        return fl(v.number_value)
    if kind == "struct_value":
        return {k: value(x, pb) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [value(x, pb) for x in v.list_value.values]
    return getattr(v, kind)


def well_known(m, pb):
    name = m.DESCRIPTOR.full_name
    if name == "google.protobuf.Timestamp":
        return ts_text(m.seconds, m.nanos)
    if name == "google.protobuf.Duration":
        return dur_text(m.seconds, m.nanos)
    if name.startswith("google.protobuf.") and name.endswith("Value") and name not in ("google.protobuf.Value", "google.protobuf.ListValue"):
        return scalar(m.DESCRIPTOR.fields_by_name["value"], m.value, pb)
    if name == "google.protobuf.Struct":
        return {k: value(x, pb) for k, x in m.fields.items()}
    if name == "google.protobuf.Value":
        return value(m, pb)
    if name == "google.protobuf.ListValue":
        return [value(x, pb) for x in m.values]
    if name == "google.protobuf.Any":
        inner = getattr(pb, m.type_url.rsplit(".", 1)[-1])()
        m.Unpack(inner)
        return {"@type": m.type_url, **message(inner, pb)}
    return None


def synthetic(oneof):
    return len(oneof.fields) == 1 and oneof.name == "_" + oneof.fields[0].name


def message(m, pb):
    wk = well_known(m, pb)
    if wk is not None or m.DESCRIPTOR.full_name.startswith("google.protobuf."):
        return wk
    out = {}
    for fd in m.DESCRIPTOR.fields:
        oneof = fd.containing_oneof
        if oneof is not None and not synthetic(oneof) and m.WhichOneof(oneof.name) != fd.name:
            continue
        v = getattr(m, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            vfd = fd.message_type.fields_by_name["value"]
            keys = sorted(v.keys())
            out[fd.name] = {("true" if k is True else "false" if k is False else str(k)): scalar(vfd, v[k], pb) for k in keys}
        elif fd.is_repeated:
            out[fd.name] = [scalar(fd, x, pb) for x in v]
        elif fd.has_presence and not m.HasField(fd.name):
            out[fd.name] = None
        else:
            out[fd.name] = scalar(fd, v, pb)
    return out


def rand_str(r):
    return "".join(r.choice("abZ \"\\\n/é漢😀\u2028\x01") for _ in range(r.randint(0, 10)))


def inner(pb, r):
    return pb.Inner(id=r.randint(*INT64), label=rand_str(r), ticks=[r.randint(*INT64) for _ in range(r.randint(0, 3))])


def everything(pb, r, k):
    def pick(edges, rnd):
        return edges[k] if k < len(edges) else rnd()
    m = pb.Everything(
        d=pick([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e-300, 0.1], lambda: r.uniform(-1e9, 1e9)),
        f=pick([0.0, 0.1, float("nan"), float("-inf"), 3.4028234663852886e38], lambda: r.uniform(-1e5, 1e5)),
        i32=pick([0, -(2**31), 2**31 - 1], lambda: r.randint(-(2**31), 2**31 - 1)),
        i64=pick([0, INT64[0], INT64[1], 2**53 + 1], lambda: r.randint(*INT64)),
        u32=pick([0, 2**32 - 1], lambda: r.randint(0, 2**32 - 1)),
        u64=pick([0, UINT64, 2**63], lambda: r.randint(0, UINT64)),
        s32=pick([0, -(2**31)], lambda: r.randint(-(2**31), 2**31 - 1)),
        s64=pick([0, INT64[0], INT64[1]], lambda: r.randint(*INT64)),
        fx32=r.randint(0, 2**32 - 1), fx64=pick([UINT64], lambda: r.randint(0, UINT64)),
        sfx32=r.randint(-(2**31), 2**31 - 1), sfx64=pick([INT64[0]], lambda: r.randint(*INT64)),
        b=k % 3 == 1,
        s=pick(["", "ü漢😀", "\u2028"], lambda: rand_str(r)),
        by=pick([b"", b"\x00\xff"], lambda: r.randbytes(r.randint(0, 12))),
        status=[0, 1, 2, 7][k % 4],
        packed=[r.randint(*INT64) for _ in range(k % 4)],
        names=[rand_str(r) for _ in range(k % 3)],
        statuses=[1, 0, 2][: k % 4],
        doubles=[float("nan"), -0.0, 1.5][: k % 4],
    )
    if k % 4 != 0:
        m.inner.CopyFrom(inner(pb, r))
    m.inners.extend(inner(pb, r) for _ in range(k % 3))
    for _ in range(k % 3):
        m.by_name[rand_str(r)].CopyFrom(inner(pb, r))
        m.by_id[r.randint(*INT64)] = rand_str(r)
        m.by_flag[r.random() < 0.5] = r.uniform(-1, 1)
    which = k % 4
    if which == 1:
        m.text = rand_str(r)
    elif which == 2:
        m.nested.CopyFrom(inner(pb, r))
    elif which == 3:
        m.number = r.randint(*INT64)
    if k % 2:
        m.maybe = pick([0, 0, INT64[0]], lambda: r.randint(*INT64))
    if k % 5 != 0:
        m.at.seconds = pick([0, 0, -1, -62135596800, 253402300799], lambda: r.randint(-62135596800, 253402300799))
        m.at.nanos = r.randint(0, 999999999)
        secs = r.randint(-315576000000, 315576000000)
        m.took.seconds = secs
        m.took.nanos = 0 if secs == 0 else (1 if secs > 0 else -1) * r.choice([0, 1000000, 500, 999999999])
        m.w_i64.value = r.randint(*INT64)
        m.w_str.value = rand_str(r)
        m.w_bytes.value = r.randbytes(3)
        m.w_double.value = r.choice([float("nan"), 2.5])
        m.w_bool.value = False
        m.w_u64.value = UINT64
        m.attrs.update({"a": 1.5, "b": [1, "x", None, True], "c": {"d": "e"}, "n": None})
        m.any_value.string_value = rand_str(r)
        m.list.extend([1, "two", False])
        m.packed_any.Pack(inner(pb, r))
    return m


def main():
    out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    pb = compile_proto(out)
    r = random.Random(20261207)
    cases = []
    for k in range(n):
        if k % 7 == 6:
            msg, idx, cls = pb.Outer.Nested(name=rand_str(r), statuses=[1, 2], big=UINT64), [2, 0], pb.Outer.Nested
        else:
            msg, idx, cls = everything(pb, r, k), [1], pb.Everything
        payload = msg.SerializeToString()
        got = cls.FromString(payload)
        cases.append({"payload": base64.b64encode(payload).decode(), "indexes": idx, "bare": message(got, pb)})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, allow_nan=False)


if __name__ == "__main__":
    main()
