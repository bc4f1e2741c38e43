"""§4.3 / §7.5 / L6: the kernel registry, selection by ⊑, propagation by ⊔,
the two shipped kernels, and the diagnostics when nothing fits."""
import dataclasses

import numpy as np
import pytest

import grit
from grit import layouts as L
from grit.kernels import get_kernel, register_kernel, unregister_kernel

MX = grit.GRADE_MXFP4
SEQ_MX = MX.replace(ao="seq")
CANONICAL_NAN = 0x7FC00000


@pytest.fixture(autouse=True)
def _isolate(monkeypatch):
    monkeypatch.delenv("GRIT_AUDIT_MAX_RATE", raising=False)
    grit.audit._reset_for_tests()
    before = {k.name for k in grit.kernels.kernels()}
    yield
    for k in grit.kernels.kernels():
        if k.name not in before:
            unregister_kernel(k.name)
    grit.audit._reset_for_tests()


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def weight(grade=MX, shape=(7, 64), seed=1, **kw):
    return grit.encode(rand(shape, seed), grade, **kw)


def zeros_kernel(x, w):
    return np.zeros((np.asarray(x).reshape(-1, w.shape[1]).shape[0], w.shape[0]), np.float32)


def sequential_loop(a, b):
    """The exact reference, written independently: scalar binary32 products,
    summed in increasing k, starting from the k = 0 product."""
    M, K = a.shape
    N = b.shape[0]
    out = np.empty((M, N), np.float32)
    with np.errstate(all="ignore"):
        for m in range(M):
            for n in range(N):
                acc = np.float32(a[m, 0]) * np.float32(b[n, 0])
                for k in range(1, K):
                    acc = np.float32(acc + np.float32(np.float32(a[m, k]) * np.float32(b[n, k])))
                out[m, n] = acc
    return out


def same_bits(x, y):
    x = np.ascontiguousarray(x, np.float32).view(np.uint32)
    y = np.ascontiguousarray(y, np.float32).view(np.uint32)
    return x.shape == y.shape and bool((x == y).all())


# --- the shipped kernels ------------------------------------------------------------------

def test_reference_seq_equals_an_independent_sequential_loop():
    x = rand((5, 64), 0)
    # order-sensitive inputs: a large value cancelled late, tiny terms in between
    x[0, :] = 1.0
    x[1, 0], x[1, 1:31], x[1, 31] = 1e8, 1.0, -1e8
    x[2, 7] = np.float32(2.0 ** -140)                     # a subnormal activation
    w = weight()
    r = grit.matmul(x, w, kernel="reference_seq")
    assert r.kernel == "reference_seq" and r.values.dtype == np.float32
    assert same_bits(r.values, sequential_loop(x, grit.decode(w)))


def test_reference_seq_is_order_exact_where_a_pairwise_sum_is_not():
    # K = 4: ((1e8 + 1) + 1) - 1e8 = 0 in order; a pairwise sum gives 2
    w = grit.encode(np.ones((1, 32), np.float32), MX)
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [1e8, 1.0, 1.0, -1e8]
    r = grit.matmul(x, w, kernel="reference_seq")
    assert r.values[0, 0] == np.float32(0.0)
    assert same_bits(r.values, sequential_loop(x, grit.decode(w)))


def test_reference_seq_nan_is_canonical_and_numpy_agrees_approximately():
    x = rand((3, 64), 2)
    x[1, 9] = np.float32("nan")
    w = weight()
    r = grit.matmul(x, w, kernel="reference_seq").values
    assert (r[1].view(np.uint32) == CANONICAL_NAN).all()
    u = grit.matmul(x, w, kernel="numpy_unspec").values
    assert (u[1].view(np.uint32) == CANONICAL_NAN).all()
    np.testing.assert_allclose(u[[0, 2]], r[[0, 2]], rtol=1e-5, atol=1e-4)


def test_operand_shapes():
    w = weight()
    wd = grit.decode(w)
    x3 = rand((2, 3, 64), 3)
    r = grit.matmul(x3, w, kernel="reference_seq")
    assert r.values.shape == (2, 3, 7)
    assert same_bits(r.values.reshape(6, 7), sequential_loop(x3.reshape(6, 64), wd))
    assert grit.matmul(x3[0, 0], w).values.shape == (7,)
    xi = np.arange(64, dtype=np.int8).reshape(1, 64)     # exact in binary32: accepted
    assert grit.matmul(xi, w).values.shape == (1, 7)
    xq = grit.encode(rand((4, 64), 4), MX)               # a GRIT activation
    rq = grit.matmul(xq, w, kernel="reference_seq")
    assert same_bits(rq.values, sequential_loop(grit.decode(xq), wd))
    with pytest.raises(grit.GritUsageError, match="binary32"):
        grit.matmul(rand((2, 64), 5).astype(np.float64), w)
    with pytest.raises(grit.GritUsageError, match="K=32"):
        grit.matmul(rand((2, 32), 5), w)
    with pytest.raises(grit.GritUsageError, match="L4"):       # B grouped along N
        grit.matmul(rand((2, 64), 5), weight(shape=(64, 64), group_axis=0))
    with pytest.raises(grit.GritUsageError):
        grit.matmul(rand((2, 64), 5), wd)                       # B must be a GritArray


# --- selection by ⊑ ------------------------------------------------------------------------

@pytest.mark.parametrize("request_, expect", [
    (None, "numpy_unspec"),
    ("ao=unspec", "numpy_unspec"),
    ("ao=seq", "reference_seq"),
    ("ao=tree", "reference_seq"),
    ("ao=pairwise8", "reference_seq"),
    ("an=preserve", "reference_seq"),
    (MX, "numpy_unspec"),
    (SEQ_MX, "reference_seq"),
    (SEQ_MX.canonical, "reference_seq"),
])
def test_selection_by_refinement(request_, expect):
    w = weight()
    r = grit.matmul(rand((2, 64), 6), w, grade=request_)
    assert r.kernel == expect
    offer = get_kernel(r.kernel).offer(w.grade)
    if isinstance(request_, (grit.Grade, str)) and not str(request_).startswith(("ao=", "an=")):
        assert offer.refines(request_)                 # the §4.3 selection rule itself
    # every kernel that was passed over fails k ⊑ r or costs more
    for k in grit.kernels.kernels():
        if k.name != expect and request_ is not None and isinstance(request_, grit.Grade):
            assert not k.offer(w.grade).refines(request_) or k.cost >= get_kernel(expect).cost


def test_named_kernel_is_used_or_refused_never_substituted():
    w = weight()
    assert grit.matmul(rand((2, 64), 7), w, kernel="reference_seq").kernel == "reference_seq"
    with pytest.raises(grit.GritUsageError, match="no kernel named"):
        grit.matmul(rand((2, 64), 7), w, kernel="cutlass")
    with pytest.raises(grit.GritGradeError) as ei:
        grit.matmul(rand((2, 64), 7), w, kernel="numpy_unspec", grade="ao=seq")
    assert str(ei.value) == (
        "requested ao=seq (deterministic); kernel 'numpy_unspec' offers ao=unspec "
        "(nondeterministic).\n"
        "  Options: grit.matmul(x, B, kernel='reference_seq')  (offers ao=seq "
        "(deterministic): software, exact, slower)\n"
        "           grade.relax(ao=unspec)  # accept nondeterminism, explicitly")


def test_request_with_another_representation_is_refused():
    with pytest.raises(grit.GritGradeError, match="flat"):
        grit.matmul(rand((2, 64), 8), weight(), grade=grit.GRADE_NVF4)


# --- propagation by ⊔ ----------------------------------------------------------------------

def test_propagation_is_the_join():
    x = rand((2, 64), 9)
    plain, seq = weight(), weight(SEQ_MX)
    ref, fast = get_kernel("reference_seq"), get_kernel("numpy_unspec")
    # an operand that permits ao=unspec weakens the result, whatever ran
    r = grit.matmul(x, plain, grade="ao=seq")
    assert r.grade == plain.grade.join(ref.offer(plain.grade))
    assert r.grade["ao"] == "unspec"
    # an operand that promises ao=seq keeps it through the exact kernel …
    r = grit.matmul(x, seq, grade="ao=seq")
    assert r.kernel == "reference_seq" and r.grade == seq.grade.join(ref.offer(seq.grade))
    assert r.grade["ao"] == "seq" and r.grade["an"] == "any"     # preserve ⊔ any
    # … and loses it through the fast one
    r = grit.matmul(x, seq)
    assert r.kernel == "numpy_unspec" and r.grade == seq.grade.join(fast.offer(seq.grade))
    assert r.grade["ao"] == "unspec"
    # subnormal axis: ftz ⊔ preserve = any
    ftz = weight(SEQ_MX.replace(an="ftz"))
    r = grit.matmul(x, ftz, kernel="reference_seq")
    assert r.grade["an"] == "any" and r.grade["ao"] == "seq"


def test_propagation_with_a_grit_activation():
    w = weight(SEQ_MX)
    xs = grit.encode(rand((3, 64), 10), SEQ_MX)
    r = grit.matmul(xs, w, grade="ao=seq")
    assert r.grade == xs.grade.join(w.grade).join(get_kernel(r.kernel).offer(w.grade))
    xu = grit.encode(rand((3, 64), 10), MX)                   # permits unspec
    assert grit.matmul(xu, w, grade="ao=seq").grade["ao"] == "unspec"
    # different representations: no full join exists; B's representation is kept
    xn = grit.encode(rand((3, 64), 11), grit.GRADE_NVF4.replace(ao="seq"))
    with pytest.raises(grit.GritGradeError):
        xn.grade.join(w.grade)
    r = grit.matmul(xn, w, grade="ao=seq")
    assert r.grade == SEQ_MX.replace(an="any")
    assert same_bits(r.values, sequential_loop(grit.decode(xn), grit.decode(w)))


def test_flat_accumulation_disagreement_has_no_result_grade():
    w = weight(MX.replace(ab="binary16"))
    with pytest.raises(grit.GritGradeError, match="no result grade|flat"):
        grit.matmul(rand((2, 64), 12), w)


# --- §7.5 diagnostics --------------------------------------------------------------------

def test_layout_error_message_shape():
    register_kernel("swizzle_unspec", "ao=unspec",
                    {"data": L.SWIZZLE_128x4B, "scale": L.SWIZZLE_128x4B}, zeros_kernel)
    B = grit.assume_placement(weight(), data=L.SWIZZLE_128x4B, scale=L.SWIZZLE_128x4B,
                              reason="exporter swizzled the tiles")
    with pytest.raises(grit.GritLayoutError) as ei:
        grit.matmul(rand((2, 64), 13), B, kernel="reference_seq")
    assert str(ei.value) == (
        "matmul operand B is placed SWIZZLE_128X4B (0x1000…0003) but kernel 'reference_seq' "
        "requires ROW_MAJOR (0x1000…0001).\n"
        "  Fix:  B = grit.relayout(B, grit.layouts.ROW_MAJOR)\n"
        "  Or:   grit.matmul(x, B, kernel='swizzle_unspec')")
    assert ei.value.status == grit.Status.PLACEMENT_UNKNOWN
    # the suggested alternative works, and is what selection picks by itself
    assert grit.matmul(rand((2, 64), 13), B, kernel="swizzle_unspec").kernel == "swizzle_unspec"
    assert grit.matmul(rand((2, 64), 13), B).kernel == "swizzle_unspec"


def test_layout_error_without_alternative_and_for_unspecified_bytes():
    B = grit.assume_placement(weight(), data=L.TILE_16X16, reason="tiles")
    with pytest.raises(grit.GritLayoutError) as ei:
        grit.matmul(rand((2, 64), 14), B)
    msg = str(ei.value)
    assert msg.startswith("matmul operand B is placed TILE_16X16 (0x1000…0004) but kernel '")
    assert "\n  Fix:  B = grit.relayout(B, grit.layouts.ROW_MAJOR)" in msg and "Or:" not in msg
    U = weight(placement_data=0, placement_scale=0)
    with pytest.raises(grit.GritLayoutError) as ei:
        grit.matmul(rand((2, 64), 14), U)
    assert "placed UNSPECIFIED (0x0000…0000)" in str(ei.value)
    assert "grit.assume_placement(B, grit.layouts.ROW_MAJOR, reason=" in str(ei.value)
    S = grit.assume_placement(weight(), reason="scales only", scale=L.TILE_16X16)
    with pytest.raises(grit.GritLayoutError, match=r"B's scale plane is placed TILE_16X16"):
        grit.matmul(rand((2, 64), 14), S)


def test_grade_error_message_shape_and_its_advice_works():
    register_kernel("swizzle_unspec", "ao=unspec",
                    {"data": L.SWIZZLE_128x4B, "scale": L.SWIZZLE_128x4B}, zeros_kernel)
    B = grit.assume_placement(weight(), data=L.SWIZZLE_128x4B, scale=L.SWIZZLE_128x4B,
                              reason="exporter swizzled the tiles")
    want = SEQ_MX
    with pytest.raises(grit.GritGradeError) as ei:
        grit.matmul(rand((2, 64), 15), B, grade=want)
    exact = get_kernel("reference_seq").offer(B.grade).canonical
    assert str(ei.value) == (
        "requested ao=seq (deterministic); the only kernel for (GRADE_MXFP4, B placed "
        "SWIZZLE_128X4B), 'swizzle_unspec', offers ao=unspec (nondeterministic).\n"
        f"  Options: grade={exact}  (kernel 'reference_seq': software, exact, slower, "
        "needs B = grit.relayout(B, grit.layouts.ROW_MAJOR))\n"
        "           grade.relax(ao=unspec)  # accept nondeterminism, explicitly")
    r = grit.matmul(rand((2, 64), 15), B, grade=want.relax(ao="unspec"))
    assert r.kernel == "swizzle_unspec"


def test_grade_error_on_a_flat_axis_suggests_replace():
    with pytest.raises(grit.GritGradeError) as ei:
        grit.matmul(rand((2, 64), 16), weight(), grade="ab=binary16")
    assert "requested ab=binary16" in str(ei.value)
    assert "grade.replace(ab=binary32)" in str(ei.value)


# --- L6 ----------------------------------------------------------------------------------

UNORD = "grit1(e=s8,k0=32,s0=binary16,sp=2:4:u2:unord,esr=ratiomaxabs)"


def test_l6_a_kernel_requiring_asc_lsb_rejects_unordered_metadata():
    register_kernel("sparse_ordered", "ao=unspec",
                    {"data": L.ROW_MAJOR, "scale": L.ROW_MAJOR, "meta": L.LINEAR_META},
                    lambda x, w: np.matmul(x, grit.decode(w).T), sp_order="asclsb")
    x = rand((2, 64), 17)
    unord = weight(UNORD)
    with pytest.raises(grit.GritLayoutError) as ei:
        grit.matmul(x, unord, kernel="sparse_ordered")
    msg = str(ei.value)
    assert msg.startswith("matmul operand B's sparse metadata is SPORDER_UNORDERED but kernel "
                          "'sparse_ordered' requires SPORDER_ASC_LSB (L6).")
    assert "Or:   grit.matmul(x, B, kernel='numpy_unspec')" in msg
    ordered = weight(grit.GRADE_I8S24)
    r = grit.matmul(x, ordered, kernel="sparse_ordered")
    assert r.kernel == "sparse_ordered"
    # selection skips the ordered kernel for the unordered operand
    assert grit.matmul(x, unord).kernel == "numpy_unspec"


# --- the registry ------------------------------------------------------------------------

def test_registry_validation():
    with pytest.raises(grit.GritUsageError, match="already registered"):
        register_kernel("reference_seq", "ao=seq", {"data": L.ROW_MAJOR}, zeros_kernel)
    with pytest.raises(grit.GritGradeError):
        register_kernel("k1", "e=e2m1", {"data": L.ROW_MAJOR}, zeros_kernel)
    with pytest.raises(grit.GritUsageError, match="unknown role"):
        register_kernel("k2", "ao=seq", {"planes": L.ROW_MAJOR}, zeros_kernel)
    with pytest.raises(grit.GritLayoutError):
        register_kernel("k3", "ao=seq", {"data": L.UNSPECIFIED}, zeros_kernel)
    with pytest.raises(grit.GritUsageError):
        register_kernel("k4", "ao=seq", {"data": L.ROW_MAJOR}, "not callable")
    with pytest.raises(grit.GritUsageError):
        register_kernel("", "ao=seq", {"data": L.ROW_MAJOR}, zeros_kernel)
    k = register_kernel("mx_only", MX.replace(ao="tree"), {"data": "row_major"}, zeros_kernel)
    assert k.accumulation["ao"] == "tree" and k.operand_grades == (MX.replace(ao="tree"),)
    assert k.accepts_grade(MX) and not k.accepts_grade(grit.GRADE_NVF4)
    with pytest.raises(grit.GritGradeError, match="serves"):
        grit.matmul(rand((2, 32), 18), weight(grit.GRADE_NVF4, shape=(4, 32)),
                    kernel="mx_only")
    unregister_kernel("mx_only")
    with pytest.raises(grit.GritUsageError):
        unregister_kernel("mx_only")


def test_kernel_output_is_checked_and_result_is_frozen():
    register_kernel("bad_shape", "ao=unspec", {"data": L.ROW_MAJOR},
                    lambda x, w: np.zeros((1, 1), np.float32), cost=0.0)
    with pytest.raises(grit.GritUsageError, match="bad_shape"):
        grit.matmul(rand((2, 64), 19), weight())
    r = grit.matmul(rand((2, 64), 19), weight(), kernel="numpy_unspec")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.kernel = "other"


# --- operands in a non-canonical placement they were built in ---------------------------

def _seq(x, w):
    """Σ_k in order, one binary32 rounding per product and per sum (the
    contract of reference_seq, written out again as the oracle)."""
    acc = x[:, 0:1] * w[:, 0][None, :]
    for k in range(1, x.shape[1]):
        acc = (acc + (x[:, k:k + 1] * w[:, k][None, :]).astype(np.float32)).astype(np.float32)
    return acc


def _gguf_blocks(name, rows, cols, rng):
    """Random blocks of ggml type ``name`` with finite, moderate scales."""
    gguf = pytest.importorskip("gguf")
    t = gguf.GGMLQuantizationType[name]
    be, bb = gguf.GGML_QUANT_SIZES[t]
    b = rng.integers(0, 256, (rows, cols // be, bb), dtype=np.uint8)
    if name in ("Q8_0", "Q4_K"):         # f16 d (and dmin) in [2^-8, 2^-4)
        for off in ((0,) if name == "Q8_0" else (0, 2)):
            b[..., off:off + 2] = (rng.uniform(2 ** -8, 2 ** -4, b.shape[:2])
                                   .astype(np.float16)[..., None].view(np.uint8))
    elif name == "MXFP4":                # e8m0 exponent near 2^0
        b[..., 0] = rng.integers(120, 130, b.shape[:2])
    return t, b.reshape(rows, -1)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "MXFP4"])
def test_matmul_takes_a_gguf_weight_as_loaded(tmp_path, name):
    from _support import write_gguf
    import gguf
    rng = np.random.default_rng(21)
    t, blocks = _gguf_blocks(name, 8, 256, rng)
    path = write_gguf(tmp_path / "m.gguf", {"w": (blocks, t)})
    B = grit.load(path)["w"]
    assert B.shape == (8, 256)
    assert B.descriptor.placement_data != L.ROW_MAJOR        # the file's block struct
    W = gguf.quants.dequantize(blocks, t).astype(np.float32)   # gguf-py, the oracle
    assert np.isfinite(W).all()
    x = rng.standard_normal((3, 256)).astype(np.float32)
    r = grit.matmul(x, B, kernel="reference_seq")
    assert r.kernel == "reference_seq"
    assert np.array_equal(r.values.view(np.uint32), _seq(x, W).view(np.uint32))
    # selection relayouts too; the loaded array is left as it was
    r = grit.matmul(x, B)
    assert r.kernel == "numpy_unspec"
    np.testing.assert_allclose(r.values, x @ W.T, rtol=1e-4, atol=1e-3)
    assert B.descriptor.placement_data != L.ROW_MAJOR


def test_a_kernel_reading_the_placement_gets_the_operand_as_placed(tmp_path):
    from _support import write_gguf
    rng = np.random.default_rng(22)
    t, blocks = _gguf_blocks("Q8_0", 4, 64, rng)
    B = grit.load(write_gguf(tmp_path / "m.gguf", {"w": (blocks, t)}))["w"]
    seen = []
    register_kernel("reads_blocks", "ao=unspec",
                    {"data": B.descriptor.placement_data, "scale": B.descriptor.placement_scale},
                    lambda x, w: (seen.append(w), np.zeros((x.shape[0], 4), np.float32))[1],
                    cost=0.5)
    try:
        assert grit.matmul(rand((2, 64), 23), B).kernel == "reads_blocks"
    finally:
        unregister_kernel("reads_blocks")
    assert len(seen) == 1 and seen[0] is B
