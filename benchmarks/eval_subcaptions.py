"""Score subcaption splitting on the gold captions, against a plain-regex baseline.

Gold sets in ../shared/data/subcaptions/: prostate_gold.json (196 prostate-pathology captions,
the set the splitter was first built on) and zou_dev.json (224 figures from across PMC, half of
the Zou et al. set; labels compared ignoring case, since they are copied from the images). The
Zou set is also scored in two halves cut by a hash of the figure id: rules are developed on the
first and checked on the second, so a gap between them shows overfitting. Prints label-set
precision, recall, F1 and mean per-label edit similarity for the splitter and the baseline on
the same captions, label precision by split confidence, CLIP token waste, and the worst
captions. Run with ``make eval-subcaptions``.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from modeldev.captions.baseline import regex_split
from modeldev.captions.gold import GoldScore, halves, load, score_gold
from ray_jobs.captions.split import split_caption
from ray_jobs.captions.tokens import WINDOWS, clip_tokens, token_waste

GOLD_DIR = Path(__file__).resolve().parents[1].parent / "shared/data/subcaptions"
HEADER = (
    f"{'gold set':<22} {'splitter':<9} {'captions':>8} {'gold':>5} {'pred':>5} "
    f"{'P':>6} {'R':>6} {'F1':>6} {'similarity':>10}"
)


def _row(name: str, splitter: str, score: GoldScore) -> str:
    return (
        f"{name:<22} {splitter:<9} {score.captions:>8} {score.gold_labels:>5} "
        f"{score.predicted_labels:>5} {score.precision:>6.3f} {score.recall:>6.3f} "
        f"{score.f1:>6.3f} {score.similarity:>10.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gold-dir", type=Path, default=GOLD_DIR)
    parser.add_argument("--worst", type=int, default=8, help="worst captions listed per set")
    parser.add_argument(
        "--worst-of",
        default="develop",
        choices=("develop", "check", "whole"),
        help="which Zou half to list the worst captions of (develop: keep the check half unseen)",
    )
    args = parser.parse_args()

    prostate = load(args.gold_dir / "prostate_gold.json")
    zou = load(args.gold_dir / "zou_dev.json")
    first, second = halves(zou)
    sets = [
        ("prostate", prostate, None, False),
        ("zou dev: develop half", zou, first, True),
        ("zou dev: check half", zou, second, True),
        ("zou dev: whole", zou, None, True),
    ]
    print(HEADER)
    scores: dict[str, GoldScore] = {}
    for name, records, names, ignore_case in sets:
        for label, splitter in (("splitter", split_caption), ("regex", regex_split)):
            score = score_gold(records, ignore_case=ignore_case, names=names, splitter=splitter)
            print(_row(name, label, score))
            if label == "splitter":
                scores[name] = score

    print("\nsimilarity with label markers taken out of both texts (the Zou gold keeps them):")
    for name, records, names, ignore_case in sets:
        plain = score_gold(records, ignore_case=ignore_case, names=names, markers=False)
        print(f"  {name:<22} {plain.similarity:.3f}")

    print("\nshared text joined (splitter, similarity):")
    for name, records, names, ignore_case in sets:
        joins = [
            score_gold(records, ignore_case=ignore_case, names=names, preamble=p, trailer=t)
            for p, t in ((True, True), (True, False), (False, False))
        ]
        print(
            f"  {name:<22} preamble+trailer {joins[0].similarity:.3f}  preamble only "
            f"{joins[1].similarity:.3f}  own text only {joins[2].similarity:.3f}"
        )

    print("\nlabel precision by split confidence (splitter):")
    for name, score in scores.items():
        cells = []
        for threshold in (0.0, 0.6, 0.8):
            precision, n = score.precision_at(threshold)
            cells.append(f">={threshold:.1f}: {precision:.3f} ({n} captions)")
        print(f"  {name:<22} " + "   ".join(cells))

    whole = [clip_tokens(r["caption"]) for r in prostate.values()]
    per_panel = []
    for r in prostate.values():
        split = split_caption(r["caption"])
        labels = split.labels or [None]
        per_panel += [
            clip_tokens(split.text_for(label) if label else r["caption"]) for label in labels
        ]
    print(
        f"\n{'CLIP tokens (prostate)':<26} {'texts':>8} {'mean':>6} "
        + " ".join(f"{'waste@' + str(w):>9}" for w in WINDOWS)
    )
    for name, lengths in (("whole caption per figure", whole), ("subcaption per panel", per_panel)):
        waste = token_waste(lengths)
        print(
            f"{name:<26} {len(lengths):>8} {sum(lengths) / len(lengths):>6.1f} "
            + " ".join(f"{waste[w]:>9.3f}" for w in WINDOWS)
        )

    worst_zou = {"develop": "zou dev: develop half", "check": "zou dev: check half"}
    for name in ("prostate", worst_zou.get(args.worst_of, "zou dev: whole")):
        print(f"\nworst captions, {name} (loss = similarity missed + labels made up):")
        for miss in scores[name].misses[: args.worst]:
            print(
                f"  {miss['loss']:>5.2f} {miss['figure']}  gold {','.join(miss['gold'])}  "
                f"predicted {','.join(miss['predicted']) or '-'}"
            )
            print(textwrap.indent(textwrap.shorten(miss["caption"], 220), "        "))


if __name__ == "__main__":
    main()
