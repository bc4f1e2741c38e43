"""What a benchmark's child process measures of itself, as code for
``python -c``: :data:`HEAD` goes before the work, :data:`TAIL` after it.

HEAD defines ``status(key)`` (a ``/proc/self/status`` entry in bytes) and
starts a thread sampling the anonymous RSS (``RssAnon``: the memory that is
not pages of mapped files) every 5 ms; TAIL stops it and prints one JSON line
with the work's wall time (from ``t``, which the body sets when the timed part
starts), its CPU time (user + system since ``cpu0``), the peak RSS (``VmHWM``,
not ``ru_maxrss``, which keeps the peak of the process before exec: the
parent's) and the peak anonymous RSS, merged with the body's dict ``extra``."""

HEAD = r"""
import json, os, resource, sys, threading, time
peak_anon = [0]
stop = threading.Event()
extra = {}
def status(key):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
def sample():
    while not stop.is_set():
        peak_anon[0] = max(peak_anon[0], status("RssAnon"))
        time.sleep(0.005)
th = threading.Thread(target=sample, daemon=True)
th.start()
def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime
cpu0 = cpu()
t = time.perf_counter()
"""

TAIL = r"""
wall = time.perf_counter() - t
stop.set()
th.join()
print(json.dumps({"wall": wall, "cpu": cpu() - cpu0, "rss": status("VmHWM"),
                  "anon": max(peak_anon[0], status("RssAnon")), **extra}))
"""


def medians(runs: list[dict]) -> dict:
    """The median of each of the children's measurements over ``runs``."""
    import statistics
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}
