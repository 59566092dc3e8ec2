"""An interrupted ``local_map`` ends its workers at once: before, the tasks in flight ran to
their end (their results thrown away) and the interpreter's exit waited for them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time


def test_an_interrupted_local_map_exits_without_waiting_for_tasks_in_flight() -> None:
    script = textwrap.dedent("""
        import time
        from aryl_gym.parallel import local_map

        if __name__ == "__main__":
            # spawn-ed workers import the task's function: a module-level one (returns None)
            gen = local_map(time.sleep, [0.2, 60.0, 60.0], workers=2)
            print(next(gen), flush=True)  # the short task; a 60 s one is in flight
            gen.close()  # what an interruption (KeyboardInterrupt in the loop) does to it
            print("closed", flush=True)
    """)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr[-800:]
    assert out.stdout.split() == ["None", "closed"]
    assert took < 20, took  # was: about 60 s (the task in flight ran to its end)
