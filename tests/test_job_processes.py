"""A sweep's or benchmark's job processes do not outlive it: however the parent dies, each
child gets the Ctrl-C it stops on cleanly, even when the parent ran in the background with
SIGINT ignored."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="parent-death signals are Linux's"
)

PARENT = textwrap.dedent("""
    import subprocess, sys, threading
    from rlfw.launch.backends import job_process_setup

    child = ("import sys, time\\n"
             "print('started', flush=True)\\n"
             "try:\\n"
             "    time.sleep(120)\\n"
             "except KeyboardInterrupt:\\n"
             "    open(sys.argv[1], 'w').write('interrupted')\\n")

    def run():  # from a pool thread, as LocalBackend runs jobs
        subprocess.call([sys.executable, "-c", child, sys.argv[1]],
                        preexec_fn=job_process_setup(None))

    threading.Thread(target=run).start()
""")


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
@pytest.mark.integration
def test_a_job_child_is_interrupted_when_its_parent_is_killed(tmp_path, how):
    marker = tmp_path / "child-says"
    # the parent ignores SIGINT, as a command started with `cmd &` in a script does
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(marker)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        import psutil

        deadline = time.monotonic() + 30
        children = []
        while not children and time.monotonic() < deadline:
            children = psutil.Process(parent.pid).children()
            time.sleep(0.1)
        assert children, "the job child never started"
        time.sleep(1.0)  # the child is inside its sleep
        os.kill(parent.pid, how)
        parent.wait(10)
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, f"job children outlived their parent: {alive}"
        assert marker.read_text() == "interrupted"  # a KeyboardInterrupt, handled
    finally:
        parent.kill()
        parent.wait()
