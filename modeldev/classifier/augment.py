"""Training-time image variation for the modality classifier: photometric and geometric
augmentation of the panels, and made-up non-panels for outlier exposure. Inference sees
neither, so they live with training."""

from __future__ import annotations

import random

from PIL import Image, ImageEnhance, ImageFilter, ImageOps


def augment(img: Image.Image, rng: random.Random) -> Image.Image:
    """Training-time variation: a crop of 60-100% of each side, mirror, brightness, contrast,
    saturation, sometimes blur or grey. Nothing a panel's class depends on."""
    w, h = img.size
    cw, ch = max(8, int(w * rng.uniform(0.6, 1.0))), max(8, int(h * rng.uniform(0.6, 1.0)))
    x, y = rng.randint(0, max(0, w - cw)), rng.randint(0, max(0, h - ch))
    img = img.crop((x, y, x + cw, y + ch))
    if rng.random() < 0.5:
        img = ImageOps.mirror(img)
    img = ImageEnhance.Brightness(img).enhance(rng.uniform(0.75, 1.25))
    img = ImageEnhance.Contrast(img).enhance(rng.uniform(0.75, 1.25))
    img = ImageEnhance.Color(img).enhance(rng.uniform(0.6, 1.4))
    if rng.random() < 0.2:
        img = img.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
    if rng.random() < 0.1:
        img = ImageOps.grayscale(img).convert("RGB")
    return img


def synthetic_outliers(x, generator):  # type: ignore[no-untyped-def]
    """Images that are no panel of any class, made from a training batch ``x`` (N, 3, S, S):
    tiles of several images shuffled together, and smooth random colour fields. Outlier
    exposure (Hendrycks et al. 2019) trains the model towards a uniform output on them, so
    its confidence and energy fall on images unlike its classes; no held-out image is used."""
    import torch

    n, _, size, _ = x.shape
    k = max(1, n // 4)
    grid = 4
    step = size // grid
    shuffled = x[:k].clone()
    for i in range(k):
        for gy in range(grid):
            for gx in range(grid):
                j = int(torch.randint(n, (1,), generator=generator))
                sy, sx = (int(v) for v in torch.randint(grid, (2,), generator=generator))
                shuffled[i, :, gy * step : (gy + 1) * step, gx * step : (gx + 1) * step] = x[
                    j, :, sy * step : (sy + 1) * step, sx * step : (sx + 1) * step
                ]
    coarse = torch.randn((k, 3, 4, 4), generator=generator) * 1.2
    fields = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bicubic")
    fields = fields + 0.3 * torch.randn((k, 3, size, size), generator=generator)
    return torch.cat([shuffled, fields.to(x.dtype)]).to(x.device)
