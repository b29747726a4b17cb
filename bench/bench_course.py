"""How long each workshop lesson takes on this machine: its runs queued as one group with the
dashboard's run manager (each run in its own process, as in the room), wall time from Start to
the last result, next to the page's stated estimate, and the lesson's measured answer.

    python bench/bench_course.py                  # every lesson once
    python bench/bench_course.py --lessons co,queueing
    python bench/bench_course.py --quick          # the shortest lesson alone (CI's smoke run)
"""
from __future__ import annotations

import argparse
import sys
import time

from latency.execution.manager import RunManager
from latency.workshop import course


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lessons", default=",".join(item.key for item in course.course()))
    p.add_argument("--quick", action="store_true",
                   help="the lesson with the shortest stated estimate alone")
    a = p.parse_args(argv)
    keys = a.lessons.split(",")
    if a.quick:
        keys = [min(keys, key=lambda k: course.lesson(k).steps[0].estimated_s)]
    mgr = RunManager(store=None)
    print(f"{'lesson':<36}{'runs':>5}{'stated s':>10}{'wall s':>9}  answer")
    for key in keys:
        for item in course.lesson(key).steps:
            t = time.perf_counter()
            tickets = mgr.submit_group(item.configs(), owner="bench")
            results = [mgr.get(tk.run_id).wait(timeout=600) for tk in tickets]
            wall = time.perf_counter() - t
            ans = item.answer(results)
            print(f"{item.title:<36}{len(item.runs):>5}{item.estimated_s:>10.0f}{wall:>9.1f}  "
                  f"{ans.text}", flush=True)
            for check in ans.checks:
                print(f"{'':<36}{'':>24}  {check}")
    mgr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
