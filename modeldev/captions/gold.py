"""Score a splitter against gold per-panel subcaptions (label-set P/R/F1, edit similarity).

Two gold layouts read the same way: ``gt_subfigures[].label.text`` is the panel's label and
``gt_subfigures[].caption`` its text. Labels copied from the images mix cases ("A, B, c, D"),
so ``ignore_case`` compares them case-insensitively; a subfigure without a label cannot be
named by any splitter and is left out. ``halves`` cuts a gold set in two by a hash of the
figure id, so rules can be developed on one half and checked on the other.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rapidfuzz.distance import Levenshtein

from ray_jobs.captions.labels import normalise
from ray_jobs.captions.split import SplitCaption, split_caption

Splitter = Callable[[str], SplitCaption]


@dataclass
class GoldScore:
    captions: int = 0
    gold_labels: int = 0
    predicted_labels: int = 0
    matched: int = 0
    similarity_sum: float = 0.0
    misses: list[dict] = field(default_factory=list)  # worst first
    # per split caption: (confidence, predicted labels, of which right)
    by_confidence: list[tuple[float, int, int]] = field(default_factory=list)

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

    def precision_at(self, threshold: float) -> tuple[float, int]:
        """Label precision over the captions split with confidence >= threshold, and how many."""
        kept = [(n, ok) for conf, n, ok in self.by_confidence if conf >= threshold]
        predicted = sum(n for n, _ in kept)
        return (sum(ok for _, ok in kept) / predicted if predicted else 0.0), len(kept)


def similarity(a: str, b: str) -> float:
    return Levenshtein.normalized_similarity(" ".join(a.split()), " ".join(b.split()))


def unmarked(text: str, labels: Iterable[str]) -> str:
    """``text`` without the label markers ("(A)", "A)", "A.", "B,") of the figure's labels:
    the Zou gold keeps them, the splitter's texts (like the prostate gold) do not."""
    alts = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    if not alts:
        return text
    spec = rf"(?:{alts})(?:\s*(?:,|and|[-–])\s*(?:{alts}))*"
    text = re.sub(rf"\(\s*{spec}\s*\)", " ", text, flags=re.I)
    return re.sub(rf"(?:(?<=\s)|^){spec}[.):,](?=\s)", " ", text, flags=re.I)


def load(path: Path) -> dict[str, dict]:
    return json.loads(path.read_text())


def halves(records: Iterable[str]) -> tuple[list[str], list[str]]:
    """Figure ids in two halves, by the SHA-1 of the id (stable across runs and machines)."""
    ordered = sorted(records, key=lambda name: hashlib.sha1(name.encode()).hexdigest())
    cut = (len(ordered) + 1) // 2
    return ordered[:cut], ordered[cut:]


def _key(label: str, ignore_case: bool) -> str:
    label = normalise(label)
    return label.lower() if ignore_case else label


def score_gold(
    path: Path | dict[str, dict],
    *,
    preamble: bool = True,
    trailer: bool = True,
    ignore_case: bool = False,
    names: Iterable[str] | None = None,
    splitter: Splitter = split_caption,
    markers: bool = True,
) -> GoldScore:
    """``markers=False`` compares texts with the label markers taken out of both sides."""
    records = load(path) if isinstance(path, Path) else path
    chosen = list(records) if names is None else list(names)
    score = GoldScore()
    for name in chosen:
        record = records[name]
        split = splitter(record["caption"])
        predicted = {_key(s.label, ignore_case): s.label for s in split.subcaptions}
        gold = {
            _key(g["label"]["text"], ignore_case): g["caption"]
            for g in record["gt_subfigures"]
            if (g.get("label") or {}).get("text")
        }
        score.captions += 1
        score.gold_labels += len(gold)
        score.predicted_labels += len(predicted)
        sims = {}
        for label, gold_text in gold.items():
            if label in predicted:
                score.matched += 1
                ours = split.text_for(predicted[label], preamble=preamble, trailer=trailer)
                if not markers:
                    names_ = [g["label"]["text"] for g in record["gt_subfigures"] if g.get("label")]
                    ours, gold_text = unmarked(ours, names_), unmarked(gold_text, names_)
                sims[label] = similarity(ours, gold_text)
                score.similarity_sum += sims[label]
        if predicted:
            score.by_confidence.append((split.confidence, len(predicted), len(sims)))
        # what this caption loses: similarity missed on gold labels plus labels made up
        loss = len(gold) - sum(sims.values()) + len(set(predicted) - set(gold))
        if set(predicted) != set(gold) or any(v < 0.8 for v in sims.values()):
            score.misses.append(
                {
                    "figure": name,
                    "loss": round(loss, 2),
                    "gold": sorted(gold),
                    "predicted": sorted(predicted),
                    "similarity": {k: round(v, 2) for k, v in sorted(sims.items())},
                    "caption": record["caption"],
                }
            )
    score.misses.sort(key=lambda m: -m["loss"])
    return score
