"""Every box a detector proposes, read as the stage reads each figure.

What a perfect choice among them could reach (``protocol.proposal_ceiling``) tells a detector
that does not see a panel from a stage that does not choose it. Measuring only: the stage
itself never asks for proposals, so this lives beside the protocol, and reads through the
stage's own :meth:`PanelDetector.read_boxes` so the two cannot drift apart.
"""

from __future__ import annotations

from PIL import Image

from ray_jobs.figures.images import decode_image
from ray_jobs.figures.panels import PanelDetector, RawBox


def proposals(
    detector: PanelDetector, items: list[tuple[str, bytes]], conf: float
) -> list[list[RawBox]]:
    """Every box ``detector`` proposes at ``conf`` or more, per figure, at the size the stage
    reads that figure at; figures that fail to decode get no boxes."""
    settings = detector.settings
    images = []
    for _, data in items:
        try:
            images.append(decode_image(data, settings.max_pixels))
        except Exception:  # a figure that does not decode proposes nothing
            images.append(Image.new("RGB", (1, 1)))
    out: list[list[RawBox]] = []
    for start in range(0, len(images), settings.batch_size):
        out.extend(detector.read_boxes(images[start : start + settings.batch_size], conf)[0])
    return out
