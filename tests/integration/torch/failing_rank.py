#!/usr/bin/env python3
"""A Python rank whose error escapes: rank 1 waits for a message nobody sends. Under a launcher
that names an error file, the error must reach the launcher's failure summary (the excepthook
init_process_group installs)."""
import numpy as np

import c10d as dist

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    dist.irecv(np.zeros(4, np.float32), 0, tag=78).wait(timeout=0.3)
dist.barrier()
