#!/usr/bin/env python3
"""A TCP proxy on loopback for tests/t_slow_link.sh: listens on a port,
forwards to 127.0.0.1:TARGET, and makes the link as bad as a control file
says, read every 50 ms: a line "delay MS" holds every chunk that long
before passing it on (both ways), "stall" passes nothing (connections stay
open, bytes wait), "ok" passes at once. Prints its port, then serves until
killed.

  link_proxy.py TARGET_PORT CONTROL_FILE
"""
import asyncio

import sys

target, control = int(sys.argv[1]), sys.argv[2]
state = {"mode": "ok", "delay": 0.0}

async def watch():
    while True:
        try:
            words = open(control).read().split()
        except OSError:
            words = []
        if words:
            state["mode"] = words[0]
            state["delay"] = float(words[1]) / 1000 if len(words) > 1 else 0.0
        await asyncio.sleep(0.05)

async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            while state["mode"] == "stall":
                await asyncio.sleep(0.05)
            if state["mode"] == "delay":
                await asyncio.sleep(state["delay"])
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()

async def handle(reader, writer):
    try:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    asyncio.ensure_future(watch())
    async with server:
        await server.serve_forever()

if __name__ == "__main__":
    asyncio.run(main())
