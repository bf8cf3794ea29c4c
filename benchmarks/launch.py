"""Run one command and print its own resource use as JSON: exit code, wall, CPU, peak RSS.

    python benchmarks/launch.py STDOUT_FILE STDERR_FILE TIMEOUT_S -- COMMAND ...

Why a separate launcher: on Linux a child's ``ru_maxrss`` starts at its parent's RSS when it
is forked (a 13 MiB ``python -c pass`` reads as 414 MiB when started from a 400 MiB
process), and the benchmark harness holds pandas and data. Started from this small process,
the command's peak RSS is its own. CPU and peak RSS come from ``os.wait4`` (this child
alone); wall time runs from just before the spawn to the child's exit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time


def main() -> None:
    out_path, err_path, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    cmd = sys.argv[5:] if sys.argv[4] == "--" else sys.argv[4:]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    print(
        json.dumps(
            {
                "returncode": proc.returncode,
                "wall_s": wall,
                "user_s": usage.ru_utime,
                "sys_s": usage.ru_stime,
                "maxrss_kib": usage.ru_maxrss,
                "timed_out": wall >= timeout,
            }
        )
    )


if __name__ == "__main__":
    main()
