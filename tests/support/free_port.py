#!/usr/bin/env python3
"""Prints a loopback TCP port that nothing uses now, for the scripts that give a job its
MASTER_PORT: a guessed port can be one another test is using.

The port is drawn below the kernel's ephemeral range (ip_local_port_range). A job may listen on
its MASTER_PORT many times over minutes (the MPI conformance suite starts a store per case), and
a port from the ephemeral range (the OS's pick for port 0) can meanwhile become the source port
of any test's outgoing connection: the suite then failed with EADDRINUSE."""
import random
import socket


def ephemeral_start():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


start = ephemeral_start()
low = 10000 if start > 12000 else 1024
for _ in range(200):
    port = random.randrange(low, start)
    if free(port):
        print(port)
        break
else:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])
