"""The record contract, the bottom layer every stage imports downward: the article reference
(``refs``), the failure record (``failures``), the row format between stages (``rows``), and the
panel record with the index, rejects and failure schemas the dataset is written in (``records``).
Nothing here imports another ``ray_jobs`` package, so any stage, the driver, the shard writer and
the validator can depend on it without pulling each other in."""
