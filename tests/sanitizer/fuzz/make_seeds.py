#!/usr/bin/env python3
"""Writes the hand-made seeds of tests/sanitizer/fuzz/corpus: one well-formed input per TCPStore op and per
RPC frame kind. The rest of each corpus is what the fuzzers found and `-merge=1` kept."""
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))


def write(folder, name, data):
    path = os.path.join(here, "corpus", folder)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "seed-" + name), "wb") as f:
        f.write(data)


# ---- TCPStore: byte 0 = 1 (valid handshake first, server without a token), then frames ----
def field(b):
    return struct.pack("<I", len(b)) + b


def frame(op, body=b""):
    payload = bytes([op]) + body
    return struct.pack("<I", len(payload)) + payload


def keys(*ks):
    return struct.pack("<I", len(ks)) + b"".join(field(k) for k in ks)


ms = struct.pack("<q", 50)
store = {
    "set": frame(1, field(b"a") + field(b"1")),
    "get": frame(1, field(b"a") + field(b"1")) + frame(2, field(b"a") + ms),
    "add": frame(3, field(b"n") + struct.pack("<q", 5)),
    "compare_set": frame(4, field(b"c") + field(b"") + field(b"x")),
    "delete": frame(5, field(b"a")),
    "check": frame(6, keys(b"a", b"b")),
    "wait": frame(7, keys(b"w") + ms),
    "num_keys": frame(8),
    "multi_get": frame(10, keys(b"m1", b"m2") + field(b"1") + field(b"2"))
    + frame(9, keys(b"m1", b"m2") + ms),
    "append": frame(11, field(b"p") + field(b"xy")),
    "ping": frame(12),
}
for name, body in store.items():
    write("store_server", name, b"\x01" + body)
write("store_server", "auth_wrong_proof", b"\x03" + bytes(64) + frame(12))
write("store_server", "raw_handshake", b"\x00C10D\x01\x00\x00\x00" + frame(12))


# ---- PyTorch's TCPStore protocol (no handshake: byte 0 = 0), as torch.distributed's client ----
def text(b):
    return struct.pack("<Q", len(b)) + b


def tkeys(*ks):
    return struct.pack("<Q", len(ks)) + b"".join(text(k) for k in ks)


torch_v1 = {
    "set_get": b"\x00" + text(b"/a") + text(b"1") + b"\x05" + tkeys(b"/a") + b"\x02" + text(b"/a"),
    "add_cas": b"\x03" + text(b"/n") + struct.pack("<q", 2) + b"\x01" + text(b"/c") + text(b"")
    + text(b"x"),
    "check_numkeys_delete": b"\x04" + tkeys(b"/a", b"/b") + b"\x06" + b"\x08" + text(b"/a"),
    "multi_append_cancel": b"\x0b" + struct.pack("<Q", 1) + text(b"/m") + text(b"v") + b"\x09"
    + text(b"/m") + text(b"w") + b"\x0a" + tkeys(b"/m") + b"\x05" + tkeys(b"/never") + b"\x0c",
}
for name, body in torch_v1.items():
    write("store_server", "torch_v1_" + name, b"\x00" + body)
validate = b"\x00" + struct.pack("<I", 0x3C85F7CE)
write("store_server", "torch_v2", b"\x00" + validate + b"\x01" + text(b"/a") + text(b"1")
      + b"\x0a" + tkeys(b"/a") + b"\x07")


# ---- RPC frames: byte 0 = piece size selector, then frames ----
def mp_str(s):
    b = s.encode()
    return bytes([0xA0 | len(b)]) + b if len(b) < 32 else b"\xd9" + bytes([len(b)]) + b


def mp_bin(b):
    return b"\xc4" + bytes([len(b)]) + b


def mp_array(items):
    return bytes([0x90 | len(items)]) + b"".join(items)


def mp_int(v):
    return bytes([v]) if 0 <= v < 128 else b"\xd3" + struct.pack(">q", v)


def mp_double(v):
    return b"\xcb" + struct.pack(">d", v)


def mp_u64(v):
    return b"\xcf" + struct.pack(">Q", v)


# Version 2: meta is [name, payload, tensor table, loan, seal address, [[tensor index, address],
# ...]], and lent tensors' bytes are not in the stream.
def rpc_frame(kind, ident, name, payload, tensors, loan=0, seal=0, lent=()):
    table = mp_array([mp_array([mp_int(dtype), mp_array([mp_int(s) for s in sizes])])
                      for dtype, sizes, _ in tensors])
    lent_table = mp_array([mp_array([mp_int(i), mp_u64(address)]) for i, address in lent])
    meta = mp_array([mp_str(name), mp_bin(payload), table, mp_u64(loan), mp_u64(seal), lent_table])
    head = b"C10R" + bytes([2, kind, 0, 0]) + struct.pack("<QII", ident, len(meta), len(tensors))
    lent_indices = {i for i, _ in lent}
    return head + meta + b"".join(data for i, (_, _, data) in enumerate(tensors)
                                  if i not in lent_indices)


tensor_ext = b"\xd6\x01" + struct.pack(">I", 0)  # fixext 4, type 1: tensor index 0
arguments = mp_array([mp_int(7), mp_str("seven"), mp_array([mp_double(1.5)]), tensor_ext])
floats = struct.pack("<4f", 1, 2, 3, 4)
rpc = {
    "hello": rpc_frame(1, 3, "", b"", []),
    "request": rpc_frame(2, 1, "add", arguments, [(0, [2, 2], floats)]),
    "response": rpc_frame(3, 1, "", mp_int(42), []),
    "error": rpc_frame(4, 2, "boom", b"", []),
    "two_frames": rpc_frame(2, 4, "f", mp_array([]), [(7, [0], b"")])
    + rpc_frame(3, 4, "", mp_array([]), [(1, [], struct.pack("<d", 2.0))]),
    "lending": rpc_frame(5, 0, "host/boot/ns", bytes(32), [])
    + rpc_frame(6, 4242, "", struct.pack("<Q", 0x7F0000001000), [])
    + rpc_frame(7, 0, "", b"", [])
    + rpc_frame(2, 9, "add", arguments, [(0, [2, 2], floats), (0, [4], floats)], loan=3,
                seal=0x7F0000003000, lent=[(0, 0x7F0000002000)])
    + rpc_frame(8, 3, "", b"", []),
}
for i, (name, data) in enumerate(rpc.items()):
    write("rpc_frame", name, bytes([i * 3]) + data)
