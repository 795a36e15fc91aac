"""Downstream CLIP training on our shards with open_clip's own trainer (``open_clip_train``).

``model_config`` renders our model configs per run, ``manifest`` picks the shards, ``argv``
builds the trainer's command line, ``caption_key`` chooses the caption, ``train`` launches.
"""
