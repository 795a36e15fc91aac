"""The retrieval and zero-shot metric code on constructed cases whose answers are known."""

from __future__ import annotations

import numpy as np
import pytest

from ray_jobs.benchmark.retrieval import (
    cosine_similarity,
    l2_normalise,
    ranks_of_correct,
    recalls,
    retrieval_metrics,
)
from ray_jobs.benchmark.zeroshot import class_texts, zero_shot_metrics


def _random(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d))


def test_identical_embeddings_recall_at_1_is_one() -> None:
    emb = _random(50)
    scores = retrieval_metrics(emb, emb.copy())
    for direction in ("image_to_text", "text_to_image"):
        assert scores[direction]["R@1"] == 1.0
        assert scores[direction]["median_rank"] == 1.0
    assert scores["n"] == 50 and scores["mean_recall"] == 1.0
    assert scores["trivial_ks"] == [100]  # K >= n: recall 1 by construction, flagged


def test_scale_does_not_matter_cosine_does() -> None:
    emb = _random(20)
    scaled = emb * np.random.default_rng(1).uniform(0.1, 100, size=(20, 1))
    assert retrieval_metrics(emb, scaled)["image_to_text"]["R@1"] == 1.0
    assert np.allclose(np.linalg.norm(l2_normalise(scaled), axis=1), 1.0)
    sim = cosine_similarity(emb, scaled)
    assert np.allclose(np.diag(sim), 1.0) and sim.max() <= 1.0 + 1e-9


def test_a_known_permutation() -> None:
    """Text i is identical to image perm[i]: a text finds its own image only where perm fixes
    i, and every image's right text then ranks exactly where the permutation put it."""
    n = 10
    images = _random(n)
    perm = np.array([0, 1, 2, 4, 3, 6, 7, 8, 9, 5])  # 3 fixed points, a swap, a 5-cycle
    texts = images[perm]
    scores = retrieval_metrics(images, texts, ks=(1, 5, 10))
    assert scores["text_to_image"]["R@1"] == pytest.approx(3 / 10)
    assert scores["image_to_text"]["R@1"] == pytest.approx(3 / 10)
    assert scores["image_to_text"]["R@10"] == 1.0

    # a hand-made similarity matrix with the right answer at known ranks 0, 1, 5 and 9
    sim = np.array(
        [
            [0.9, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.8, 0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.9, 0.8, 0.3, 0.7, 0.6, 0.5, 0.0, 0.0, 0.0, 0.0],
            [0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
        ]
    )
    ranks = ranks_of_correct(sim, [0, 1, 2, 3])
    assert ranks.tolist() == [0, 1, 5, 9]
    r = recalls(ranks, ks=(1, 5, 10))
    assert (r["R@1"], r["R@5"], r["R@10"]) == (0.25, 0.5, 1.0)
    assert r["median_rank"] == (1 + 5) / 2 + 1 and r["mean_rank"] == pytest.approx(15 / 4 + 1)


def test_ties_count_against_the_right_answer() -> None:
    n = 8
    constant = np.ones((n, 4))
    scores = retrieval_metrics(constant, constant, ks=(1, 5, 8))
    for direction in ("image_to_text", "text_to_image"):  # everything ties: last place
        assert scores[direction]["R@1"] == 0.0 and scores[direction]["R@5"] == 0.0
        assert scores[direction]["R@8"] == 1.0 and scores[direction]["median_rank"] == n

    # one tie with the right answer: rank 1 (0-based), whichever column comes first
    sim = np.array([[0.5, 0.5, 0.1], [0.2, 0.9, 0.1], [0.5, 0.1, 0.5]])
    assert ranks_of_correct(sim, [0, 1, 2]).tolist() == [1, 0, 1]
    assert ranks_of_correct(sim[:, ::-1], [2, 1, 0]).tolist() == [1, 0, 1]  # order-free

    # zero vectors never win by accident
    zeros = np.zeros((3, 4))
    assert retrieval_metrics(zeros, _random(3, 4))["image_to_text"]["R@1"] == 0.0


def test_mismatched_or_empty_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="as many texts as images"):
        retrieval_metrics(_random(3), _random(4))
    with pytest.raises(ValueError):
        retrieval_metrics(np.zeros((0, 4)), np.zeros((0, 4)))


def test_zero_shot_accuracy() -> None:
    classes = ["ct", "histopathology", "xray"]
    centres = np.eye(3, 8)
    labels = [0, 0, 1, 1, 1, 2, 2, 2]
    images = centres[labels] + 0.01 * _random(8, 8)
    perfect = zero_shot_metrics(images, centres, labels, classes)
    assert perfect["top1"] == 1.0 and perfect["balanced_accuracy"] == 1.0
    assert perfect["n"] == 8 and perfect["classes"] == classes and "top5" not in perfect

    # the two ct images look like x-rays: ct recall 0, the others 1
    moved = images.copy()
    moved[:2] = centres[2] + 0.01 * _random(2, 8, seed=3)
    scores = zero_shot_metrics(moved, centres, labels, classes)
    assert scores["top1"] == pytest.approx(6 / 8)
    assert scores["balanced_accuracy"] == pytest.approx((0 + 1 + 1) / 3)
    assert scores["per_class"]["ct"] == {"n": 2, "accuracy": 0.0}

    # an image equally close to two classes counts as wrong
    tie = zero_shot_metrics(np.array([[1.0, 1.0, 0.0]]), np.eye(2, 3), [0], ["a", "b"])
    assert tie["top1"] == 0.0

    assert class_texts(["gel_blot", "xray"]) == ["a gel blot image", "a xray image"]
    assert class_texts(["ct"], "{}") == ["ct"]
