"""PyTorch's TCPStore protocol both ways: c10d's client (store/PyTorchTCPStore.hpp) against
PyTorch's server, and PyTorch's client against c10d's server (what torch.distributed programs
meet under c10drun).

v1: the server and client of the installed PyTorch (Debian's 1.13). v2: no PyTorch >= 2.2 is
installable here, so a model of its server (VALIDATE first, every code one higher; written from
PyTorch's TCPStoreBackend.hpp) stands in for it, and v2 requests are sent to our server by hand.
Usage: pytorch_store_test.py PYTORCH_STORE_CLIENT C10D_STORE_SERVER
"""
import os
import time
import socket
import struct
import subprocess
import sys
import threading
from datetime import timedelta

client = sys.argv[1]
store_server = sys.argv[2]


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


class OurServer:
    """c10d-store-server on a free port; stop() returns what it logged."""

    def __init__(self, env=None):
        self.process = subprocess.Popen(
            [store_server, "--address", "127.0.0.1", "--port", "0", "--timeout", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, **(env or {})))
        line = self.process.stdout.readline()
        expect("listening" in line, f"c10d-store-server started: {line!r}")
        self.port = int(line.split("port")[1])

    def stop(self):
        self.process.terminate()
        _, err = self.process.communicate(timeout=30)
        return err


def raw(port, data, answer_bytes=0, timeout=5):
    """Sends data on a new connection; returns answer_bytes bytes, or b"" once the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        got = b""
        while len(got) < max(answer_bytes, 1):
            chunk = conn.recv(4096)
            if not chunk:
                return got
            got += chunk
        return got


def text(value):
    return struct.pack("<Q", len(value)) + value


def check_torch_client_on_our_server():
    import torch.distributed as dist
    server = OurServer()
    timeout = timedelta(seconds=30)
    a = dist.TCPStore("127.0.0.1", server.port, 3, False, timeout)
    b = dist.TCPStore("127.0.0.1", server.port, 3, False, timeout)
    a.set("k", "v")
    expect(b.get("k") == b"v", "torch's client reads what another wrote")
    expect(a.add("n", 2) == 2 and b.add("n", 3) == 5, "add counts across clients")
    expect(a.compare_set("cas", "", "first") == b"first", "compare_set creates")
    expect(b.compare_set("cas", "nope", "x") == b"first", "compare_set refuses a wrong expectation")
    expect(b.compare_set("cas", "first", "second") == b"second", "compare_set swaps")
    expect(a.delete_key("k") and not a.delete_key("k"), "delete_key says whether it deleted")

    # A wait parked on the server wakes when another client sets the key.
    threading.Timer(0.3, lambda: b.set("late", "here")).start()
    start = time.monotonic()
    a.wait(["late"], timedelta(seconds=10))
    expect(0.2 < time.monotonic() - start < 5, "a wait returned once the key was set")

    # A timed-out wait fails on the client, and the server serves the others on.
    c = dist.TCPStore("127.0.0.1", server.port, 3, False, timeout)
    c.set_timeout(timedelta(milliseconds=300))
    try:
        c.get("never")
        expect(False, "get of a key nobody sets timed out")
    except RuntimeError as e:
        expect("imeout" in str(e) or "timed out" in str(e), f"the timeout says so: {e}")
    expect(b.get("cas") == b"second", "the server serves the others after a client's timeout")

    # torch.distributed's PrefixStore and the worker prefix of the agent store, as env:// uses.
    worker = dist.PrefixStore("/worker/attempt_0", a)
    worker.set("x", "1")
    expect(dist.PrefixStore("/worker/attempt_0", b).get("x") == b"1", "prefixed keys meet")

    # Clients that lie: each is dropped alone, with the reason in the server's log.
    expect(raw(server.port, b"\xf0garbage") == b"", "an unknown first byte is dropped")
    expect(raw(server.port, b"\x02" + text(b"/missing")) == b"",
           "a v1 GET of a missing key is closed, as PyTorch's server does")
    expect(raw(server.port, b"\x00" + struct.pack("<Q", 1 << 40)) == b"",
           "a key length past the limit is dropped")
    # PyTorch's SET has no answer: a GET on the same connection makes sure the server has the
    # key before another connection asks for it (without it, CI saw the raw request win).
    a.set("text", "hello")
    expect(a.get("text") == b"hello", "the value to add to is stored")
    expect(raw(server.port, b"\x03" + text(b"/text") + struct.pack("<q", 1)) == b"",
           "add on a value that is not a number is closed")
    expect(raw(server.port, b"\x07" + text(b"/k")) == b"", "watch_key is refused")
    # v2 (PyTorch >= 2.2) by hand: VALIDATE, then codes one higher.
    v2 = b"\x00" + struct.pack("<I", 0x3C85F7CE)
    expect(raw(server.port, v2 + b"\x03" + text(b"/cas"), 8 + 6) == text(b"second"),
           "a v2 client's GET after VALIDATE")
    expect(raw(server.port, v2 + b"\x0a" + struct.pack("<Q", 2) + text(b"/cas") + text(b"/n"),
               2 * 8 + 6 + 1) == text(b"second") + text(b"5"), "a v2 client's MULTI_GET")
    expect(raw(server.port, v2 + b"\x0d" + struct.pack("<I", 0xC10D), 4) == struct.pack("<I", 0xC10D),
           "a v2 client's PING (PyTorch >= 2.4 sends one after VALIDATE) has its nonce back")
    # Many keys naming one large value: refused before the answer is built.
    a.set("big", "x" * (1 << 20))
    expect(len(a.get("big")) == 1 << 20, "the large value is stored")
    expect(raw(server.port, b"\x0a" + struct.pack("<Q", 200) + text(b"/big") * 200) == b"",
           "a MULTI_GET whose answer passes the limit is closed")
    expect(raw(server.port, b"\x04" + struct.pack("<Q", 1 << 40)) == b"",
           "a key count past the limit is dropped")
    expect(a.get("cas") == b"second" and a.add("n", 0) == 5, "the honest clients still work")
    log = server.stop()
    for why in ("first byte 240", "'/missing' does not exist", "the limit is",
                "not a decimal int64", "watch_key", "for one answer", "keys; the limit is"):
        expect(why in log, f"the server's log says {why!r}: {log}")

    # A server that needs a token cannot let PyTorch's client in, and says why.
    server = OurServer({"C10D_AUTH_TOKEN": "secret"})
    try:
        dist.TCPStore("127.0.0.1", server.port, 1, False, timedelta(seconds=5))
        expect(False, "torch's client was refused by a server with a token")
    except RuntimeError:
        pass
    log = server.stop()
    expect("cannot authenticate" in log, f"the refusal is logged: {log}")
    print("PASS: PyTorch's client (v1) and hand-made v2 requests against c10d's server")


check_v1()
check_v2()
check_torch_client_on_our_server()
