"""One line on each column of the index (the record contract plus shard placement), for the
dataset card and the Croissant file: users read the fields there, not in ``records.py``.

A test checks that every column of :data:`~ray_jobs.contract.records.INDEX_SCHEMA` has a line
here and nothing else does, so the documentation cannot drift from the contract.
"""

from __future__ import annotations

import pyarrow as pa

FIELDS: dict[str, str] = {
    "key": "sample id, `{figure_key}-pNN`; the WebDataset key of the sample (no dots)",
    "figure_key": "figure id, `{pmcid}v{version}-{figure id}`, stable across runs",
    "pmcid": "PubMed Central id of the article",
    "pmc_version": "PMC version of the article the sample was built from",
    "pmid": "PubMed id, when the article has one",
    "doi": "DOI of the article, when it has one",
    "journal": "journal title",
    "year": "publication year",
    "license": "the article's license as a normalised code (CC BY, CC BY-NC, CC0, ...)",
    "license_url": "the license URL the article states (names the exact license version)",
    "figure_id": "the figure's id in the article's JATS",
    "figure_label": "the figure's label as printed (Figure 2)",
    "caption": "the figure's whole caption",
    "subcaption": "the part of the caption that describes this panel",
    "panel_index": "the panel's place in the figure's reading order, from 0",
    "n_panels": "panels the detector found in the figure",
    "panel_label": "the panel's label (A, b, ii), when one was paired",
    "alignment": "how the subcaption was paired: letter | label | single | full_caption | figure "
    "(the whole figure with its whole caption: its boxes and caption disagreed)",
    "alignment_confidence": "confidence of that pairing, 0 to 1",
    "panel_bbox": "the panel's box in the figure's pixels: x0, y0, x1, y1",
    "panel_status": "ok, or fallback (the whole figure passed as one panel)",
    "detector_score": "the panel detector's score for the box (null for a fallback)",
    "detector_version": "the panel detector and its weights' version (`name:` sha256 prefix)",
    "split_confidence": "how sure the caption's panel-label sequence is (0: not split)",
    "caption_agreement": "how the figure's boxes, the letters read and the caption's labels "
    "agreed: single | unlabelled | letters | count | anchored (pieces joined at their label) | "
    "disagree (the figure published whole with its whole caption)",
    "layout_reason": "why boxes and caption disagreed (the counts), when they did",
    "label_bbox": "the box of the panel's letter in the figure's pixels, when one was found",
    "modality": "imaging modality, taxonomy level 2",
    "modality_l1": "imaging modality, taxonomy level 1",
    "modality_score": "the modality decision's probability",
    "modality_decided_by": "which evidence decided the modality (image, subcaption, caption)",
    "modality_evidence": "all the evidence for the modality",
    "inline_mentions": "sentences of the article that cite the figure",
    "long_caption": "the LLM-enriched description (null where enrichment did not run)",
    "feasibility": "the enriched statements, each with whether the image supports it",
    "llm_model": "the LLM that wrote long_caption",
    "prompt_version": "the prompt version that wrote long_caption",
    "llm_prompt_tokens": "prompt tokens of the enrichment call",
    "llm_completion_tokens": "completion tokens of the enrichment call",
    "width": "panel image width in pixels",
    "height": "panel image height in pixels",
    "sha256": "sha256 of the panel image bytes",
    "phash": "64-bit perceptual hash of the panel image, hex",
    "tokens_caption": "CLIP BPE tokens of the caption, start and end included",
    "tokens_subcaption": "CLIP BPE tokens of the subcaption",
    "tokens_long_caption": "CLIP BPE tokens of the long caption",
    "tokens_long_caption_long": "tokens of the long caption in the long-context tokenizer",
    "split": "the split the sample belongs to",
    "text": "the training caption: long_caption where enrichment ran, else the subcaption",
    "format": "record format version (pmcvl-panel/1)",
    "shard": "the tar shard that holds the sample (index only)",
    "member": "the image member's name in that shard (index only)",
}


def type_name(kind: pa.DataType) -> str:
    """A column's type as the card's field table shows it."""
    if pa.types.is_list(kind):
        return f"list<{type_name(kind.value_type)}>"
    if pa.types.is_struct(kind):
        return "struct<" + ", ".join(f"{f.name}: {type_name(f.type)}" for f in kind) + ">"
    return str(kind)
