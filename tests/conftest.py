"""Fixtures shared by several test files."""
import pytest

import grit

try:
    from grit import _kernels
except ImportError:  # pragma: no cover - only where no compiler exists
    _kernels = None

#: the loops of the C extension this machine can run
SIMD = ["portable"] + (["avx2"] if _kernels is not None and _kernels.simd() == "avx2" else [])


@pytest.fixture(params=SIMD)
def simd(request):
    """Both loops of the extension: the AVX2 one where the CPU has it, and the
    portable one (the test file skips itself where the extension is missing)."""
    prev = _kernels.simd()
    _kernels.simd(request.param == "avx2")
    assert _kernels.simd() == request.param
    yield request.param
    _kernels.simd(prev == "avx2")


@pytest.fixture
def clean_audit(monkeypatch):
    """A fresh per-process audit ledger and no rate ceiling, before and after."""
    monkeypatch.delenv("GRIT_AUDIT_MAX_RATE", raising=False)
    grit.audit._reset_for_tests()
    yield
    grit.audit._reset_for_tests()


@pytest.fixture(scope="module")
def ct():
    """tests/ct_official.py: compressed-tensors checkpoints written by
    compressed-tensors itself (needs torch and the library; skips without)."""
    pytest.importorskip("torch", reason="torch (CPU) is not installed")
    pytest.importorskip("compressed_tensors", reason="compressed-tensors is not installed")
    import ct_official
    return ct_official


@pytest.fixture(autouse=True, scope="session")
def _private_header_cache(tmp_path_factory):
    """The header cache of remote scans (grit.io.http.default_cache) in a
    folder of this test process: never the user's ~/.cache, and never one
    shared between the processes of a parallel run (pytest -n).  A test that
    sets GRIT_CACHE_DIR itself still wins."""
    import os
    prev = os.environ.get("GRIT_CACHE_DIR")
    os.environ["GRIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("grit-cache"))
    yield
    if prev is None:
        os.environ.pop("GRIT_CACHE_DIR", None)
    else:
        os.environ["GRIT_CACHE_DIR"] = prev
