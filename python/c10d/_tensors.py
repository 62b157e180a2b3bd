"""User tensors as c10d_buffer descriptors over their own memory (zero copy).

buffer(obj, name, writable) accepts, in this order of preference:
  torch.Tensor (CPU or CUDA; torch is never imported here, only used once the caller has it),
  numpy.ndarray, any object with __dlpack__, and objects with the buffer protocol (bytearray,
  array.array, memoryview...).
The descriptor does not own the memory: torch tensors and numpy arrays are kept alive by whoever
holds the caller's object; for the other kinds the descriptor carries what keeps the memory
exported (the DLPack capsule, the buffer export) in its `_keep` attribute, so keeping the
descriptor keeps the memory valid.
"""

import ctypes
import sys
from ctypes import POINTER, PYFUNCTYPE, Structure, c_char_p, c_int, c_ssize_t, c_void_p

from . import _capi
from ._capi import Buffer
from .errors import InvalidArgument

_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64",
                "uint8", "bool")
_SUPPORTED = ", ".join(_DTYPE_NAMES)

# Filled the first time a tensor of that library is seen; keyed by the library's dtype objects.
_numpy_dtypes = None
_torch_dtypes = None

# The converter for each exact type seen so far, so a call costs one dict lookup.
_converters = {}


def buffer(obj, name, writable):
    """The c10d_buffer over obj's memory; name is the argument's name, for error messages."""
    try:
        return _converters[type(obj)](obj, name, writable)
    except KeyError:
        pass
    convert = _converter_for(obj, name)
    _converters[type(obj)] = convert
    return convert(obj, name, writable)


def buffers(objs, name, writable):
    """A ctypes array of c10d_buffer for a list of tensors (what the list calls of c10d.h take)."""
    if objs is None:
        return None
    items = [buffer(obj, f"{name}[{i}]", writable) for i, obj in enumerate(objs)]
    array = (Buffer * len(items))(*items)
    # Copies went into the array: the originals carry what keeps their memory valid.
    array._keep = items
    return array


def row_elements(obj):
    """Elements per dim-0 row (what torch's split sizes count); 1-D when obj has no shape."""
    shape = getattr(obj, "shape", None)
    if not shape:
        return 1
    count = 1
    for extent in tuple(shape)[1:]:
        count *= int(extent)
    return count


def _converter_for(obj, name):
    kind = type(obj)
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(kind, torch.Tensor):
        return _from_torch
    numpy = sys.modules.get("numpy")
    if numpy is not None and issubclass(kind, numpy.ndarray):
        return _from_numpy
    if hasattr(kind, "__dlpack__"):
        return _from_dlpack
    try:
        memoryview(obj).release()
    except TypeError:
        raise InvalidArgument(
            f"{name}: a {kind.__module__}.{kind.__qualname__} is not a tensor c10d can use; pass "
            "a torch.Tensor, a numpy.ndarray, an object with __dlpack__, or a buffer (bytearray, "
            "array.array, memoryview)") from None
    return _from_buffer_protocol


def _unsupported_dtype(name, dtype):
    return InvalidArgument(f"{name} has dtype {dtype}, which c10d does not support; convert it to "
                           f"one of {_SUPPORTED}")


def _not_contiguous(name, how):
    return InvalidArgument(f"{name} is not contiguous; pass a contiguous copy ({how})")


def _read_only(name):
    return InvalidArgument(f"{name} is read-only, but c10d writes the result into it; pass a "
                           "writeable array (a copy)")


# ---- torch ----

def _torch_dtype_table(torch):
    return {torch.float32: _capi.FLOAT32, torch.float64: _capi.FLOAT64,
            torch.float16: _capi.FLOAT16, torch.bfloat16: _capi.BFLOAT16, torch.int8: _capi.INT8,
            torch.int16: _capi.INT16, torch.int32: _capi.INT32, torch.int64: _capi.INT64,
            torch.uint8: _capi.UINT8, torch.bool: _capi.BOOL}


def _from_torch(t, name, writable):
    global _torch_dtypes
    if _torch_dtypes is None:
        _torch_dtypes = _torch_dtype_table(sys.modules["torch"])
    dtype = _torch_dtypes.get(t.dtype)
    if dtype is None:
        raise _unsupported_dtype(name, t.dtype)
    if not t.is_contiguous():
        raise _not_contiguous(name, "tensor.contiguous()")
    if t.is_cpu:
        return Buffer(t.data_ptr(), t.numel(), dtype)
    if t.is_cuda:
        torch = sys.modules["torch"]
        stream = torch.cuda.current_stream(t.device).cuda_stream
        return Buffer(t.data_ptr(), t.numel(), dtype, _capi.DEVICE_CUDA, t.device.index, stream)
    raise InvalidArgument(f"{name} is on device {t.device}; c10d takes CPU and CUDA tensors")


# ---- numpy ----

def _numpy_dtype_table(numpy):
    return {numpy.dtype(n): getattr(_capi, n.upper()) for n in _DTYPE_NAMES if n != "bfloat16"}


def _from_numpy(a, name, writable):
    global _numpy_dtypes
    if _numpy_dtypes is None:
        _numpy_dtypes = _numpy_dtype_table(sys.modules["numpy"])
    dtype = _numpy_dtypes.get(a.dtype)
    if dtype is None:
        raise _unsupported_dtype(name, a.dtype)
    flags = a.flags
    if not flags.c_contiguous:
        raise _not_contiguous(name, "numpy.ascontiguousarray(array)")
    if writable and not flags.writeable:
        raise _read_only(name)
    return Buffer(a.ctypes.data, a.size, dtype)


# ---- DLPack ----

_capsule_pointer = PYFUNCTYPE(c_void_p, ctypes.py_object, c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def _from_dlpack(obj, name, writable):
    # The capsule stays unconsumed (named "dltensor"): when it is garbage, its destructor calls
    # the producer's deleter, which is what releases the producer's hold on the memory.
    try:
        capsule = obj.__dlpack__()
    except BufferError as e:
        raise InvalidArgument(f"{name}: its __dlpack__ refused: {e}") from None
    out = Buffer()
    status = _capi.lib.c10d_buffer_from_dlpack(_capsule_pointer(capsule, b"dltensor"), out)
    if status:
        raise _capi.error(status, f"{name}: ".encode() + _capi.lib.c10d_last_error())
    out._keep = capsule
    return out


# ---- buffer protocol ----

class _PyBuffer(Structure):
    """CPython's Py_buffer."""

    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", c_ssize_t),
                ("itemsize", c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", c_char_p), ("shape", c_void_p), ("strides", c_void_p),
                ("suboffsets", c_void_p), ("internal", c_void_p)]


_PyBUF_WRITABLE = 0x0001
_PyBUF_FORMAT = 0x0004
_PyBUF_C_CONTIGUOUS = 0x0020 | 0x0010 | 0x0008
_get_buffer = PYFUNCTYPE(c_int, ctypes.py_object, POINTER(_PyBuffer), c_int)(
    ("PyObject_GetBuffer", ctypes.pythonapi))
_release_buffer = PYFUNCTYPE(None, POINTER(_PyBuffer))(("PyBuffer_Release", ctypes.pythonapi))

_SIGNED = {1: _capi.INT8, 2: _capi.INT16, 4: _capi.INT32, 8: _capi.INT64}
_FLOATS = {"e": _capi.FLOAT16, "f": _capi.FLOAT32, "d": _capi.FLOAT64}


def _dtype_of_format(fmt, itemsize):
    if fmt[:1] in ("@", "=", "<"):  # native or little-endian: this library's hosts are
        fmt = fmt[1:]
    if fmt in _FLOATS:
        return _FLOATS[fmt]
    if fmt in ("b", "h", "i", "l", "q", "n"):
        return _SIGNED.get(itemsize)
    if fmt in ("B", "c") or (fmt in ("H", "I", "L", "Q", "N") and itemsize == 1):
        return _capi.UINT8 if itemsize == 1 else None
    if fmt == "?":
        return _capi.BOOL
    return None


class _Export:
    """A buffer export of an object (PyObject_GetBuffer), released when this is garbage."""

    __slots__ = ("view",)

    def __init__(self, obj, flags):
        self.view = None
        view = _PyBuffer()
        _get_buffer(obj, view, flags)
        self.view = view

    def __del__(self, _release=_release_buffer):
        if self.view is not None:
            _release(self.view)


def _from_buffer_protocol(obj, name, writable):
    flags = _PyBUF_FORMAT | _PyBUF_C_CONTIGUOUS | (_PyBUF_WRITABLE if writable else 0)
    try:
        export = _Export(obj, flags)
    except BufferError as e:
        if writable and memoryview(obj).readonly:
            raise _read_only(name) from None
        raise InvalidArgument(f"{name}: {e}; pass a contiguous buffer") from None
    view = export.view
    fmt = view.format.decode() if view.format else "B"
    dtype = _dtype_of_format(fmt, view.itemsize)
    if dtype is None:
        raise _unsupported_dtype(name, f"'{fmt}' (buffer format)")
    out = Buffer(view.buf, view.len // view.itemsize, dtype)
    out._keep = export
    return out

