"""Embedders: repeats embedded once (same rows), unit rows, clear errors for bad specs."""

from __future__ import annotations

import numpy as np
import pytest

from xmemory_gpu.embed import load_embedder


def test_repeated_texts_are_embedded_once_and_share_their_row():
    e = load_embedder("all-MiniLM-L6-v2")
    calls = []
    real = e.model.encode
    e.model.encode = lambda texts, **kw: calls.append(list(texts)) or real(texts, **kw)
    texts = ["Melanie paints sunsets.", "hi", "Melanie paints sunsets.", "Caroline went to a support group.", "hi"]
    x = e.encode(texts)
    assert x.shape == (5, e.dim) and sorted(calls[0]) == sorted(set(texts))
    np.testing.assert_array_equal(x[0], x[2])
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(x[3], e.encode(["Caroline went to a support group."])[0], atol=1e-6)


@pytest.mark.parametrize("spec, message", [("hashing:x", "integer >= 1"), ("hashing:0", "integer >= 1"),
                                           ("st:/no/such/model", "no model folder"), ("nope", "unknown embedder spec")])
def test_bad_embedder_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        load_embedder(spec)
