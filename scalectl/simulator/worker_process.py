"""What every worker process of the simulator does: exit when the process that started it is gone.

A ProcessPoolExecutor's workers do not watch their parent. Killed (SIGTERM, SIGKILL), a search or a
simulation cannot stop them: each finished the job it held (minutes of an oracle, a day's trial) and then
waited on the task queue for good, with the job's memory.
"""

from __future__ import annotations

import os
import threading
import time

PARENT_CHECK_S = 1.0


def exit_with_parent(parent: int) -> None:
    """Start a daemon thread that ends this process once its parent is no longer ``parent`` (an initializer)."""
    threading.Thread(target=_watch, args=(parent,), name="exit-with-parent", daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)  # orphaned: nobody will read this worker's result
