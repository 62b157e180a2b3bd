"""c10d's client of PyTorch's TCPStore (store/PyTorchTCPStore.hpp) against the real server.

v1: the server of the installed PyTorch (Debian's 1.13), with torch.distributed's own client
checking what the C++ client wrote. v2: no PyTorch >= 2.2 is installable here, so a model of its
server (VALIDATE first, every code one higher; written from PyTorch's TCPStoreBackend.hpp) stands
in for it. Usage: pytorch_store_test.py PYTORCH_STORE_CLIENT
"""
import socket
import struct
import subprocess
import sys
import threading
from datetime import timedelta

client = sys.argv[1]


def run_client(port, protocol):
    done = subprocess.run([client, "127.0.0.1", str(port), protocol], timeout=60,
                          capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0:
        sys.exit(f"FAIL: pytorch_store_client {protocol} exited {done.returncode}")


def expect(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")


def check_v1():
    try:
        import torch.distributed as dist
    except ImportError:
        print("skipped: python3-torch is not installed (tools/setup.sh installs it)")
        sys.exit(77)
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                           timeout=timedelta(seconds=30))
    server.set("from_torch", "hello")
    server.add("counter", 5)
    run_client(server.port, "v1")
    expect(server.get("cas") == b"second", "torch reads the C++ client's compare_set")
    expect(server.get("log") == b"ab", "torch reads the C++ client's appends")
    expect(server.add("counter", 0) == 7, "torch sees the C++ client's add")
    worker = dist.PrefixStore("/worker/attempt_0", server)
    expect(worker.get("from_c10d") == b"world", "torch reads a key set under the worker prefix")
    print("PASS: v1 against PyTorch", dist.__name__, "server")


class ModelV2Server:
    """PyTorch >= 2.2's protocol, one thread per connection, as its legacy backend answers."""
    SET, CAS, GET, ADD, CHECK, WAIT, NUMKEYS, DELETE, APPEND, MULTI_GET, MULTI_SET = range(1, 12)

    def __init__(self):
        self.data = {}
        self.changed = threading.Condition()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            conn, _ = self.listener.accept()
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    @staticmethod
    def read(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def serve(self, conn):
        u64 = lambda: struct.unpack("<Q", self.read(conn, 8))[0]
        text = lambda: self.read(conn, u64())
        send_bytes = lambda b: conn.sendall(struct.pack("<Q", len(b)) + b)
        try:
            first = self.read(conn, 5)
            if first != b"\x00" + struct.pack("<I", 0x3C85F7CE):
                return  # the legacy backend closes a connection that does not validate first
            while True:
                op = self.read(conn, 1)[0]
                with self.changed:
                    if op == self.SET:
                        k, v = text(), text()
                        self.data[k] = v
                        self.changed.notify_all()
                    elif op == self.CAS:
                        k, expected, desired = text(), text(), text()
                        if k not in self.data:
                            if expected:
                                send_bytes(expected)
                                continue
                            self.data[k] = desired
                        elif self.data[k] == expected:
                            self.data[k] = desired
                        self.changed.notify_all()
                        send_bytes(self.data[k])
                    elif op == self.GET:
                        send_bytes(self.data[text()])
                    elif op == self.ADD:
                        k = text()
                        delta = struct.unpack("<q", self.read(conn, 8))[0]
                        value = int(self.data.get(k, b"0")) + delta
                        self.data[k] = str(value).encode()
                        self.changed.notify_all()
                        conn.sendall(struct.pack("<q", value))
                    elif op == self.CHECK:
                        keys = [text() for _ in range(u64())]
                        conn.sendall(b"\x00" if all(k in self.data for k in keys) else b"\x01")
                    elif op == self.WAIT:
                        keys = [text() for _ in range(u64())]
                        self.changed.wait_for(lambda: all(k in self.data for k in keys))
                        conn.sendall(b"\x00")
                    elif op == self.NUMKEYS:
                        conn.sendall(struct.pack("<q", len(self.data)))
                    elif op == self.DELETE:
                        conn.sendall(struct.pack("<q", int(self.data.pop(text(), None) is not None)))
                    elif op == self.APPEND:
                        k, v = text(), text()
                        self.data[k] = self.data.get(k, b"") + v
                        self.changed.notify_all()
                    elif op == self.MULTI_GET:
                        keys = [text() for _ in range(u64())]
                        for k in keys:
                            send_bytes(self.data[k])
                    elif op == self.MULTI_SET:
                        for _ in range(u64()):
                            k, v = text(), text()
                            self.data[k] = v
                        self.changed.notify_all()
                    else:
                        return  # unknown code: the server closes the connection
        except (EOFError, KeyError, ConnectionError):
            pass
        finally:
            conn.close()


def check_v2():
    model = ModelV2Server()
    model.data[b"/from_torch"] = b"hello"
    model.data[b"/counter"] = b"5"
    run_client(model.port, "v2")
    expect(model.data[b"/cas"] == b"second", "the model holds the compare_set result")
    expect(model.data[b"/log"] == b"ab", "the model holds the appends (APPEND)")
    expect(model.data[b"//worker/attempt_0/from_c10d"] == b"world", "worker prefix on the wire")
    print("PASS: v2 against the model of PyTorch >= 2.2's server")


check_v1()
check_v2()
