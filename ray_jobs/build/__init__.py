"""The dataset build's driver, in the pieces a run composes (``jobs/build_dataset.py``):
``planning`` (what the listing has that the ledger lacks), ``cluster`` (connection and
preflight), ``llm_gate`` (whether and with which server captions are enriched), ``phases``
(the Ray phases: stage, dedup, enrich, assemble) and ``commit`` (ledger segments in plan order
under the lease, then the run record and the manifest). The driver holds the plan's refs,
per-part counters and commit records, never rows."""
