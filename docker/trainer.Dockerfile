# syntax=docker/dockerfile:1
# The CLIP trainer, run as Kubernetes Jobs on GPU nodes: `python -m ray_jobs.training.train`
# (open_clip's own trainer over our shards) plus the model configs shipped in the package.
#   docker build -f docker/trainer.Dockerfile -t pmcvl/trainer:0.1.0 .

FROM python:3.11.13-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY ray_jobs ray_jobs
COPY operators operators
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11.13-slim-bookworm
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1
RUN useradd --no-log-init --uid 1000 --create-home trainer
COPY requirements/constraints.txt docker/trainer-requirements.txt /tmp/pmcvl/
RUN pip install --no-cache-dir -c /tmp/pmcvl/constraints.txt -r /tmp/pmcvl/trainer-requirements.txt \
    && rm -rf /tmp/pmcvl
# Only the package: training imports nothing else of pmcvl's dependency list.
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-cache-dir --no-deps /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && python -c "import ray_jobs.training.train, ray_jobs.benchmark.evaluate, open_clip_train.main" \
    && pmcvl build-benchmark --help >/dev/null && pmcvl eval-retrieval --help >/dev/null
COPY docker/fetch_s3.py /opt/pmcvl/bin/fetch_s3.py

# open_clip must never reach a hub: pretrained weights and HF text towers come from local paths.
ENV HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 \
    HF_HOME=/home/trainer/.cache/huggingface
USER 1000
WORKDIR /home/trainer
ENTRYPOINT ["python", "-m", "ray_jobs.training.train"]
