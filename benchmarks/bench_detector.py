"""Panel detection: held-out accuracy per method and checkpoint, then throughput.

First the real article figures with hand-made panel truth (``modeldev/real_figures``): F1@0.5,
exact-count share, caption-count agreement and CPU seconds a figure through the product's
``PanelDetector.detect``, the tuning articles and the kept-out ones apart, each also over
compound figures only, for the shipped checkpoint and every ``--weights`` given. Then the
held-out protocol (``modeldev/detector/protocol.py``): on the independent figure
family, the generator's held-out seed and the ten real figures, F1@0.5, mAP@0.5, exact-count
rate and panels/s for each checkpoint given (by default the shipped one and the one it
replaced, taken out of git, each at its own image size) through the product's own path
(``PanelDetector.detect``, which cuts boxes at a later panel's label, ``label_splits``, and
reads a figure with small panels again at ``detector.zoom_imgsz``), the same without the
label cuts, without the zoom and without dropping colour-bar legends (``colour_bars``), the
separator cut alone, and the detector checked by the separator cut (``second_opinion``). Then
letter accuracy and pairing, then (and alone, with ``--ceiling``) the stage against a perfect
choice among the detector's own proposals, then throughput: the shipped YOLO checkpoint with
and without the zoom and the colour-bar drop, against the one it replaced and RT-DETR-l.

RT-DETR-l is built from its ultralytics YAML (the DAB-DETR-class transformer Open-PMC used),
untrained: its boxes are meaningless, its speed is not. Both run through the same extraction
stage (decode, letterbox, predict, select, order, crop) on the same figures: the real figures
of ../shared/data/medicat_figures plus held-out synthetic ones. Also times the synthetic figure
generator. One run; a table with the ratios. Run with ``make bench-detector``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from modeldev.detector import protocol
from modeldev.detector.proposals import proposals
from modeldev.detector.second_opinion import cut_panels, second_opinion
from modeldev.detector.train import build_model
from modeldev.real_figures import evaluate as real_eval
from modeldev.real_figures import truth as real_truth
from modeldev.synth.generate import make_figure, write_dataset
from ray_jobs.config import DetectorSettings
from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import PANEL, PanelDetector, resolve_weights

REPO = Path(__file__).resolve().parents[1]
MEDICAT = REPO.parent / "shared" / "data" / "medicat_figures"


def figures(n_synthetic: int) -> list[tuple[str, bytes]]:
    items = [(p.name, p.read_bytes()) for p in sorted(MEDICAT.glob("*.png"))]
    items += [(f"synth-{i}", make_figure(4242, i)[0]) for i in range(n_synthetic)]
    return items


def time_detector(detector: PanelDetector, items: list[tuple[str, bytes]], repeats: int):  # type: ignore[no-untyped-def]
    detector.detect(items[:2])  # warm-up: first-call allocations and lazy imports
    best, panels = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        result, _ = detector.detect(items)
        best = min(best, time.perf_counter() - start)
        panels = sum(len(f.panels) for f in result)
    return best, panels


# the checkpoint the shipped one replaced (commit, the image size it ran at): scored beside it
PREVIOUS = ("a9ca0dc", 320)
Checkpoint = tuple[str, str, int]  # name, path, image size


def checkpoint(spec: str, imgsz: int) -> Checkpoint:
    """``PATH`` or ``PATH@IMGSZ`` (each checkpoint at the size it was made for)."""
    path, _, size = spec.partition("@")
    return f"{Path(path).parent.name}/{Path(path).stem}", path, int(size or imgsz)


def previous_checkpoint(folder: Path) -> Checkpoint | None:
    """The previously shipped checkpoint, out of git; None outside a git checkout."""
    commit, imgsz = PREVIOUS
    try:
        data = subprocess.run(
            ["git", "show", f"{commit}:models/panel-detector/yolo11n-panels.pt"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = folder / f"previous-{commit}.pt"
    path.write_bytes(data)
    return f"previous ({commit})", str(path), imgsz


# the dev seeds a checkpoint is chosen on (figures each); the test seeds are scored once, after
DEV = {"family": (7, 200), "generator": (98, 100)}


def held_out_sets(n: int, dev: bool, real: bool = True) -> dict[str, list[protocol.Item]]:
    """The family's and the generator's test seeds at ``n`` figures each (their dev seeds with
    ``dev``), and the ten real figures."""
    (family_seed, family_n), (generator_seed, generator_n) = (
        (DEV["family"], DEV["generator"])
        if dev
        else ((protocol.FAMILY_SEED, n), (protocol.GENERATOR_SEED, n))
    )
    sets = {
        f"family (seed {family_seed}, {family_n})": protocol.family(family_n, family_seed),
        f"generator (seed {generator_seed}, {generator_n})": protocol.generator(
            generator_n, generator_seed
        ),
    }
    if real:
        sets["real (medicat, 10)"] = protocol.real()
    return sets


def held_out(checkpoints: list[Checkpoint], n: int, dev: bool = False) -> None:
    """One row per (set, method): what each checkpoint and the cut deliver on unseen figures."""
    sets = held_out_sets(n, dev)
    header = (
        f"{'set':<28} {'method':<48} {'F1@0.5':>7} {'95% CI':>13} {'mAP@0.5':>8} {'exact':>6} "
        f"{'95% CI':>13} {'panels/s':>9}"
    )
    print(header)
    print("-" * len(header))

    def fmt(v: float | None, width: int, sign: str = "") -> str:
        return f"{v:>{sign}{width}.3f}" if v is not None else f"{'-':>{width}}"

    def interval(ci: tuple[float, float] | None, sign: str = "") -> str:
        return f"[{ci[0]:{sign}.3f},{ci[1]:{sign}.3f}]" if ci else "-"

    def line(set_name: str, method: str, result: dict) -> None:
        print(
            f"{set_name:<28} {method:<48} {fmt(result['F1@0.5'], 7)} "
            f"{interval(result['F1_ci']):>13} {fmt(result['mAP@0.5'], 8)} "
            f"{fmt(result['exact_count'], 6)} {interval(result['exact_count_ci']):>13} "
            f"{fmt(result['panels_per_s'], 9)}"
        )

    # the product's path, then the same less one of its steps: what each step is worth
    variants = {
        "": {},
        " without label cuts": {"split_at_labels": False},
        " without zoom": {"zoom_below_px": 0},
        " without colour-bar drop": {"drop_colour_bars": False},
    }
    detectors = [
        (
            f"{label}@{imgsz}",
            {
                suffix: PanelDetector(DetectorSettings(weights=path, imgsz=imgsz, **update))
                for suffix, update in variants.items()
            },
        )
        for label, path, imgsz in checkpoints
    ]

    def run(detector: PanelDetector, inputs: list[tuple[str, bytes]]):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        figures, _ = detector.detect(inputs, with_crops=False)
        seconds = time.perf_counter() - start
        return [([p.bbox for p in f.panels], [p.score for p in f.panels]) for f in figures], seconds

    kept: dict[tuple[str, str], list] = {}  # (set, method) -> what it kept, for the gains
    for set_name, items in sets.items():
        inputs = [(item.key, item.data) for item in items]
        images = [decode_image(data) for _, data in inputs]
        start = time.perf_counter()
        cut = [(b, [None] * len(b)) for b in (cut_panels(img) for img in images)]
        line(
            set_name, "separator cut alone", protocol.score(items, cut, time.perf_counter() - start)
        )
        for name, by_suffix in detectors:
            for detector in by_suffix.values():
                detector.detect(inputs[:2], with_crops=False)  # first-call allocations, imports
            for suffix, detector in by_suffix.items():
                found, seconds = run(detector, inputs)
                kept[set_name, f"{name}{suffix}"] = found
                line(set_name, f"{name}{suffix}", protocol.score(items, found, seconds))
                if suffix:
                    continue
                start = time.perf_counter()
                combined = [
                    second_opinion(img, boxes, scores)[:2]
                    for img, (boxes, scores) in zip(images, found, strict=True)
                ]
                extra = time.perf_counter() - start
                kept[set_name, f"{name} + cut"] = combined
                line(set_name, f"{name} + cut", protocol.score(items, combined, seconds + extra))
    print()
    # paired: both methods on the same resamples of the figures, so a shared hard figure does
    # not widen the interval of their difference
    names = [name for name, _ in detectors]
    pairs = [(name, f"{name}{suffix}") for name in names for suffix in list(variants)[1:]]
    pairs += [(name, f"{name} + cut") for name in names]
    pairs += [(names[0], other) for other in names[1:]]
    header = (
        f"{'set':<28} {'gain of':<26} {'over':<48} {'F1':>7} {'95% CI':>15} {'exact':>7} "
        f"{'95% CI':>15}"
    )
    print(header)
    print("-" * len(header))
    for set_name, items in sets.items():
        for a, b in pairs:
            g = protocol.gain(items, kept[set_name, a], kept[set_name, b])
            print(
                f"{set_name:<28} {a:<26} {b:<48} {fmt(g['F1'], 7, '+')} "
                f"{interval(g['F1_ci'], '+'):>15} {fmt(g['exact_count'], 7, '+')} "
                f"{interval(g['exact_count_ci'], '+'):>15}"
            )
    print()


def real_figures(checkpoints: list[Checkpoint]) -> None:
    """The hand-made truth of real article figures, per checkpoint: the tuning articles and
    the kept-out ones apart (aggregates only for those), each also over compound figures."""
    figures = real_truth.figures(real_truth.load_all())
    print(
        f"real article figures: {len(figures)} figures and tables with hand-made truth; "
        f"kept out (never tuned on): {', '.join(real_truth.KEPT_OUT)}"
    )
    for name, path, imgsz in checkpoints:
        detector = PanelDetector(DetectorSettings(weights=path, imgsz=imgsz))
        rows = real_eval.evaluate_detector(detector, figures)
        print(real_eval.format_table(real_eval.report(rows), f"{name}@{imgsz}", width=30))
        print()


CEILING_FLOORS = (0.5, 0.25, 0.05, 0.01)


def ceiling(checkpoints: list[Checkpoint], n: int, dev: bool = False) -> None:
    """Each checkpoint's stage against a perfect choice among its own proposals, at several
    confidence floors (``protocol.proposal_ceiling``): where the stage falls short of
    the ceiling, choosing better can gain; where the ceiling falls short of 1, the detector
    never proposes the panel."""
    sets = held_out_sets(n, dev, real=False)
    header = f"{'set':<28} {'checkpoint':<24} {'stage':>13}" + "".join(
        f" {f'ceiling {floor}':>15}" for floor in CEILING_FLOORS
    )
    print("F1@0.5 / exact count: the stage, and a perfect choice among proposals at each floor")
    print(header)
    print("-" * len(header))
    for set_name, items in sets.items():
        inputs = [(item.key, item.data) for item in items]
        for name, path, imgsz in checkpoints:
            detector = PanelDetector(DetectorSettings(weights=path, imgsz=imgsz))
            figures, _ = detector.detect(inputs, with_crops=False)
            found = [([p.bbox for p in f.panels], [p.score for p in f.panels]) for f in figures]
            stage = protocol.score(items, found, 0)
            raws = proposals(detector, inputs, min(CEILING_FLOORS))
            cells = [f"{stage['F1@0.5']:.3f} / {stage['exact_count']:.3f}"]
            for floor in CEILING_FLOORS:
                proposed = [
                    [(r.box, r.score) for r in raw if r.cls == PANEL and r.score >= floor]
                    for raw in raws
                ]
                top = protocol.score(items, protocol.proposal_ceiling(items, proposed), 0)
                cells.append(f"{top['F1@0.5']:.3f} / {top['exact_count']:.3f}")
            print(
                f"{set_name:<28} {f'{name}@{imgsz}':<24} {cells[0]:>13}"
                + "".join(f" {c:>15}" for c in cells[1:])
            )
    print()


def letters(n: int) -> None:
    """Letter accuracy of the shipped label reader on held-out gold label crops."""
    from modeldev.letters.evaluate import family_labels, generator_labels, letter_accuracy
    from ray_jobs.figures.letters.model import DEFAULT_WEIGHTS, LabelReader

    if not DEFAULT_WEIGHTS.is_file():
        print(f"no label reader at {DEFAULT_WEIGHTS}\n")
        return
    reader = LabelReader()
    print(f"{'label set':<48} {'labels':>7} {'one by one':>11} {'by figure':>10} {'labels/s':>9}")
    for name, figures in (
        (f"generator seed 99 ({n} figures)", generator_labels(n, 99)),
        (f"family seed 2026 ({n} figures, other fonts)", family_labels(n, 2026)),
    ):
        alone = letter_accuracy(reader, figures, together=False)
        start = time.perf_counter()
        together = letter_accuracy(reader, figures)
        seconds = time.perf_counter() - start
        labels = sum(len(f.items) for f in figures)
        print(f"{name:<48} {labels:>7} {alone:>11.3f} {together:>10.3f} {labels / seconds:>9.1f}")
    print()
    pairing(n)


def lettered_figures(n: int) -> dict[str, list]:
    from modeldev.heldout.figure import make_heldout_figure
    from modeldev.synth.generate import make_figure

    out: dict[str, list] = {"generator seed 99": [], "family seed 2026": []}
    for i in range(n):
        data, fig = make_figure(99, i)
        out["generator seed 99"].append(
            (fig.name, data, fig.panels, fig.label_texts, fig.params["scheme"])
        )
        data, held = make_heldout_figure(2026, i)
        out["family seed 2026"].append(
            (held.name, data, held.panels, held.label_texts, held.params["scheme"])
        )
    return out


def pairing(n: int) -> None:
    """Share of gold panels whose detected panel gets its own subcaption, letters vs order."""
    from modeldev.letters.pairing_eval import pairing_accuracy

    detector = PanelDetector(DetectorSettings())
    print(
        f"{'pairing (letter-labelled figures)':<34} {'figures':>7} {'panels':>7} "
        f"{'letters':>8} {'order':>7} {'by letter':>9}"
    )
    for name, figures in lettered_figures(n).items():
        r = pairing_accuracy(detector, figures)
        print(
            f"{name:<34} {r['figures']:>7} {r['panels']:>7} {r['with_letters']:>8.3f} "
            f"{r['reading_order_only']:>7.3f} {r['figures_paired_by_letter']:>9}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synthetic", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--imgsz", type=int, default=DetectorSettings().imgsz)
    parser.add_argument("--generator-figures", type=int, default=60)
    parser.add_argument("--held-out", type=int, default=100, help="figures per synthetic set")
    parser.add_argument(
        "--weights",
        action="append",
        help="PATH or PATH@IMGSZ: checkpoints to score on the held-out sets (repeatable; "
        "default: the shipped one and the one it replaced, each at its own size)",
    )
    parser.add_argument(
        "--dev",
        action="store_true",
        help="score the checkpoints on the dev seeds (family 7, generator 98) and stop: "
        "what a new checkpoint is chosen on, before the test seeds are scored once",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="print each checkpoint's stage against a perfect choice among its own proposals "
        "(on the dev seeds with --dev) and stop",
    )
    args = parser.parse_args()
    settings = DetectorSettings(imgsz=args.imgsz)
    with tempfile.TemporaryDirectory() as tmp:
        previous = previous_checkpoint(Path(tmp))
        if args.weights:
            checkpoints = [checkpoint(spec, args.imgsz) for spec in args.weights]
        else:
            checkpoints = [("shipped", settings.weights, args.imgsz)] + (
                [previous] if previous else []
            )
        if args.ceiling:
            ceiling(checkpoints, args.held_out, dev=args.dev)
            return
        # the real figures: the shipped checkpoint and every one given (not the replaced one)
        given = [checkpoint(spec, args.imgsz) for spec in args.weights or []]
        real_figures([("shipped", settings.weights, args.imgsz), *given])
        held_out(checkpoints, args.held_out, dev=args.dev)
        if args.dev:
            return
        letters(args.held_out)
        ceiling(checkpoints, args.held_out)
        items = figures(args.synthetic)
        shipped = PanelDetector(settings)
        rtdetr_path = Path(tmp) / "rtdetr-l-untrained.pt"
        build_model("rtdetr-l").save(str(rtdetr_path))
        rtdetr = PanelDetector(settings.model_copy(update={"weights": str(rtdetr_path)}))
        timed = [
            (f"{shipped.name}@{args.imgsz}", shipped),
            (
                f"{shipped.name} without zoom",
                PanelDetector(settings.model_copy(update={"zoom_below_px": 0})),
            ),
            (
                f"{shipped.name} without colour-bar drop",
                PanelDetector(settings.model_copy(update={"drop_colour_bars": False})),
            ),
        ]
        if previous:
            _, path, imgsz = previous
            timed.append(
                (f"previous@{imgsz}", PanelDetector(DetectorSettings(weights=path, imgsz=imgsz)))
            )
        timed.append(("rtdetr-l (untrained)", rtdetr))
        rows = []
        for name, det in timed:
            seconds, panels = time_detector(det, items, args.repeats)
            rows.append((name, seconds, panels))

        gen_rows = []
        for workers in (1, os.cpu_count() or 1):
            start = time.perf_counter()
            write_dataset(Path(tmp) / f"gen{workers}", args.generator_figures, 1, workers=workers)
            gen_rows.append((workers, time.perf_counter() - start))

    print(
        f"panel detection on {len(items)} figures ({len(list(MEDICAT.glob('*.png')))} real, "
        f"{args.synthetic} synthetic), imgsz {args.imgsz}, device {shipped.device}, "
        f"weights {resolve_weights(settings.weights).name}"
    )
    header = (
        f"{'model':<40} {'seconds':>8} {'figures/s':>10} {'panels':>7} {'panels/s':>9} "
        f"{'time vs shipped':>16} {'figures/s vs shipped':>21}"
    )
    print(header)
    print("-" * len(header))
    base = rows[0][1]
    for name, seconds, panels in rows:
        print(
            f"{name:<40} {seconds:>8.2f} {len(items) / seconds:>10.2f} {panels:>7} "
            f"{panels / seconds:>9.2f} {seconds / base:>16.2f} {base / seconds:>21.2f}"
        )
    print()
    print(f"{'generator workers':<24} {'figures':>8} {'seconds':>8} {'figures/s':>10}")
    for workers, seconds in gen_rows:
        print(
            f"{workers:<24} {args.generator_figures:>8} {seconds:>8.2f} "
            f"{args.generator_figures / seconds:>10.2f}"
        )


if __name__ == "__main__":
    main()
