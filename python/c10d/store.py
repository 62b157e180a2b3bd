"""Key-value stores, as torch.distributed's: TCPStore, FileStore, HashStore and PrefixStore."""

from ctypes import byref, c_char_p, c_int, c_int64, c_uint16, string_at
from datetime import timedelta

from . import _capi
from ._capi import lib
from .errors import DistQueueEmptyError, InvalidArgument


def milliseconds(timeout, default=-1):
    """A timeout (timedelta, or seconds as a number; None: default) in whole milliseconds."""
    if timeout is None:
        return default
    if isinstance(timeout, timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(timeout * 1000)


def _key(key):
    return key.encode() if isinstance(key, str) else bytes(key)


def _value(value):
    return value.encode() if isinstance(value, str) else bytes(value)


def _keys(keys):
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    encoded = [_key(k) for k in keys]
    return (c_char_p * len(encoded))(*encoded), len(encoded)


def _take(result):
    """The bytes of a c10d_bytes the library allocated, which this then frees."""
    try:
        return string_at(result.data, result.size) if result.size else b""
    finally:
        lib.c10d_free(result.data)


class Store:
    """A handle on a c10d store. Blocking calls (get, wait) wait up to the store's timeout (the
    one it was made with, or set_timeout's)."""

    def __init__(self, handle):
        self._handle = handle

    def __del__(self, _free=lib.c10d_store_free):
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = None
            _free(handle)

    @property
    def handle(self):
        """The c10d_store* (an int), for calls of the C API."""
        return self._handle

    @property
    def timeout(self):
        value = c_int64()
        _capi.check(lib.c10d_store_timeout(self._handle, byref(value)))
        return timedelta(milliseconds=value.value)

    def set_timeout(self, timeout):
        _capi.check(lib.c10d_store_set_timeout(self._handle, milliseconds(timeout)))

    def set(self, key, value):
        data = _value(value)
        _capi.check(lib.c10d_store_set(self._handle, _key(key), data, len(data)))

    def get(self, key):
        result = _capi.Bytes()
        _capi.check(lib.c10d_store_get(self._handle, _key(key), -1, result))
        return _take(result)

    def add(self, key, amount):
        total = c_int64()
        _capi.check(lib.c10d_store_add(self._handle, _key(key), amount, byref(total)))
        return total.value

    def compare_set(self, key, expected_value, desired_value):
        expected, desired = _value(expected_value), _value(desired_value)
        result = _capi.Bytes()
        _capi.check(lib.c10d_store_compare_set(self._handle, _key(key), expected, len(expected),
                                               desired, len(desired), result))
        return _take(result)

    def wait(self, keys, timeout=None):
        array, count = _keys(keys)
        timeout_ms = milliseconds(timeout, -1)
        _capi.check(lib.c10d_store_wait(self._handle, array, count, timeout_ms))

    def check(self, keys):
        array, count = _keys(keys)
        exist = c_int()
        _capi.check(lib.c10d_store_check(self._handle, array, count, byref(exist)))
        return bool(exist.value)

    def delete_key(self, key):
        existed = c_int()
        _capi.check(lib.c10d_store_delete(self._handle, _key(key), byref(existed)))
        return bool(existed.value)

    def num_keys(self):
        count = c_int64()
        _capi.check(lib.c10d_store_num_keys(self._handle, byref(count)))
        return count.value

    def queue_push(self, key, value):
        """Appends value to key's queue (torch 2.6's queue_push)."""
        data = _value(value)
        _capi.check(lib.c10d_store_queue_push(self._handle, _key(key), data, len(data)))

    def queue_pop(self, key, block=True, timeout=None):
        """Removes and returns the front value of key's queue. block: waits up to timeout (the
        store's timeout when None) for one, raising TimeoutError; otherwise raises
        DistQueueEmptyError when the queue is empty, as torch 2.6 does."""
        result = _capi.Bytes()
        popped = c_int()
        timeout_ms = milliseconds(timeout, -1) if block else 0
        if block and timeout_ms == 0:
            raise InvalidArgument(f"Store.queue_pop('{key}'): timeout must be positive; "
                                  "pass block=False not to wait")
        _capi.check(lib.c10d_store_queue_pop(self._handle, _key(key), timeout_ms, result,
                                             byref(popped)))
        value = _take(result)
        if not popped.value:
            raise DistQueueEmptyError(f"Store.queue_pop('{key}', block=False): queue is empty")
        return value

    def queue_len(self, key):
        """How many values key's queue holds."""
        length = c_int64()
        _capi.check(lib.c10d_store_queue_len(self._handle, _key(key), byref(length)))
        return length.value



class TCPStore(Store):
    """A client of a TCP store server, which is_master also hosts. With world_size and
    wait_for_workers, construction returns once world_size clients (the master's included) are
    connected."""

    def __init__(self, host_name, port, world_size=None, is_master=False,
                 timeout=timedelta(seconds=300), wait_for_workers=True):
        wait = bool(wait_for_workers) and world_size is not None and world_size > 0
        options = _capi.tcp_store_options(
            host=host_name.encode(), port=port, is_server=int(bool(is_master)),
            num_workers=world_size if wait else -1, timeout_ms=milliseconds(timeout),
            wait_for_workers=int(wait))
        super().__init__(_capi.created(lib.c10d_store_tcp, options))
        self.host = host_name

    @property
    def port(self):
        port = c_uint16()
        _capi.check(lib.c10d_store_port(self._handle, byref(port)))
        return port.value


class FileStore(Store):
    """A store in a file that every process opens by path; world_size: how many will (-1: not
    known, and the file is then left behind)."""

    def __init__(self, file_name, world_size=-1, timeout=timedelta(seconds=300)):
        super().__init__(_capi.created(lib.c10d_store_file, str(file_name).encode(), world_size,
                                       milliseconds(timeout)))
        self.path = str(file_name)


class HashStore(Store):
    """A store inside this process."""

    def __init__(self):
        super().__init__(_capi.created(lib.c10d_store_hash))


class PrefixStore(Store):
    """The keys of store under prefix + "/"."""

    def __init__(self, prefix, store):
        if not isinstance(store, Store):
            raise InvalidArgument(f"PrefixStore: store is a {type(store).__name__}, not a c10d "
                                  "Store")
        super().__init__(_capi.created(lib.c10d_store_prefix, prefix.encode(), store.handle))
        self.underlying_store = store
