#!/usr/bin/python3
"""A userspace TCP proxy that delays every byte by a fixed time each way (the kernel here has no
sch_netem). Used by scripts/faults.sh on the host side of a veth pair, so that baton nodes in a
network namespace reach the test servers on 127.0.0.1 through it.

usage: delay_proxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT DELAY_MS

Buffers are bounded: at most 256 chunks of up to 64 KiB wait in each direction of a connection
(a full queue stops reading that side, so TCP flow control pushes back). When either side closes,
both are closed after the data in flight has been delivered.
"""
import asyncio
import sys
import time

CHUNK = 65536
QUEUE = 256


async def pump(reader, writer, delay):
    queue = asyncio.Queue(maxsize=QUEUE)

    async def read_side():
        try:
            while True:
                data = await reader.read(CHUNK)
                await queue.put((time.monotonic() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((time.monotonic(), b""))

    async def write_side():
        try:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    break
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    await asyncio.gather(read_side(), write_side())


async def main():
    if len(sys.argv) != 6:
        sys.stderr.write(__doc__)
        sys.exit(2)
    lhost, lport, thost, tport = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    delay = int(sys.argv[5]) / 1000.0

    async def serve(creader, cwriter):
        try:
            sreader, swriter = await asyncio.wait_for(asyncio.open_connection(thost, tport), 10)
        except (OSError, asyncio.TimeoutError):
            cwriter.close()
            return
        await asyncio.gather(pump(creader, swriter, delay), pump(sreader, cwriter, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(serve, lhost, lport, reuse_address=True)
    print("delay_proxy: %s:%d -> %s:%d, %d ms each way" % (lhost, lport, thost, tport,
                                                          delay * 1000), flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
