"""Recall@K for paired image-text retrieval, both directions, on embeddings.

Pure numpy, so it is tested on constructed cases with known answers. Embeddings are
L2-normalised and compared by cosine similarity. Pair ``i`` is image ``i`` with text ``i``.
Ties count against the right answer (a candidate scoring the same ranks ahead of it), so a
model that maps everything to one point scores zero, not chance, and no order of evaluation
can change a score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

KS = (1, 5, 10, 100)


def l2_normalise(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a[i]`` against ``b[j]`` after L2 normalisation: shape ``(len(a), len(b))``."""
    return l2_normalise(a) @ l2_normalise(b).T


def ranks_of_correct(sim: np.ndarray, correct: Sequence[int] | np.ndarray) -> np.ndarray:
    """0-based rank of each row's correct column: the number of other columns scoring at
    least as high (ties pessimistic)."""
    sim = np.asarray(sim)
    rows = np.arange(sim.shape[0])
    target = sim[rows, np.asarray(correct)]
    return (sim >= target[:, None]).sum(axis=1) - 1


def recalls(ranks: np.ndarray, ks: Sequence[int] = KS) -> dict[str, float]:
    """``{"R@1": ..., ...}``: the share of queries whose correct answer ranks within K, plus
    the median and mean 1-based rank."""
    ranks = np.asarray(ranks)
    out = {f"R@{k}": float(np.mean(ranks < k)) for k in ks}
    out["median_rank"] = float(np.median(ranks) + 1)
    out["mean_rank"] = float(np.mean(ranks) + 1)
    return out


def retrieval_metrics(
    image_emb: np.ndarray, text_emb: np.ndarray, ks: Sequence[int] = KS
) -> dict[str, object]:
    """Image→text and text→image Recall@K for ``n`` pairs (row ``i`` of each is a pair).

    ``trivial_ks`` lists the K at or above ``n``, where recall is 1 by construction.
    """
    if len(image_emb) != len(text_emb) or len(image_emb) == 0:
        raise ValueError(
            f"need as many texts as images, and some: {len(image_emb)} vs {len(text_emb)}"
        )
    sim = cosine_similarity(image_emb, text_emb)
    n = sim.shape[0]
    diagonal = np.arange(n)
    i2t = recalls(ranks_of_correct(sim, diagonal), ks)
    t2i = recalls(ranks_of_correct(sim.T, diagonal), ks)
    mean = float(np.mean([i2t[f"R@{k}"] for k in ks] + [t2i[f"R@{k}"] for k in ks]))
    return {
        "n": n,
        "image_to_text": i2t,
        "text_to_image": t2i,
        "mean_recall": mean,
        "trivial_ks": [k for k in ks if k >= n],
    }
