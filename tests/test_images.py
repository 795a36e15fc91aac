"""Figure images in every mode PMC serves, and the broken ones."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from ray_jobs.contract.failures import StageError
from ray_jobs.figures.images import decode_image


def encode(img: Image.Image, fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    img.save(out, format=fmt, **kw)
    return out.getvalue()


def gradient(mode: str = "RGB", size: tuple[int, int] = (64, 48)) -> Image.Image:
    arr = np.tile(np.linspace(0, 255, size[0], dtype=np.uint8), (size[1], 1))
    return Image.fromarray(arr, "L").convert(mode)


def test_sixteen_bit_grayscale_is_stretched_to_eight_bits() -> None:
    arr = np.tile(np.linspace(1000, 3000, 64).astype(np.uint16), (48, 1))
    img = decode_image(encode(Image.fromarray(arr), "PNG"))
    assert img.mode == "RGB" and img.size == (64, 48)
    pixels = np.asarray(img)[..., 0]
    assert pixels.min() == 0 and pixels.max() == 255  # the used range, not 1000/65535


def test_cmyk_jpeg_becomes_rgb() -> None:
    img = decode_image(encode(gradient("CMYK"), "JPEG"))
    assert img.mode == "RGB" and img.size == (64, 48)


def test_palette_with_transparency_is_composited_on_white() -> None:
    pal = Image.new("P", (10, 10), 0)  # index 0: red, declared transparent
    pal.putpalette([255, 0, 0, 0, 0, 255] + [0] * 762)
    pal.paste(1, (0, 0, 5, 10))  # index 1: blue, opaque
    img = decode_image(encode(pal, "PNG", transparency=0))
    assert img.mode == "RGB"
    assert img.getpixel((9, 5)) == (255, 255, 255)
    assert img.getpixel((1, 5))[2] > 200


@pytest.mark.parametrize(
    ("mode", "fmt"),
    [
        ("RGB", "TIFF"),
        ("L", "TIFF"),
        ("1", "TIFF"),
        ("LA", "PNG"),
        ("RGBA", "WEBP"),
        ("RGB", "BMP"),
    ],
)
def test_other_modes_and_formats(mode: str, fmt: str) -> None:
    img = decode_image(encode(gradient(mode), fmt))
    assert img.mode == "RGB" and img.size == (64, 48)


def test_animated_gif_gives_its_first_frame() -> None:
    frames = [Image.new("P", (20, 20), color) for color in (1, 2, 3)]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:])
    assert decode_image(data).size == (20, 20)


@pytest.mark.parametrize(
    ("data", "error_type"),
    [
        (b"", "empty_image"),
        (b"this is not an image at all", "not_an_image"),
        (encode(gradient(), "JPEG")[:300], "corrupt_image"),
        (encode(gradient(), "PNG")[:-40], "corrupt_image"),
    ],
)
def test_broken_images_are_stage_errors(data: bytes, error_type: str) -> None:
    with pytest.raises(StageError) as info:
        decode_image(data)
    assert (info.value.stage, info.value.error_type) == ("image", error_type)


def test_unknown_bytes_stay_a_verdict_after_ultralytics_is_imported() -> None:
    """ultralytics patches PIL.Image.open to pip-install a HEIF plugin on unknown files."""
    from ray_jobs.figures.yolo_env import ultralytics_offline

    ultralytics_offline()
    import ultralytics.utils.patches  # noqa: F401  (applies the patch)

    with pytest.raises(StageError) as info:
        decode_image(b"this is not an image at all")
    assert info.value.error_type == "not_an_image"


def test_decompression_bomb_is_refused_before_decoding() -> None:
    bomb = encode(Image.new("1", (6000, 6000)), "PNG")  # 36 Mpx in a few kilobytes
    assert len(bomb) < 100_000
    with pytest.raises(StageError) as info:
        decode_image(bomb, max_pixels=10_000_000)
    assert info.value.error_type == "decompression_bomb"
    assert decode_image(bomb, max_pixels=40_000_000).size == (6000, 6000)
