"""Peak resident memory of a process, for the benchmarks."""
from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb(pid: int | str = "self") -> float:
    """A process's peak RSS (VmHWM) in MB.

    For this process ``getrusage``'s ru_maxrss is only a fallback: Linux
    carries the parent's peak across fork and exec into the child.
    """
    status = Path(f"/proc/{pid}/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 if pid == "self" else float("nan")
