"""Downstream CLIP training on our shards with open_clip's own trainer (``open_clip_train``).

``model_config`` renders our model configs per run, ``manifest`` picks the shards, ``argv``
builds the trainer's command line, ``caption_key`` chooses the caption, ``exclusion`` leaves the
benchmark's articles out, ``train`` launches. On a cluster: ``k8s_job`` renders the training and
evaluation Jobs, ``sync`` moves datasets and runs between S3 and the pod, ``run_plan`` holds the
``clip_training`` DAG's decisions.
"""
