"""The articles table: one Parquet row per parsed article version, figures nested.

An explicit schema keeps every part readable as one dataset (an inferred schema changes with
whichever part happened to have no figures or no acronyms).
"""

from __future__ import annotations

import json

import pyarrow as pa

from ray_jobs.contract.refs import ArticleRef
from ray_jobs.pmc.records import Article

MENTION = pa.struct(
    [
        ("rid", pa.string()),
        ("text", pa.string()),
        ("sentence", pa.string()),
        ("paragraph", pa.string()),
        ("panels", pa.list_(pa.string())),
    ]
)
FIGURE = pa.struct(
    [
        ("id", pa.string()),
        ("label", pa.string()),
        ("title", pa.string()),
        ("caption", pa.string()),
        ("graphics", pa.list_(pa.string())),
        ("image", pa.string()),
        ("mentions", pa.list_(MENTION)),
        ("bold_labels", pa.list_(pa.string())),
    ]
)
ARTICLE_SCHEMA = pa.schema(
    [
        ("source_key", pa.string()),
        ("source", pa.string()),
        ("location", pa.string()),
        ("etag", pa.string()),
        ("pmcid", pa.string()),
        ("version", pa.int64()),
        ("pmid", pa.string()),
        ("doi", pa.string()),
        ("title", pa.string()),
        ("journal", pa.string()),
        ("year", pa.int64()),
        ("article_type", pa.string()),
        ("license_code", pa.string()),
        ("license_url", pa.string()),
        ("abstract", pa.string()),
        ("keywords", pa.list_(pa.string())),
        ("subjects", pa.list_(pa.string())),
        ("acronyms", pa.map_(pa.string(), pa.string())),
        ("figures", pa.list_(FIGURE)),
        ("n_figures", pa.int64()),
        ("parsed_with", pa.string()),
    ]
)


def article_row(ref: ArticleRef, article: Article, code_version: str) -> dict[str, object]:
    data = article.to_dict()
    pmcid, version = article.identity(ref)
    return {
        "source_key": ref.key,
        "source": ref.source,
        "location": ref.location,
        "etag": ref.etag,
        "pmcid": pmcid,
        "version": version,
        "pmid": article.pmid,
        "doi": article.doi,
        "title": article.title,
        "journal": article.journal,
        "year": article.year,
        "article_type": article.article_type,
        "license_code": article.license.code,
        "license_url": article.license.url,
        "abstract": article.abstract,
        "keywords": article.keywords,
        "subjects": article.subjects,
        "acronyms": list(article.acronyms.items()),
        "figures": data["figures"],
        "n_figures": len(article.figures),
        "parsed_with": code_version,
    }


def articles_table(rows: list[dict[str, object]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARTICLE_SCHEMA)


def article_json(article: Article) -> str:
    return json.dumps(article.to_dict(), ensure_ascii=False, indent=2)
