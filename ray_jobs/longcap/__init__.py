"""LongCAP caption enrichment: article context, an LLM's description, a VLM's feasibility
judgement per feature, refinement and acronym expansion, through a vLLM server's
OpenAI-compatible API. :class:`~ray_jobs.longcap.enrich.Enricher` is the entry point."""
