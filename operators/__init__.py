"""pmcvl's Airflow operators, triggers and sensors (importable as ``operators``)."""
