"""A save interrupted by a termination signal leaves no temporary file
(#12 item 4): SIGTERM and SIGHUP unwind the write, remove the
``.grit-*.tmp`` beside the target, and the process still ends by the signal."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

# The child saves through the real writer; once the temporary file holds the
# whole payload it says READY and waits, so the signal lands mid-save.
CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    import grit
    from grit import _files
    import grit.io.safetensors as st

    import grit.io.gguf_writer as gw

    real = _files.atomic_write
    def slow(path, write, **kw):
        def w(f):
            write(f)
            if not kw.get("by_name"):    # (a GGUF writer opens the file by name)
                f.flush()
            print("READY", flush=True)
            time.sleep(60)
        return real(path, w, **kw)
    st.atomic_write = gw.atomic_write = slow
    a = grit.encode(np.linspace(-1, 1, 4096, dtype=np.float32), grit.GRADE_MXFP4)
    grit.save(sys.argv[1], {"w": a})
""")


@pytest.mark.parametrize("suffix", [".safetensors", ".gguf"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_save_removes_the_temporary_file(tmp_path, sig, suffix):
    target = tmp_path / f"out{suffix}"
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(target)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == "READY", p.stderr.read()
        assert [f.name for f in tmp_path.iterdir() if f.name.startswith(".grit-")], \
            "the temporary file exists while the save runs"
        p.send_signal(sig)
        rc = p.wait(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert rc == -sig                       # still ended by the signal
    assert sorted(f.name for f in tmp_path.iterdir()) == []   # no tmp, no target


def test_a_handler_the_program_set_is_left_alone(tmp_path):
    """A program that handles SIGTERM itself keeps its handler: grit does not
    replace it during a save, and restores nothing it did not set."""
    child = textwrap.dedent("""
        import signal, sys
        import numpy as np
        import grit
        def mine(s, f): pass
        signal.signal(signal.SIGTERM, mine)
        a = grit.encode(np.ones(64, dtype=np.float32), grit.GRADE_MXFP4)
        grit.save(sys.argv[1], {"w": a})
        print(signal.getsignal(signal.SIGTERM) is mine)
    """)
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "x.safetensors")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_the_default_action_is_restored_after_a_save(tmp_path):
    child = textwrap.dedent("""
        import signal, sys
        import numpy as np
        import grit
        a = grit.encode(np.ones(64, dtype=np.float32), grit.GRADE_MXFP4)
        grit.save(sys.argv[1], {"w": a})
        print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL,
              signal.getsignal(signal.SIGHUP) is signal.SIG_DFL)
    """)
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path / "x.safetensors")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


def test_swapped_save_arguments_are_a_usage_error(tmp_path):
    import numpy as np

    import grit
    a = grit.encode(np.ones(64, dtype=np.float32), grit.GRADE_MXFP4)
    with pytest.raises(grit.GritUsageError, match="swapped"):
        grit.save({"w": a}, str(tmp_path / "x.safetensors"))
    with pytest.raises(grit.GritUsageError, match="mapping"):
        grit.save(str(tmp_path / "x.safetensors"), [a])
    assert list(tmp_path.iterdir()) == []
