#!/usr/bin/env bash
# One detector training round, resumable: the larger round runs on a GPU machine whenever one
# is available (defaults below), the small one on a CPU (ROUND=cpu). Every step skips what an
# earlier, interrupted run already finished, so rerunning the same command continues it, for
# days if need be; the seeds and sizes are the arguments, so the card can name the command.
#
#   bash modeldev/detector/round.sh OUT                  # GPU: 40k literature figures, 640 px
#   ROUND=cpu bash modeldev/detector/round.sh OUT        # CPU: 1k figures, 416 px, one hour
#   PSEUDO=DIR bash modeldev/detector/round.sh OUT       # also the pseudo-labels in DIR
#
# PSEUDO is a `pmcvl-dev pseudo-labels` set, made from a build that does not hold the kept-out
# real articles (modeldev/real_figures/truth.py KEPT_OUT). The round ends with the real-figure
# scores of the new checkpoint beside the shipped one (tuning and kept-out articles apart);
# publishing it is a decision on the tuning numbers, taken by hand or by detector_training.
set -euo pipefail
OUT=${1:?usage: round.sh OUT}
ROUND=${ROUND:-gpu}
SEED=${SEED:-3901}
WARM=${WARM:-models/panel-detector/yolo11n-panels.pt}
if [ "$ROUND" = gpu ]; then
  N=${N:-40000} IMGSZ=${IMGSZ:-640} EPOCHS=${EPOCHS:-60} BATCH=${BATCH:-64} DEVICE=${DEVICE:-0}
  HOURS=${HOURS:-6} MAX_SIDE=${MAX_SIDE:-1280} WORKERS=${WORKERS:-16}
else
  N=${N:-1000} IMGSZ=${IMGSZ:-416} EPOCHS=${EPOCHS:-8} BATCH=${BATCH:-16} DEVICE=${DEVICE:-cpu}
  HOURS=${HOURS:-1} MAX_SIDE=${MAX_SIDE:-640} WORKERS=${WORKERS:-2}
fi
mkdir -p "$OUT"

# 1. generated figures: literature-style, a quarter from the flat generator
if [ ! -f "$OUT/synth/data.yaml" ]; then
  rm -rf "$OUT/synth"
  pmcvl-dev synth --style literature --mix 0.25 --out "$OUT/synth" --n "$N" --seed "$SEED" \
    --workers "$WORKERS" --max-side "$MAX_SIDE"
fi

# 2. the training set: generated figures, and the pseudo-labels (repeated, being few)
train="$OUT/synth/images/train"
if [ -n "${PSEUDO:-}" ]; then
  train="[$OUT/synth/images/train, $(cd "$PSEUDO" && pwd)/images/train]"
fi
cat > "$OUT/data.yaml" <<YAML
path: $(cd "$OUT" && pwd)
train: $train
val: $(cd "$OUT/synth" && pwd)/images/val
names:
  0: panel
  1: label
YAML

# 3. fine-tune from the shipped checkpoint; --resume continues an interrupted run
resume=()
[ -f "$OUT/train/run/weights/last.pt" ] && resume=(--resume)
pmcvl-dev train-detector --data "$OUT/data.yaml" --out "$OUT/train" --warm-start "$WARM" \
  --fine-tune --imgsz "$IMGSZ" --epochs "$EPOCHS" --batch "$BATCH" --seed "$SEED" \
  --device "$DEVICE" --hours "$HOURS" ${THREADS:+--threads "$THREADS"} "${resume[@]}"

# 4. the real-figure scores, shipped and new, each at the size it was trained at
printf 'detector:\n  imgsz: %s\n' "$IMGSZ" > "$OUT/detector.yaml"
pmcvl-dev eval-real --json "$OUT/eval-shipped.json" > "$OUT/eval-shipped.txt"
pmcvl-dev eval-real --weights "$OUT/train/yolo11n-panels.pt" --config "$OUT/detector.yaml" \
  --json "$OUT/eval-new.json" > "$OUT/eval-new.txt"
cat "$OUT/eval-shipped.txt" "$OUT/eval-new.txt"
