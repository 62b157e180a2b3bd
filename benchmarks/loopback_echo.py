#!/usr/bin/env python3
"""Echoes a buffer over loopback TCP between two threads, reusing both buffers: the bound that
c10d-rpc-bench's tensor echo is compared against (docs/performance.md). Prints the median of
--repeats round trips in GB/s, counting both directions as c10d-rpc-bench does."""
import argparse
import socket
import statistics
import threading
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=16, help="buffer size in MiB (default 16)")
    parser.add_argument("--repeats", type=int, default=40, help="round trips (default 40)")
    args = parser.parse_args()
    size = args.mib << 20

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def receive(sock, view):
        got = 0
        while got < size:
            n = sock.recv_into(view[got:])
            if n == 0:
                raise ConnectionError("loopback peer closed early")
            got += n

    def server():
        conn, _ = listener.accept()
        buffer = bytearray(size)
        for _ in range(args.repeats):
            receive(conn, memoryview(buffer))
            conn.sendall(buffer)
        conn.close()

    thread = threading.Thread(target=server)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port))
    outgoing = bytes(size)
    incoming = bytearray(size)
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        client.sendall(outgoing)
        receive(client, memoryview(incoming))
        seconds.append(time.perf_counter() - start)
    thread.join()
    client.close()
    print(f"loopback echo {args.mib} MiB: {2 * size / statistics.median(seconds) / 1e9:.2f} GB/s "
          f"(median of {args.repeats}, both directions)")


if __name__ == "__main__":
    main()
