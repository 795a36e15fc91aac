# syntax=docker/dockerfile:1
# The pipeline image: head and workers of the RayCluster, where the dataset build job runs.
# Built on Ray's own CUDA image so Ray matches the cluster's rayVersion (2.60.0); torch brings
# its CUDA runtime as wheels (a CUDA 13 build: the GPU nodes need a driver that supports it).
#   docker build -f docker/pipeline.Dockerfile -t pmcvl/pipeline:0.1.0 .

# --- stage 1: our package as a wheel, so the final image holds no sources or build tools.
# The wheel carries the parser's C tree walks (ray_jobs/pmc/_ctext.pyx), compiled here.
FROM rayproject/ray:2.60.0-py311-cu128 AS wheel
USER 0
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
USER 1000
WORKDIR /home/ray/src
COPY --chown=ray:users pyproject.toml setup.py README.md ./
COPY --chown=ray:users ray_jobs ray_jobs
COPY --chown=ray:users operators operators
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /home/ray/wheels .

# --- stage 2: the runtime
FROM rayproject/ray:2.60.0-py311-cu128
USER 0
# opencv-python (pulled in by ultralytics) loads libGL and glib at import
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1 libglib2.0-0 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/pmcvl \
    && chown ray:users /opt/pmcvl
USER 1000

# Dependencies in their own layer (the big one: torch, ultralytics, open_clip), rebuilt only
# when pyproject.toml or the pins change, never for a code change. Every version comes from
# requirements/constraints.txt, the set the test suite ran with.
COPY --chown=ray:users pyproject.toml requirements/constraints.txt docker/requirements_from_pyproject.py /tmp/pmcvl/
RUN python /tmp/pmcvl/requirements_from_pyproject.py /tmp/pmcvl/pyproject.toml > /tmp/pmcvl/requirements.txt \
    && pip install --no-cache-dir -c /tmp/pmcvl/constraints.txt -r /tmp/pmcvl/requirements.txt \
    && rm -rf /tmp/pmcvl

COPY --from=wheel /home/ray/wheels /tmp/wheels
# the C walks must be there and match the installed lxml: else parsing runs at half speed
RUN pip install --no-cache-dir --no-deps /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && python -W error -c "from ray_jobs.pmc.text import C_WALKS; assert C_WALKS is not None"

# The small shipped detector and classifier: the default. The chart mounts a volume over
# /opt/pmcvl/models when weights come from a PVC or from S3 (docker/fetch_s3.py), never a hub.
COPY --chown=ray:users models /opt/pmcvl/models
COPY --chown=ray:users configs /opt/pmcvl/configs
COPY --chown=ray:users docker/fetch_s3.py /opt/pmcvl/bin/fetch_s3.py

# ultralytics probes DNS at import and fetches Arial.ttf from GitHub; with these set and one
# offline import at build time (which writes its settings and copies matplotlib's DejaVuSans as
# Arial.ttf into YOLO_CONFIG_DIR), no pod ever reaches out.
ENV YOLO_OFFLINE=1 \
    YOLO_CONFIG_DIR=/home/ray/.config/pmcvl \
    MPLCONFIGDIR=/home/ray/.config/pmcvl/matplotlib \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    PMCVL_HOME=/opt/pmcvl
RUN python -c "from ray_jobs.figures.yolo_env import ultralytics_offline; ultralytics_offline()"

WORKDIR /opt/pmcvl
USER 1000
