#!/usr/bin/env python3
"""Prints a loopback TCP port that nothing uses now (the OS's pick for port 0), for the scripts
that give a job its MASTER_PORT: a guessed port can be one another test is using."""
import socket

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
