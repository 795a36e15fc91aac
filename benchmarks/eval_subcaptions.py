"""Score subcaption splitting on the gold captions, and show what splitting does to tokens.

Reads ../shared/data/subcaptions/prostate_gold.json (196 real compound-figure captions with
gold per-panel text; the gold repeats the preamble into each panel). Prints label-set
precision, recall and F1 and the mean normalised edit similarity per gold label, for each way
of joining the shared text, then CLIP token waste for whole captions against subcaptions.
Run with ``make eval-subcaptions``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ray_jobs.captions.gold import score_gold
from ray_jobs.captions.split import split_caption
from ray_jobs.captions.tokens import WINDOWS, clip_tokens, token_waste

GOLD = Path(__file__).resolve().parents[1].parent / "shared/data/subcaptions/prostate_gold.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold", type=Path, default=GOLD)
    parser.add_argument("--show-misses", type=int, default=0)
    args = parser.parse_args()

    print(
        f"{'join':<26} {'captions':>8} {'gold':>5} {'pred':>5} {'P':>6} {'R':>6} {'F1':>6} "
        f"{'similarity':>10}"
    )
    score = None
    for preamble, trailer in ((True, True), (True, False), (False, False)):
        score = score_gold(args.gold, preamble=preamble, trailer=trailer)
        name = f"preamble={preamble!s:<5} trailer={trailer!s:<5}"
        print(
            f"{name:<26} {score.captions:>8} {score.gold_labels:>5} "
            f"{score.predicted_labels:>5} {score.precision:>6.3f} {score.recall:>6.3f} "
            f"{score.f1:>6.3f} {score.similarity:>10.3f}"
        )

    records = json.loads(args.gold.read_text())
    whole = [clip_tokens(r["caption"]) for r in records.values()]
    per_panel = []
    for r in records.values():
        split = split_caption(r["caption"])
        labels = split.labels or [None]
        per_panel += [
            clip_tokens(split.text_for(label) if label else r["caption"]) for label in labels
        ]
    print()
    print(
        f"{'CLIP tokens':<26} {'texts':>8} {'mean':>6} "
        + " ".join(f"{'waste@' + str(w):>9}" for w in WINDOWS)
    )
    for name, lengths in (("whole caption per figure", whole), ("subcaption per panel", per_panel)):
        waste = token_waste(lengths)
        print(
            f"{name:<26} {len(lengths):>8} {sum(lengths) / len(lengths):>6.1f} "
            + " ".join(f"{waste[w]:>9.3f}" for w in WINDOWS)
        )
    for miss in (score.misses if score else [])[: args.show_misses]:
        print(json.dumps(miss))


if __name__ == "__main__":
    main()
