"""Score the splitter against gold per-panel subcaptions (label-set F1, edit similarity)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from ray_jobs.captions.labels import normalise
from ray_jobs.captions.split import split_caption


@dataclass
class GoldScore:
    captions: int = 0
    gold_labels: int = 0
    predicted_labels: int = 0
    matched: int = 0
    similarity_sum: float = 0.0
    misses: list[dict] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.matched / self.predicted_labels if self.predicted_labels else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.gold_labels if self.gold_labels else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def similarity(self) -> float:
        """Mean normalised edit similarity over gold labels (a missed label scores 0)."""
        return self.similarity_sum / self.gold_labels if self.gold_labels else 0.0


def similarity(a: str, b: str) -> float:
    return Levenshtein.normalized_similarity(" ".join(a.split()), " ".join(b.split()))


def score_gold(path: Path, *, preamble: bool = True, trailer: bool = True) -> GoldScore:
    records = json.loads(path.read_text())
    score = GoldScore()
    for name, record in records.items():
        split = split_caption(record["caption"])
        predicted = {normalise(s.label): s.label for s in split.subcaptions}
        gold = {normalise(g["label"]["text"]): g["caption"] for g in record["gt_subfigures"]}
        score.captions += 1
        score.gold_labels += len(gold)
        score.predicted_labels += len(predicted)
        sims = {}
        for label, gold_text in gold.items():
            if label in predicted:
                score.matched += 1
                sims[label] = similarity(
                    split.text_for(predicted[label], preamble=preamble, trailer=trailer), gold_text
                )
                score.similarity_sum += sims[label]
        if set(predicted) != set(gold) or any(v < 0.8 for v in sims.values()):
            score.misses.append(
                {
                    "figure": name,
                    "gold": sorted(gold),
                    "predicted": sorted(predicted),
                    "similarity": sims,
                }
            )
    return score
