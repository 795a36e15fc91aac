"""A generated PMC-like corpus for the demo, the tests and the scale benchmarks.

Each article is JATS with the traits that break naive parsers: titled multi-paragraph captions
with panel labels, figure references nested in inline markup and naming panels and ranges,
floats inside paragraphs, ``<alternatives>`` graphics, hrefs without extensions, glossaries and
in-text acronym definitions, and licenses stated four different ways. Figures are real images
(one panel per caption label, the label drawn in, each panel drawn as its subcaption describes
it: a scan for "CT", bars for "bar chart"). ``truth.jsonl`` records what a correct parser must
find in each article, and each panel's taxonomy class (``panel_kinds``). Article ``i`` depends
only on ``(seed, i)``: output is byte-identical for a seed, whatever the order it is written in.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import random
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from xml.sax.saxutils import escape

import numpy as np
from PIL import Image, ImageDraw, ImageFilter
from rich.progress import track

Layout = Literal["s3", "bundles", "folders"]
INVENTORY_DATE = "2026-11-29T01-00Z"
INVENTORY_PREFIX = "inventory-reports/pmc-oa-opendata/metadata"

_NEUTRAL = frozenset({"ROI", "OS", "CI", "BMI", "SD"})  # acronyms that name no modality
_ACRONYMS = [
    ("magnetic resonance imaging", "MRI"),
    ("computed tomography", "CT"),
    ("hematoxylin and eosin", "HE"),
    ("optical coherence tomography", "OCT"),
    ("positron emission tomography", "PET"),
    ("immunohistochemistry", "IHC"),
    ("region of interest", "ROI"),
    ("overall survival", "OS"),
    ("confidence interval", "CI"),
    ("body mass index", "BMI"),
    ("diffusion-weighted imaging", "DWI"),
    ("standard deviation", "SD"),
]
# what a panel's subcaption says, what is drawn for it, and its taxonomy class (truth.jsonl's
# ``panel_kinds``): the caption describes the panel the figure shows, so the demo's gallery can
# be read against the truth
_SUBJECTS = [
    ("axial T2-weighted MRI showing a hyperintense lesion", "scan", "mri"),
    ("contrast-enhanced CT of the abdomen", "scan", "ct"),
    ("H&E-stained photomicrograph of the tumour margin", "tissue", "histopathology"),
    ("fluorescence staining of cultured cells", "fluorescence", "fluorescence"),
    ("fundus photograph of the left eye", "fundus", "fundus"),
    ("dermoscopic image of the pigmented lesion", "skin", "dermatology"),
    ("Kaplan-Meier curve of survival by group", "curve", "chart"),
    ("bar chart of expression levels", "bars", "chart"),
]
_LICENSES = [
    ("ali", "https://creativecommons.org/licenses/by/4.0/", "CC BY"),
    ("href", "https://creativecommons.org/licenses/by-nc/4.0/", "CC BY-NC"),
    ("ali", "https://creativecommons.org/publicdomain/zero/1.0/", "CC0"),
    ("text", None, "CC BY"),
    ("href", "https://creativecommons.org/licenses/by-nc-nd/4.0/", "CC BY-NC-ND"),
]
_JOURNALS = ["Journal of Imaging Research", "Clinical Pathology Letters", "Eye and Vision Reports"]
_WORDS = (
    "patients were examined with standard protocols and the findings were reviewed by two "
    "independent readers who were blinded to the clinical outcome of each case in the cohort"
).split()


@dataclass
class GeneratedArticle:
    pmcid: str
    version: int
    xml: bytes
    metadata: dict
    media: dict[str, bytes]
    truth: dict = field(default_factory=dict)


def _sentence(rng: random.Random, n: int = 12) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _prose_section(rng: random.Random, title: str, n_paras: int, n_refs: int) -> str:
    paras = []
    for _ in range(n_paras):
        sentences = []
        for _ in range(rng.randint(3, 7)):
            sentence = escape(_sentence(rng, rng.randint(10, 24)))
            roll = rng.random()
            if roll < 0.4:
                ref = rng.randint(1, n_refs)
                sentence = f'{sentence[:-1]} [<xref ref-type="bibr" rid="B{ref}">{ref}</xref>].'
            elif roll < 0.55:
                sentence = f"{sentence[:-1]} (<italic>p</italic> &lt; 0.0{rng.randint(1, 5)})."
            sentences.append(sentence)
        paras.append(f"<p>{' '.join(sentences)}</p>")
    return f"<sec><title>{title}</title>{''.join(paras)}</sec>"


def _reference_list(rng: random.Random, n_refs: int) -> str:
    refs = []
    for i in range(1, n_refs + 1):
        surname = rng.choice(["Smith", "Garcia", "Chen", "Okafor", "Novak", "Tanaka", "Silva"])
        refs.append(
            f'<ref id="B{i}"><mixed-citation publication-type="journal"><person-group '
            f'person-group-type="author"><name><surname>{surname}</surname><given-names>'
            f"{chr(65 + i % 26)}</given-names></name></person-group>. <article-title>"
            f"{escape(_sentence(rng, 9)[:-1])}</article-title>. <source>"
            f"{rng.choice(_JOURNALS)}</source>. <year>{2000 + i % 24}</year>;<volume>{i}"
            f"</volume>:<fpage>{10 * i}</fpage>.</mixed-citation></ref>"
        )
    return f"<ref-list><title>References</title>{''.join(refs)}</ref-list>"


def _tile(rng: random.Random, drawing: str, tile: int) -> Image.Image:
    """One panel of the kind its subcaption names (``_SUBJECTS``)."""
    dots = np.random.default_rng(rng.getrandbits(64))
    if drawing == "scan":  # grayscale scan: a bright ellipse in noise
        noise = dots.normal(100, rng.uniform(20, 60), (tile, tile))
        img = Image.fromarray(noise.clip(0, 255).astype(np.uint8)).convert("RGB")
        r = tile // 3
        ImageDraw.Draw(img).ellipse(
            (tile // 2 - r, tile // 2 - r, tile // 2 + r, tile // 2 + r), fill="#ddd"
        )
        return img.filter(ImageFilter.GaussianBlur(2))
    ground = {
        "tissue": (236, 180, 205),
        "fluorescence": (8, 8, 12),
        "fundus": (40, 14, 8),
        "skin": (226, 190, 160),
    }
    img = Image.new("RGB", (tile, tile), ground.get(drawing, "white"))
    draw = ImageDraw.Draw(img)
    if drawing in ("tissue", "fluorescence"):  # nuclei, or stained cells on black
        colour = (90, 40, 130) if drawing == "tissue" else (60, 220, 90)
        for _ in range(60):
            x, y, s = rng.randrange(tile), rng.randrange(tile), rng.randrange(3, 9)
            draw.ellipse((x, y, x + s, y + s), fill=colour)
    elif drawing == "fundus":  # an orange disc with an optic disc and vessels
        draw.ellipse((4, 4, tile - 4, tile - 4), fill=(200, 90, 30))
        cx, cy = tile * 2 // 3, tile // 2
        draw.ellipse((cx - tile // 10, cy - tile // 10, cx + tile // 10, cy + tile // 10), "#fc8")
        for _ in range(5):
            draw.line((cx, cy, rng.randrange(tile), rng.randrange(tile)), (120, 20, 10), 2)
    elif drawing == "skin":  # a brown lesion on skin
        r = rng.randrange(tile // 5, tile // 3)
        draw.ellipse((tile // 2 - r, tile // 2 - r, tile // 2 + r, tile // 2 + r), (90, 55, 35))
    elif drawing == "curve":  # survival steps on axes
        draw.line((10, 5, 10, tile - 10, tile - 5, tile - 10), "black", 1)
        for colour in ((40, 90, 160), (200, 60, 40)):
            x, y = 10, 10
            while x < tile - 10:
                nx, ny = x + rng.randrange(5, 20), min(tile - 12, y + rng.randrange(0, 12))
                draw.line((x, y, nx, y, nx, ny), colour, 2)
                x, y = nx, ny
    else:  # bars on an axis
        draw.line((6, 5, 6, tile - 5, tile - 5, tile - 5), "black", 1)
        for b in range(5):
            h = rng.randrange(tile // 8, tile - 20)
            draw.rectangle(
                (10 + b * tile // 5, tile - h, b * tile // 5 + tile // 6, tile - 5),
                fill=(40, 90, 160),
            )
    return img


def _panel_image(rng: random.Random, letters: list[str], drawings: list[str], width: int) -> bytes:
    """A compound figure: one tile per panel letter, each drawn as its subcaption says, with a
    white gutter between tiles as journals set them."""
    cols = min(len(letters), 2)
    rows = (len(letters) + cols - 1) // cols
    tile = max(width // cols, 64)  # small enough for tests, large enough to draw in
    gap = max(4, tile // 32)
    canvas = Image.new(
        "RGB", (tile * cols + gap * (cols - 1), tile * rows + gap * (rows - 1)), "white"
    )
    for i, (letter, drawing) in enumerate(zip(letters, drawings, strict=True)):
        img = _tile(rng, drawing, tile)
        dark = drawing in ("scan", "fluorescence", "fundus")
        ImageDraw.Draw(img).text((6, 4), letter, fill="yellow" if dark else "black")
        canvas.paste(img, ((i % cols) * (tile + gap), (i // cols) * (tile + gap)))
    out = io.BytesIO()
    canvas.save(out, format="JPEG", quality=85)
    return out.getvalue()


def _license_xml(style: str, url: str | None) -> str:
    if style == "ali":
        return (
            f'<license><ali:license_ref xmlns:ali="http://www.niso.org/schemas/ali/1.0/">'
            f"{url}</ali:license_ref><license-p>This article is distributed under an open "
            f"license.</license-p></license>"
        )
    if style == "href":
        return (
            f'<license license-type="open-access" xlink:href="{url}"><license-p>Distributed '
            f'under the <ext-link ext-link-type="uri" xlink:href="{url}">license</ext-link>.'
            f"</license-p></license>"
        )
    return (
        "<license><license-p>This is an open-access article distributed under the terms of "
        "the Creative Commons Attribution License, which permits unrestricted use.</license-p>"
        "</license>"
    )


def generate_article(seed: int, index: int, *, image_width: int = 320) -> GeneratedArticle:
    rng = random.Random(f"{seed}:{index}")
    pmcid = f"PMC{9_000_000 + index}"
    version = 2 if index % 11 == 5 else 1
    lic_style, lic_url, lic_code = rng.choice(_LICENSES)
    # the first two are defined in the introduction and the glossary; the third in a sentence
    # citing a panel, so it names no modality (a mention must not say "CT" of a bar chart)
    acronyms = rng.sample(_ACRONYMS, 2)
    acronyms.append(rng.choice([a for a in _ACRONYMS if a[1] in _NEUTRAL and a not in acronyms]))
    n_figs = rng.choice([1, 1, 2, 2, 3])
    legacy_names = rng.random() < 0.5
    figures_xml: list[str] = []
    media: dict[str, bytes] = {}
    truth_figs = []
    chosen_by_fig: list[list[tuple[str, str, str]]] = []
    for f in range(1, n_figs + 1):
        letters = [chr(65 + k) for k in range(rng.choice([1, 2, 3, 4]))]
        stem = f"{pmcid.lower()}-g{f:03d}" if legacy_names else f"fig{f}"
        chosen = [rng.choice(_SUBJECTS) for _ in letters]
        chosen_by_fig.append(chosen)
        subjects = [subject[0].upper() + subject[1:] for subject, _, _ in chosen]
        title = f"Findings in case {f} of the {rng.choice(['cohort', 'series', 'trial'])}."
        panel_text = " ".join(
            f"(<bold>{letter}</bold>) {escape(subj)} at <italic>baseline</italic>."
            for letter, subj in zip(letters, subjects, strict=True)
        )
        caption_paras = f"<p>{panel_text}</p><p>Scale bar, 50 µm. {escape(_sentence(rng, 8))}</p>"
        use_alt = rng.random() < 0.3
        if use_alt:
            graphic = (
                f'<alternatives><graphic xlink:href="{stem}.tif"/>'
                f'<graphic xlink:href="{stem}.jpg"/></alternatives>'
            )
        else:
            graphic = f'<graphic xlink:href="{stem}"/>'
        figures_xml.append(
            f'<fig id="F{f}" position="float"><label>Figure {f}</label><caption><title>'
            f"{escape(title)}</title>{caption_paras}</caption>{graphic}</fig>"
        )
        media[f"{stem}.jpg"] = _panel_image(rng, letters, [d for _, d, _ in chosen], image_width)
        caption_plain = " ".join(
            [title]
            + [
                f"({letter}) {subj} at baseline."
                for letter, subj in zip(letters, subjects, strict=True)
            ]
        )
        truth_figs.append(
            {
                "id": f"F{f}",
                "label": f"Figure {f}",
                "panels": letters,
                "panel_kinds": [kind for _, _, kind in chosen],
                "image": f"{stem}.jpg",
                "caption_starts": caption_plain,
                "mention_panels": [],
            }
        )
    # body: acronym definitions, then paragraphs that mention each figure in varied ways
    paras = [
        f"<p>We studied {acronyms[0][0]} ({acronyms[0][1]}) and {acronyms[1][0]} "
        f"({acronyms[1][1]}) in a prospective cohort. {escape(_sentence(rng))}</p>"
    ]
    for f, fig in enumerate(truth_figs, start=1):
        letters = fig["panels"]
        style = rng.randrange(3)
        if style == 0 or len(letters) == 1:
            ref = f'<xref ref-type="fig" rid="F{f}">Fig. {f}{letters[0]}</xref>'
            named = [letters[0]]
        elif style == 1:
            ref = f'<xref ref-type="fig" rid="F{f}">Figs. {f}{letters[0]}–{letters[-1]}</xref>'
            named = letters
        else:
            ref = (
                f'<italic>see <xref ref-type="fig" rid="F{f}">Figure '
                f"<bold>{f}{letters[1]}</bold></xref></italic>"
            )
            named = [letters[1]]
        fig["mention_panels"].append(named)
        # a sentence citing one panel says what that panel shows; one citing several, nothing
        cited = chosen_by_fig[f - 1][letters.index(named[0])][0] if len(named) == 1 else None
        where = f" of the {cited}" if cited else ""
        float_inside = figures_xml[f - 1] if rng.random() < 0.4 else ""
        if not float_inside:
            paras.append(figures_xml[f - 1].replace('position="float"', 'position="anchor"'))
        paras.append(
            f"<p>The {acronyms[2][0]} ({acronyms[2][1]}){escape(where)} was assessed ({ref}). "
            f"{float_inside}{escape(_sentence(rng))}</p>"
        )
    glossary = "".join(
        f"<def-item><term>{sf}</term><def><p>{lf}</p></def></def-item>" for lf, sf in acronyms[:2]
    )
    # the bulk of a real article: prose with citations and statistics, and a reference list
    body_rng = random.Random(f"{seed}:{index}:body")
    n_refs = body_rng.randint(25, 50)
    intro = _prose_section(body_rng, "Introduction", body_rng.randint(6, 12), n_refs)
    discussion = _prose_section(body_rng, "Discussion", body_rng.randint(8, 16), n_refs)
    references = _reference_list(body_rng, n_refs)
    year = 2015 + index % 11
    doi = f"10.5555/sample.{index}"
    pmid = str(30_000_000 + index)
    structured = rng.random() < 0.5
    abstract = (
        "<abstract><sec><title>Background</title><p>"
        + escape(_sentence(rng))
        + "</p></sec><sec><title>Results</title><p>"
        + escape(_sentence(rng))
        + "</p></sec></abstract>"
        if structured
        else f"<abstract><p>{escape(_sentence(rng))}</p></abstract>"
    )
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD '
        'v1.3 20210610//EN" "JATS-archivearticle1-3.dtd">\n'
        '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="research-article">'
        f"<front><journal-meta><journal-title-group><journal-title>{rng.choice(_JOURNALS)}"
        "</journal-title></journal-title-group></journal-meta><article-meta>"
        f'<article-id pub-id-type="pmc">{pmcid[3:]}</article-id>'
        f'<article-id pub-id-type="pmid">{pmid}</article-id>'
        f'<article-id pub-id-type="doi">{doi}</article-id>'
        f"<title-group><article-title>A study of <italic>sample</italic> article {index}"
        "</article-title></title-group>"
        f'<pub-date pub-type="epub"><day>{1 + index % 28}</day><month>{1 + index % 12}</month>'
        f"<year>{year}</year></pub-date>"
        f'<pub-date pub-type="collection"><year>{year}</year></pub-date>'
        f"<permissions>{_license_xml(lic_style, lic_url)}</permissions>{abstract}"
        "<kwd-group><kwd>imaging</kwd><kwd>pathology</kwd></kwd-group>"
        f"</article-meta></front><body>{intro}<sec><title>Results</title>{''.join(paras)}</sec>"
        f"{discussion}</body><back><glossary><title>Abbreviations</title><def-list>{glossary}"
        f"</def-list></glossary>{references}</back></article>"
    ).encode()
    retracted = index % 23 == 7
    metadata = {
        "pmcid": pmcid,
        "version": version,
        "pmid": pmid,
        "doi": doi,
        "license_code": lic_code,
        "is_retracted": retracted,
        "xml_url": f"s3://pmc-oa-opendata/{pmcid}.{version}/{pmcid}.{version}.xml",
        "media_urls": [
            f"s3://pmc-oa-opendata/{pmcid}.{version}/{name}?md5="
            + hashlib.md5(data, usedforsecurity=False).hexdigest()
            for name, data in sorted(media.items())
        ],
    }
    truth = {
        "pmcid": pmcid,
        "version": version,
        "license_code": lic_code,
        "year": year,
        "retracted": retracted,
        "figures": truth_figs,
        "acronyms": {sf: lf for lf, sf in acronyms},
    }
    return GeneratedArticle(pmcid, version, xml, metadata, media, truth)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _tar_gz(files: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1_700_000_000, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def write_corpus(
    out: Path, n: int, layout: Layout, seed: int, image_width: int = 320, progress: bool = False
) -> int:
    """Write ``n`` articles (plus earlier versions of some) in the given layout; returns count."""
    out.mkdir(parents=True, exist_ok=True)
    truths: list[dict] = []
    inventory_rows: list[list[str]] = []
    file_list: list[dict[str, str]] = []
    for index in track(range(n), description="generating articles", disable=not progress):
        art = generate_article(seed, index, image_width=image_width)
        versions = [art]
        if art.version == 2 and layout != "bundles":
            old = generate_article(seed, index, image_width=image_width)
            old.version = 1
            old.metadata = {**old.metadata, "version": 1}
            old.truth = {**old.truth, "version": 1}
            versions.insert(0, old)
        for a in versions:
            key = a.pmcid if layout == "bundles" else f"{a.pmcid}.{a.version}"
            meta_json = json.dumps(a.metadata, indent=1).encode()
            if layout == "bundles":
                name = f"{a.pmcid}.tar.gz"
                files = {f"{a.pmcid}/article.nxml": a.xml}
                files.update({f"{a.pmcid}/{m}": d for m, d in a.media.items()})
                _write(out / name, _tar_gz(files))
                file_list.append(
                    {
                        "File": name,
                        "Article Citation": f"Sample J. {a.truth['year']};{index}",
                        "Accession ID": a.pmcid,
                        "Last Updated": "2026-11-01 10:00:00",
                        "PMID": a.metadata["pmid"],
                        "License": a.metadata["license_code"],
                    }
                )
            else:
                folder = out / key
                legacy = layout == "folders" and index % 3 == 2
                _write(folder / (f"{a.pmcid}.nxml" if legacy else f"{key}.xml"), a.xml)
                if not legacy:
                    _write(folder / f"{key}.json", meta_json)
                for m, d in a.media.items():
                    _write(folder / m, d)
                if layout == "s3":
                    _write(out / "metadata" / f"{key}.json", meta_json)
                    inventory_rows.append(
                        [
                            "pmc-oa-opendata",
                            f"metadata/{key}.json",
                            str(len(meta_json)),
                            "2026-11-28T00:00:00.000Z",
                            hashlib.md5(meta_json, usedforsecurity=False).hexdigest(),
                        ]
                    )
            truths.append(
                {**a.truth, "key": key, "legacy_folder": layout == "folders" and index % 3 == 2}
            )
    if layout == "s3":
        _write_inventory(out, inventory_rows)
    if layout == "bundles":
        with (out / "oa_file_list.csv").open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(file_list[0]) if file_list else [])
            writer.writeheader()
            writer.writerows(file_list)
    _write(out / "truth.jsonl", "".join(json.dumps(t) + "\n" for t in truths).encode())
    return len(truths)


def _write_inventory(out: Path, rows: list[list[str]]) -> None:
    """An S3 inventory as AWS writes it: gzipped CSV data files and a manifest that names them."""
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    data = gzip.compress(text.getvalue().encode(), mtime=0)
    data_key = f"{INVENTORY_PREFIX}/data/inventory-0.csv.gz"
    _write(out / data_key, data)
    manifest = {
        "sourceBucket": "pmc-oa-opendata",
        "destinationBucket": "arn:aws:s3:::pmc-oa-opendata",
        "version": "2016-11-30",
        "creationTimestamp": "1764378000000",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag",
        "files": [
            {
                "key": data_key,
                "size": len(data),
                "MD5checksum": hashlib.md5(data, usedforsecurity=False).hexdigest(),
            }
        ],
    }
    _write(
        out / INVENTORY_PREFIX / INVENTORY_DATE / "manifest.json",
        json.dumps(manifest, indent=1).encode(),
    )
