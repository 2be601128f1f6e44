"""What machine a benchmark ran on, printed with every result."""

from __future__ import annotations

import os
import platform


def describe_machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [
                line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")
            ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.release()} · {cpu} · {os.cpu_count()} cores · "
        f"Python {platform.python_version()}"
    )
