"""Reads N records of one partition with confluent-kafka-python's
DeserializingConsumer (AvroDeserializer, fastavro) and writes each as a JSON
line, for BenchmarkAvroVsConfluentPython. REGISTRY_URL "-" reads with a plain
Consumer and writes each value's length instead (the control: the client
without deserializing).

    python ckpy_consume.py BROKERS TOPIC REGISTRY_URL N OUT
"""
import base64
import datetime
import decimal
import json
import sys

from confluent_kafka import Consumer, DeserializingConsumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer


class Exact(json.JSONEncoder):
    def default(self, o):
        if isinstance(o, decimal.Decimal):
            return str(o)
        if isinstance(o, datetime.datetime):
            return o.isoformat()
        if isinstance(o, bytes):
            return base64.b64encode(o).decode()
        return super().default(o)


def main():
    brokers, topic, registry, n, out = sys.argv[1:6]
    n = int(n)
    conf = {"bootstrap.servers": brokers, "group.id": "bench-ckpy", "enable.auto.commit": False}
    if registry == "-":
        consumer = Consumer(conf)
    else:
        conf["value.deserializer"] = AvroDeserializer(SchemaRegistryClient({"url": registry}))
        consumer = DeserializingConsumer(conf)
    consumer.assign([TopicPartition(topic, 0, 0)])
    enc = Exact(separators=(",", ":"))
    got = 0
    with open(out, "w") as f:
        while got < n:
            m = consumer.poll(1.0)
            if m is None:
                continue
            if m.error():
                raise SystemExit(str(m.error()))
            value = len(m.value()) if registry == "-" else m.value()
            f.write(enc.encode({"topic": m.topic(), "partition": m.partition(), "offset": m.offset(), "value": value}))
            f.write("\n")
            got += 1
    consumer.close()


main()
