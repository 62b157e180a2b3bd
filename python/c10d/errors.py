"""The exceptions c10d raises, one per c10d_status; their text is the C++ library's message."""

import builtins


class Error(RuntimeError):
    """Any failure the c10d library reports (C10D_ERR_INTERNAL raises this class itself)."""


class TimeoutError(Error, builtins.TimeoutError):
    """A blocking call ran past its deadline."""


class InvalidArgument(Error, ValueError):
    """The call cannot accept what it was given."""


class StoreError(Error):
    """The store is unreachable, failed, or spoke another protocol."""


class BackendError(Error):
    """The communication backend failed the operation."""


class RemoteError(Error):
    """A remote call failed on the callee."""


class StateError(Error):
    """The group or work was shut down, destroyed or released, or never initialized."""


class CheckpointError(Error):
    """A checkpoint that cannot be written or used: incomplete, damaged, or unlike the state."""


class DistQueueEmptyError(StoreError):
    """Store.queue_pop(key, block=False) found key's queue empty (torch 2.6's class of the name)."""


# The names torch.distributed 2.x gives the same classes.
DistError = Error
DistBackendError = BackendError
DistStoreError = StoreError
