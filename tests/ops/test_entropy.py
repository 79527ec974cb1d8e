"""Per-step uncertainty (xmemory_gpu.ops.entropy): the float64 reference against a hand-worked case,
torch and triton against the reference on fresh random inputs, and the dispatcher.

Without a GPU the triton kernel runs in the Triton interpreter (tests/conftest.py sets
TRITON_INTERPRET): shapes are kept small. With a GPU the same tests run the compiled kernel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import xmemory_gpu.ops.entropy as ent_mod
from xmemory_gpu.ops import backends as bk
from xmemory_gpu.ops.entropy import reference, token_entropy_logprob

from .gpu import requires_cuda

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings(
    "ignore:Conversion of an array with ndim > 0:DeprecationWarning"
)  # interpreter

DEV = "cuda" if torch.cuda.is_available() else "cpu"
TOL = {"rtol": 1e-5, "atol": 1e-5}


def _triton():
    pytest.importorskip("triton")
    from xmemory_gpu.ops.entropy import triton as kt

    return kt


def _ref(z, ids) -> tuple[np.ndarray, np.ndarray]:
    """float64 reference on exactly the values the kernel sees (low precision upcast first)."""
    zz = z.detach().float().cpu().numpy() if isinstance(z, torch.Tensor) else np.asarray(z)
    return reference.token_entropy(zz), reference.token_logprob(zz, np.asarray(ids))


def _run_triton(z, ids):
    e, lp = token_entropy_logprob(z, ids, backend="triton")
    assert e.dtype == torch.float32 and lp.dtype == torch.float32
    assert e.device == z.device and lp.device == z.device and e.shape == lp.shape == (z.shape[0],)
    return e.cpu().numpy(), lp.cpu().numpy()


def _logits(rng, t, v, scale=3.0, dtype=torch.float32):
    return torch.from_numpy(rng.standard_normal((t, v)) * scale).to(DEV, dtype)


# ---- reference and torch -------------------------------------------------------------------------


def test_reference_hand_worked():
    # p = (1/6, 2/6, 3/6): H = ln6/6 + ln3/3 + ln2/2; chosen token 2 has log p = ln(1/2)
    z = np.log(np.array([[1.0, 2.0, 3.0], [5.0, 5.0, 5.0]]))
    z[1] = 0.0  # uniform over 3: H = ln 3, log p = -ln 3
    for shift in (0.0, 700.0):  # softmax is shift-invariant; no overflow at exp(700)
        e, lp = token_entropy_logprob(z + shift, [2, 0], backend="reference")
        h = math.log(6) / 6 + math.log(3) / 3 + math.log(2) / 2
        np.testing.assert_allclose(e, [h, math.log(3)], rtol=1e-12)
        np.testing.assert_allclose(lp, [-math.log(2), -math.log(3)], rtol=1e-12)
    assert h == pytest.approx(1.0114042647073518, rel=1e-12)


@pytest.mark.parametrize("t,v", [(7, 50), (1, 1), (5, 1000)])
def test_torch_matches_reference(rng, t, v):
    z = rng.standard_normal((t, v)) * 3
    ids = rng.integers(0, v, t)
    e_ref, l_ref = token_entropy_logprob(z, ids, backend="reference")
    e_t, l_t = token_entropy_logprob(torch.from_numpy(z).float(), torch.from_numpy(ids))  # auto: cpu (torch)
    assert isinstance(e_t, torch.Tensor) and e_t.dtype == torch.float32
    np.testing.assert_allclose(e_t.numpy(), e_ref, **TOL)
    np.testing.assert_allclose(l_t.numpy(), l_ref, **TOL)


# ---- triton against the float64 reference --------------------------------------------------------


@pytest.mark.parametrize("v", [1, 5, 50, 1000, 3001])
@pytest.mark.parametrize("t", [0, 1, 7, 33])
def test_triton_random_shapes(rng, t, v):
    _triton()
    z = _logits(rng, t, v, scale=rng.uniform(0.5, 5.0))
    ids = torch.from_numpy(rng.integers(0, v, t))
    e, lp = _run_triton(z, ids)
    e_ref, l_ref = _ref(z, ids)
    np.testing.assert_allclose(e, e_ref, **TOL)
    np.testing.assert_allclose(lp, l_ref, **TOL)


@pytest.mark.parametrize("block,v", [(64, 1001), (64, 1024), (2048, 5000)])
def test_triton_block_sizes(rng, monkeypatch, block, v):
    # other chunkings (64: many iterations; 2048: the GPU block): whole chunks, with and without a
    # ragged tail, and the max moving up between chunks
    kt = _triton()
    monkeypatch.setattr(kt, "_config", lambda v, itemsize: (block, 4))
    z = _logits(rng, 6, v)
    z[:, -101:] += torch.linspace(0, 20, 101, device=DEV)  # the max arrives late
    ids = torch.from_numpy(rng.integers(0, v, 6))
    e, lp = _run_triton(z, ids)
    e_ref, l_ref = _ref(z, ids)
    np.testing.assert_allclose(e, e_ref, **TOL)
    np.testing.assert_allclose(lp, l_ref, **TOL)


def test_triton_non_contiguous_views(rng):
    _triton()
    b, steps, v = 3, 9, 777
    full = _logits(rng, b * steps, v).reshape(b, steps, v)
    ids = torch.from_numpy(rng.integers(0, v, 5))
    views = {
        "logits[i, :t] of [b, steps, V]": full[1, :5],
        "row stride > V": full.reshape(b * steps, v)[:5, 100:400],
        "every other row": full[2, ::2][:5],
        "column stride != 1 (transposed)": full[0].T.contiguous().T[:5],
        "strided columns": full[0, :5, ::3],
    }
    for name, z in views.items():
        ids_v = ids % z.shape[1]
        e, lp = _run_triton(z, ids_v)
        e_ref, l_ref = _ref(z, ids_v)
        np.testing.assert_allclose(e, e_ref, **TOL, err_msg=name)
        np.testing.assert_allclose(lp, l_ref, **TOL, err_msg=name)
    assert not views["column stride != 1 (transposed)"].is_contiguous()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float64"])
def test_triton_dtypes(rng, dtype):
    _triton()
    z = _logits(rng, 9, 1500, dtype=getattr(torch, dtype))
    ids = rng.integers(0, 1500, 9)
    e, lp = _run_triton(z, ids.tolist())  # ids as a list, as the hf reader passes them
    e_ref, l_ref = _ref(z, ids)  # upcast values: the kernel accumulates in float32
    np.testing.assert_allclose(e, e_ref, **TOL)
    np.testing.assert_allclose(lp, l_ref, **TOL)


@pytest.mark.parametrize("v", [1, 3, 1000, 3001])
def test_triton_equal_logits(v):
    _triton()
    z = torch.tensor([0.0, -1e4, 1e4, 3.5, -88.0], device=DEV)[:, None].expand(5, v)  # stride 0 columns
    e, lp = _run_triton(z, [0, v - 1, v // 2, 0, v - 1])
    np.testing.assert_allclose(e, math.log(v), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lp, -math.log(v), rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # interpreter: 3e38 - -3e38
def test_triton_extreme_spreads(rng):
    _triton()
    t, v = 8, 1000
    z = torch.from_numpy(rng.uniform(-1e4, 1e4, (t, v))).float()
    z[1] = torch.from_numpy(rng.standard_normal(v) * 1e-4).float() + 1e4  # nearly uniform at +1e4
    z[2] = torch.from_numpy(rng.standard_normal(v)).float() - 1e4  # everything very negative
    z[3] = 0.0
    z[3, 17] = 3e4  # one-hot
    z[4] = torch.from_numpy(rng.standard_normal(v) * 1e3).float()
    z[5, ::2] = -3e38  # near the float32 limits
    z[5, 1::2] = 3e38
    z[6] = torch.from_numpy(rng.standard_normal(v) * 30).float()
    z = z.to(DEV)
    ids = torch.from_numpy(rng.integers(0, v, t))
    ids[3], ids[5] = (
        17,
        int(ids[5]) // 2 * 2 + 1,
    )  # row 5: a +3e38 logit (a -3e38 one has log p = -inf in float32)
    e, lp = _run_triton(z, ids)
    e_ref, l_ref = _ref(z, ids)
    assert np.all(np.isfinite(e)) and np.all(np.isfinite(lp)) and np.all(e >= 0)
    np.testing.assert_allclose(e, e_ref, rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(lp, l_ref, rtol=1e-5, atol=2e-5)
    assert e[3] == 0.0 and lp[3] == 0.0
    assert e[1] == pytest.approx(math.log(v), abs=1e-5)


def test_triton_banned_tokens_and_nan(rng):
    # -inf logits have probability 0 (the reference gives NaN there: 0 * -inf); NaN poisons only its row
    _triton()
    v = 300
    z = _logits(rng, 4, v)
    banned = rng.random(v) < 0.3
    banned[0], banned[1] = True, False
    z[:2, torch.from_numpy(banned).to(DEV)] = float("-inf")
    z[3, 5] = float("nan")
    e, lp = _run_triton(z, [0, 1, 2, 3])
    keep = ~banned
    e_ref, l_ref = _ref(z[:2, torch.from_numpy(keep).to(DEV)], [0, 0])  # column 1 is kept column 0
    np.testing.assert_allclose(e[:2], e_ref, **TOL)
    assert lp[0] == -np.inf and lp[1] == pytest.approx(l_ref[1], rel=1e-5, abs=1e-5)
    e2, l2 = _ref(z[2:3], [2])
    np.testing.assert_allclose([e[2], lp[2]], [e2[0], l2[0]], **TOL)
    assert np.isnan(e[3]) and np.isnan(lp[3])


def test_triton_empty_inputs():
    _triton()
    e, lp = _run_triton(torch.zeros((0, 7), device=DEV), [])
    assert e.shape == lp.shape == (0,)


@pytest.mark.parametrize("backend", ["reference", "cpu", "triton", "cuda"])
def test_bad_inputs_refused_before_any_backend(rng, backend, monkeypatch):
    """Checked once at the dispatcher, for every backend (GPU ones too: none is reached)."""
    called = []
    monkeypatch.setattr(bk, "is_available", lambda name: True)
    monkeypatch.setattr(ent_mod, "implementation", lambda op, name: lambda *a: called.append(a))
    z = torch.from_numpy(rng.standard_normal((3, 10))).float()
    bad = [
        (z[0], [1], r"logits must be \[T, V\]"),  # 1-D logits
        (z[None], [1, 2, 3], "logits must be"),  # 3-D logits
        (z[:, :0], [0, 0, 0], "V >= 1"),  # V = 0
        (z, [1, 2], r"token_ids must be \[T\]"),  # wrong length
        (z, [[1, 2, 3]], r"token_ids must be \[T\]"),  # 2-D ids
        (z, [0, 10, 1], r"in \[0, V = 10\)"),  # id == V
        (z, [0, -1, 1], r"in \[0, V = 10\)"),  # negative id
        (z, [0.0, 1.0, 2.0], "must be integers"),  # float ids
        (z.int(), [0, 1, 2], "logits: expected a real floating array"),  # integer logits
        (z.numpy().astype(np.complex64), [0, 1, 2], "logits: .*complex"),
    ]
    for logits, ids, msg in bad:
        with pytest.raises(ValueError, match=msg):
            token_entropy_logprob(logits, ids, backend=backend)
    assert not called


# ---- dispatcher ----------------------------------------------------------------------------------


def test_dispatch_numpy_to_triton(rng):
    _triton()
    z = rng.standard_normal((4, 60)).astype(np.float32)
    ids = rng.integers(0, 60, 4)
    e, lp = token_entropy_logprob(z, ids, backend="triton")
    assert isinstance(e, np.ndarray) and e.dtype == np.float32  # NumPy in, NumPy out (as every family)
    e_ref, l_ref = token_entropy_logprob(z, ids, backend="reference")
    assert isinstance(e_ref, np.ndarray) and e_ref.dtype == np.float64
    np.testing.assert_allclose(e, e_ref, **TOL)
    np.testing.assert_allclose(lp, l_ref, **TOL)
    e_c, l_c = token_entropy_logprob(z, ids)  # auto on NumPy: cpu (torch on the host) where built
    assert isinstance(e_c, np.ndarray)
    np.testing.assert_allclose(e_c, e_ref, **TOL)
    np.testing.assert_allclose(l_c, l_ref, **TOL)


def test_reference_on_torch_returns_torch(rng):
    z = torch.from_numpy(rng.standard_normal((3, 9)))
    e, lp = token_entropy_logprob(z, [0, 4, 8], backend="reference")
    assert isinstance(e, torch.Tensor) and e.dtype == torch.float64 and e.device == z.device


def test_auto_backend_choice(monkeypatch):
    """Entropy resolves like every other family: ``resolve_backend`` and ``XMEMORY_BACKEND``."""
    from xmemory_gpu.ops import implemented_backends

    assert implemented_backends("token_entropy_logprob") == ("reference", "cpu", "triton", "cuda")
    monkeypatch.delenv("XMEMORY_BACKEND", raising=False)
    seen = []
    real = ent_mod.implementation

    def spy(op, name):
        seen.append(name)
        return real(op, name)

    monkeypatch.setattr(ent_mod, "implementation", spy)
    z = torch.zeros(2, 3)
    token_entropy_logprob(z, [0, 1])
    assert seen[-1] == ("cpu" if bk.is_available("cpu") else "reference")
    monkeypatch.setenv("XMEMORY_BACKEND", "reference")  # honoured, as by every family
    e, _ = token_entropy_logprob(z, [0, 1])
    assert seen[-1] == "reference" and isinstance(e, torch.Tensor) and e.dtype == torch.float64
    e, _ = token_entropy_logprob(z.numpy(), [0, 1])
    assert seen[-1] == "reference" and isinstance(e, np.ndarray)
    token_entropy_logprob(z, [0, 1], backend="cpu")  # an explicit backend wins over the variable
    assert seen[-1] == "cpu"
    monkeypatch.setenv("XMEMORY_BACKEND", "bogus")
    with pytest.raises(ValueError, match="unknown backend 'bogus'"):
        token_entropy_logprob(z, [0, 1])
    monkeypatch.delenv("XMEMORY_BACKEND")
    with pytest.raises(ValueError, match="unknown backend"):
        token_entropy_logprob(z, [0, 1], backend="gpu")
    # on CUDA tensors: the validated GPU path, else triton, else cuda (torch on the GPU)
    monkeypatch.setattr(bk, "is_available", lambda name: name != "triton")
    assert bk.resolve_backend("token_entropy_logprob", "auto", on_cuda=True) == "cuda"
    monkeypatch.setattr(bk, "is_available", lambda name: True)
    assert (
        bk.resolve_backend("token_entropy_logprob", "auto", on_cuda=True)
        == bk.gpu_preference("token_entropy_logprob")[0]
    )
    monkeypatch.setenv("XMEMORY_BACKEND", "cuda")
    assert bk.resolve_backend("token_entropy_logprob", "auto", on_cuda=False) == "cuda"


# ---- compiled kernel on a GPU --------------------------------------------------------------------


@requires_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gpu_compiled_vs_reference(rng, dtype):
    _triton()
    from xmemory_gpu.ops.backends import interpreting_triton

    if interpreting_triton():
        pytest.skip("TRITON_INTERPRET is set: this test is for the compiled kernel")
    for t, v in [(1, 151_936), (37, 151_936), (64, 32_000), (5, 4097), (300, 50)]:
        full = torch.randn(2, t, v + 3, device="cuda", dtype=getattr(torch, dtype)) * 4
        z = full[1, :, :v]  # non-contiguous view, as the hf reader slices logits
        ids = torch.randint(0, v, (t,), device="cuda")
        e, lp = token_entropy_logprob(z, ids)  # auto: triton on CUDA tensors
        assert e.is_cuda and e.dtype == torch.float32
        e_ref, l_ref = _ref(z, ids.cpu())
        np.testing.assert_allclose(e.cpu().numpy(), e_ref, rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(lp.cpu().numpy(), l_ref, rtol=1e-5, atol=2e-5)
        e_t, l_t = token_entropy_logprob(z, ids, backend="cuda")
        np.testing.assert_allclose(e.cpu().numpy(), e_t.cpu().numpy(), rtol=1e-4, atol=1e-4)
