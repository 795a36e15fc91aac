"""The modality classifier's development: training data from the panel makers, augmentation,
calibration, training with its model card, evaluation and the held-out relevance family. The
product (``ray_jobs.figures.classifier``) only loads what this writes."""
