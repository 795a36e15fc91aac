"""``python -m ray_jobs.figures.synth --out DIR --n N --seed S --hard 0.5``: write a dataset with
a share of hard figures (``pmcvl synth`` writes the original mix)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ray_jobs.figures.synth.generate import write_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--hard", type=float, default=0.5)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--max-side", type=int, default=768)
    args = parser.parse_args()
    figures = write_dataset(
        args.out, args.n, args.seed, workers=args.workers, max_side=args.max_side, hard=args.hard
    )
    print(f"{len(figures)} figures, {sum(f['params']['hard'] for f in figures)} hard → {args.out}")


if __name__ == "__main__":
    main()
