"""PMC ingest: article sources, safe archive reading, JATS parsing, acronyms, the ledger."""
