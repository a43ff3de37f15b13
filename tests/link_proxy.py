#!/usr/bin/env python3
"""A TCP proxy for the tests' links (tests/t_slow_link.sh, t_tls.sh):
listens on a port, forwards to TARGET, and makes the link as bad as a
control file says, read every 50 ms: a line "delay MS [JITTER]" passes
every byte MS later (JITTER: give or take up to that many, drawn
uniformly; the order kept), both ways, "stall" passes nothing
(connections stay open, bytes wait), "ok" passes at once. With --record
PREFIX it also writes every byte it passes to PREFIX.up (client to server)
and PREFIX.down, what someone on the link would see. Prints its port,
then serves until killed.

  link_proxy.py [--listen HOST] [--record PREFIX] [HOST:]TARGET_PORT CONTROL_FILE

HOST defaults to 127.0.0.1 for both ends.
"""
import asyncio
import random

import sys

args = sys.argv[1:]
listen, record = "127.0.0.1", None
while args and args[0].startswith("--"):
    flag, value, args = args[0], args[1], args[2:]
    if flag == "--listen":
        listen = value
    elif flag == "--record":
        record = value
    else:
        sys.exit("link_proxy.py: unknown flag " + flag)
target_host, _, port = args[0].rpartition(":")
target_host, target, control = target_host or "127.0.0.1", int(port), args[1]
state = {"mode": "ok", "delay": 0.0, "jitter": 0.0}
logs = {way: open(record + "." + way, "ab", buffering=0) for way in ("up", "down")} if record else {}

async def watch():
    while True:
        try:
            words = open(control).read().split()
        except OSError:
            words = []
        if words:
            state["mode"] = words[0]
            state["delay"] = float(words[1]) / 1000 if len(words) > 1 else 0.0
            state["jitter"] = float(words[2]) / 1000 if len(words) > 2 else 0.0
        await asyncio.sleep(0.05)

async def pipe(reader, writer, way):
    """Bytes read at t leave at t + delay (+ a uniform draw within
    +-jitter), in the order read, as on a link with that latency: chunks
    in flight overlap, so the delay costs no bandwidth."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send():
        last = 0.0
        while True:
            due, data = await queue.get()
            if data is None:
                break
            while state["mode"] == "stall":
                await asyncio.sleep(0.05)
            due = max(due, last)
            last = due
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if way in logs:
                logs[way].write(data)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            lag = 0.0
            if state["mode"] == "delay":
                lag = max(0.0, state["delay"] + random.uniform(-state["jitter"], state["jitter"]))
            queue.put_nowait((loop.time() + lag, data))
        queue.put_nowait((0.0, None))
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
    finally:
        writer.close()

async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection(target_host, target)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer, "up"), pipe(up_reader, writer, "down"))

async def main():
    server = await asyncio.start_server(handle, listen, 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    asyncio.ensure_future(watch())
    async with server:
        await server.serve_forever()

if __name__ == "__main__":
    asyncio.run(main())
