"""Panel crops as ``data:`` URLs for the chat API.

A crop that is already small and JPEG or PNG is sent as it is (no re-encoding, no loss); a
larger one is resized so its longer side is at most ``max_side`` first, because a VLM resizes
anyway and every extra pixel costs upload time and visual tokens.
"""

from __future__ import annotations

import base64
import io

from PIL import Image, UnidentifiedImageError

from ray_jobs.contract.failures import StageError
from ray_jobs.figures.images import pillow_open  # not ultralytics' patch (it pip-installs)

_SENT_AS_IS = {"JPEG": "image/jpeg", "PNG": "image/png"}


def image_data_url(data: bytes, max_side: int) -> str:
    """Raises StageError (``bad_image``, not retryable) for bytes Pillow cannot read."""
    try:
        with pillow_open()(io.BytesIO(data)) as image:
            mime = _SENT_AS_IS.get(image.format or "")
            if mime and max(image.size) <= max_side:
                payload = data
            else:
                image.load()
                image.thumbnail((max_side, max_side), Image.Resampling.BICUBIC)
                keep_alpha = image.mode in ("RGBA", "LA") or "transparency" in image.info
                out = io.BytesIO()
                if keep_alpha:
                    image.save(out, format="PNG", optimize=False)
                    mime = "image/png"
                else:
                    image.convert("RGB").save(out, format="JPEG", quality=90)
                    mime = "image/jpeg"
                payload = out.getvalue()
    except (UnidentifiedImageError, Image.DecompressionBombError, OSError, ValueError) as exc:
        raise StageError("enrich", "bad_image", f"unreadable panel image: {exc}") from exc
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"
