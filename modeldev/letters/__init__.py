"""Label reader development: its training data (``data``, in the faces of ``fonts``), training
(``train``) and scoring (``evaluate``, ``pairing_eval``). The reader that runs in the stage is
``ray_jobs.figures.letters.model``."""
