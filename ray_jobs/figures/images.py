"""Decode untrusted figure images into 8-bit RGB, or say precisely why not.

PMC media come in every mode Pillow knows: 16-bit grayscale TIFFs, CMYK JPEGs, palette GIFs
and PNGs with transparency. Each is converted to what a detector and a JPEG encoder expect.
Truncated or corrupt files and decompression bombs raise StageError (stage ``image``): the
record becomes a failure row and the batch goes on.
"""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageFile, UnidentifiedImageError

from ray_jobs.contract.failures import StageError

STAGE = "image"
DEFAULT_MAX_PIXELS = 80_000_000  # a 9000x9000 figure; PMC's largest are well below
HIGH_BIT_MODES = ("I;16", "I;16B", "I;16L", "I", "F")

# Set explicitly rather than trusting library defaults: truncated files are errors, not grey
# bottoms, and Pillow's own bomb limit is ours (decode_image checks its argument first).
ImageFile.LOAD_TRUNCATED_IMAGES = False
Image.MAX_IMAGE_PIXELS = DEFAULT_MAX_PIXELS


def _to_8bit(img: Image.Image) -> Image.Image:
    """16/32-bit integer and float images: stretch their actual range into 0..255."""
    arr = np.asarray(img, dtype=np.float64)
    lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
    scaled = np.zeros_like(arr) if hi <= lo else (arr - lo) * (255.0 / (hi - lo))
    return Image.fromarray(np.nan_to_num(scaled).astype(np.uint8), mode="L")


def to_rgb(img: Image.Image) -> Image.Image:
    if img.mode in HIGH_BIT_MODES:
        img = _to_8bit(img)
    if img.mode == "P":
        img = img.convert("RGBA")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "L" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")  # L, 1, CMYK, YCbCr, LAB, HSV, RGB


def pillow_open():  # type: ignore[no-untyped-def]
    """Pillow's own ``Image.open``. Importing ultralytics replaces it process-wide with a
    wrapper that, on any unidentifiable file, tries to pip-install pi-heif: a network call at
    run time, and an ImportError instead of a clear verdict when offline."""
    opener = Image.open
    if getattr(opener, "__module__", "").startswith("ultralytics"):
        from ultralytics.utils import patches

        return getattr(patches, "_image_open", opener)
    return opener


def decoded_bytes(width: int, height: int, mode: str) -> int:
    """The memory an image of this size and mode takes on its way to RGB: Pillow keeps RGB
    (and every multi-band mode) in 4 bytes a pixel, and high-bit images pass through a float64
    array (8 bytes a pixel). The pixel count alone misses that factor of two."""
    return width * height * (8 if mode in HIGH_BIT_MODES else 4)


def header_decoded_bytes(data: bytes) -> int:
    """:func:`decoded_bytes` from the header alone (nothing decoded); an unreadable header
    counts its raw size (decoding will refuse it with the precise reason)."""
    try:
        with pillow_open()(io.BytesIO(data)) as img:
            return decoded_bytes(*img.size, img.mode)
    except Exception:  # any unreadable header: judged when it is decoded
        return len(data)


def decode_image(
    data: bytes,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    max_bytes: int | None = None,
) -> Image.Image:
    """Bytes → 8-bit RGB (first frame of an animation), fully loaded. Both bounds are checked
    on the header, before a single pixel is decoded; ``max_bytes`` None: the pixels alone
    (the panel stage checks ``detector.max_decoded_bytes`` on the header before the detector
    decodes, so a configured bound above any default here is never cut short)."""
    if not data:
        raise StageError(STAGE, "empty_image", "zero-byte image")
    try:
        img = pillow_open()(io.BytesIO(data))  # reads the header only
        width, height = img.size
        if width * height > max_pixels:
            raise StageError(
                STAGE, "decompression_bomb", f"{width}x{height} exceeds {max_pixels} pixels"
            )
        size = decoded_bytes(width, height, img.mode)
        if max_bytes is not None and size > max_bytes:
            raise StageError(
                STAGE,
                "image_too_large",
                f"{width}x{height} {img.mode} decodes to {size} bytes (limit {max_bytes})",
            )
        img.seek(0)
        img.load()
        return to_rgb(img)
    except StageError:
        raise
    except Image.DecompressionBombError as exc:
        raise StageError(STAGE, "decompression_bomb", str(exc)) from None
    except UnidentifiedImageError:
        raise StageError(STAGE, "not_an_image", "Pillow cannot identify the format") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise StageError(STAGE, "corrupt_image", f"{type(exc).__name__}: {exc}") from None


def page_level(grey: np.ndarray) -> float:
    """A figure's page colour in grey levels: the median of its outermost pixels."""
    return float(np.median(np.concatenate([grey[0], grey[-1], grey[:, 0], grey[:, -1]])))
