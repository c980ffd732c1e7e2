"""The broker's Python path for one Produce request, without sockets: decode -> handler (idempotence
checks, append, indexes, producer state) -> response encode, driven through the real Dispatcher of a real
Broker in this process, one idempotent one-record batch per request over P partitions (what librdkafka
sends at 1,000 partitions: one partition per ProduceRequest). Prints CPU microseconds per request; with
--profile, cProfile's top functions. Results: docs/benchmarks.md, "Broker CPU per produced record".

    PYTHONPATH=src .venv/bin/python bench/produce_path_bench.py --partitions 1000 --requests 50000 \\
        [--fsync-on-ack true] [--records-per-batch 1] [--profile]

With fsync on ack each request's answer waits for its group-commit round; the loop runs until every
answer is in, so the figure then includes the round's bookkeeping (the fsyncs run on other threads and
are counted in process CPU, not loop-thread CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import tempfile
import time
from pathlib import Path

from eoslog.protocol import codec
from eoslog.protocol.codec import RequestHeader
from eoslog.protocol.messages import InitProducerIdRequest, ProduceRequest
from eoslog.records.builder import SimpleRecord, build_batch
from eoslog.server.broker import Broker
from eoslog.server.config import BrokerConfig

TOPIC = "path"
PRODUCE_VERSION = 10  # librdkafka 2.16's


class Connection:
    """What the dispatcher and the Produce handler ask of a connection."""
    sasl = None
    peer = "127.0.0.1:1"
    principal = "User:ANONYMOUS"
    closed = False

    def hold(self):
        return lambda: None


def frames(producer_id: int, epoch: int, partitions: int, requests: int, size: int, per_batch: int) -> list[bytes]:
    sequences = [0] * partitions
    value = b"x" * size
    out = []
    for i in range(requests):
        index = i % partitions
        batch = build_batch([SimpleRecord(value=value, key=b"k%d" % i) for _ in range(per_batch)],
                            producer_id=producer_id, producer_epoch=epoch, base_sequence=sequences[index])
        sequences[index] += per_batch
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=index, records=batch)])])
        frame = codec.encode_request(RequestHeader(0, PRODUCE_VERSION, i, "bench"), request)
        out.append(frame[4:])
    return out


async def run(args) -> None:
    work = Path(tempfile.mkdtemp(prefix="eoslog-path-"))
    config = BrokerConfig(data_dir=work, listen_host="127.0.0.1", listen_port=0)
    config.apply_properties({"log.eoslog.fsync.on.ack": args.fsync_on_ack})
    broker = Broker(config)
    await broker.start()
    try:
        broker.registry.create_topic(TOPIC, args.partitions)
        connection = Connection()
        dispatcher = broker.dispatcher
        init = dispatcher.dispatch(connection, codec.encode_request(
            RequestHeader(22, 4, 0, "bench"),
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                  producer_epoch=-1))[4:])
        if isinstance(init, asyncio.Future):
            init = await init
        response = codec.decode_response(22, 4, b"".join(bytes(p) for p in init)[4:])
        producer_id, epoch = response.producer_id, response.producer_epoch
        work_frames = frames(producer_id, epoch, args.partitions, args.requests, args.size, args.records_per_batch)
        warm = args.partitions  # one request per partition first: segment files opened, entries made
        for frame in work_frames[:warm]:
            outcome = dispatcher.dispatch(connection, frame)
            if isinstance(outcome, asyncio.Future):
                await outcome
        profiler = cProfile.Profile() if args.profile else None
        answers, per_chunk = [], []
        chunk = args.chunk
        rest = work_frames[warm:]
        cpu, wall = time.process_time(), time.perf_counter()
        thread_cpu = time.thread_time()
        if profiler:
            profiler.enable()
        for start in range(0, len(rest), chunk):
            chunk_cpu = time.thread_time()
            pending = []
            for frame in rest[start:start + chunk]:
                outcome = dispatcher.dispatch(connection, frame)
                if isinstance(outcome, asyncio.Future):
                    pending.append(outcome)
                    if len(pending) >= 64:  # a few producers' in-flight requests
                        answers += await asyncio.gather(*pending)
                        pending.clear()
                else:
                    answers.append(outcome)
            if pending:
                answers += await asyncio.gather(*pending)
            per_chunk.append((time.thread_time() - chunk_cpu) / len(rest[start:start + chunk]) * 1e6)
        if profiler:
            profiler.disable()
        count = len(rest)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        thread_cpu = time.thread_time() - thread_cpu
        for answer in answers:  # every request must have been appended, not refused
            produced = codec.decode_response(0, PRODUCE_VERSION, b"".join(bytes(p) for p in answer)[4:])
            code = produced.responses[0].partition_responses[0].error_code
            if code != 0:
                raise SystemExit(f"a request was refused with error {code}")
        print(f"{args.partitions} partitions, {args.records_per_batch} x {args.size} B per batch, fsync.on.ack="
              f"{args.fsync_on_ack}: {count} requests, loop thread {thread_cpu / count * 1e6:.1f} us CPU/request, "
              f"process {cpu / count * 1e6:.1f} us, wall {wall / count * 1e6:.1f} us; per chunk of {chunk}: "
              f"min {min(per_chunk):.1f}, median {statistics.median(per_chunk):.1f} us")
        if profiler:
            pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
    finally:
        await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--records-per-batch", type=int, default=1)
    parser.add_argument("--fsync-on-ack", default="false", choices=["true", "false"])
    parser.add_argument("--chunk", type=int, default=5000, help="requests per timed chunk (min and median)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=45)
    args = parser.parse_args()
    from eoslog.server.run import new_event_loop

    loop = new_event_loop()
    try:
        loop.run_until_complete(run(args))
    finally:
        loop.close()


if __name__ == "__main__":
    main()
