# syntax=docker/dockerfile:1
# The enrichment model server: the official vLLM OpenAI-compatible image, run as a non-root user
# with hub access off. The model comes from a volume that the chart fills from S3 (or a PVC you
# filled); the server arguments (model path, --served-model-name, --max-model-len,
# --limit-mm-per-prompt, the structured-output backend) come from the chart's values.
#   docker build -f docker/vllm.Dockerfile -t pmcvl/vllm:0.1.0 .

FROM vllm/vllm-openai:v0.33.0
USER 0
# A UID no base layer uses (Ubuntu images already own 1000); group 0 so OpenShift-style random
# UIDs still find a writable home.
RUN useradd --no-log-init --uid 10001 --gid 0 --create-home --home-dir /home/vllm vllm
ENV HOME=/home/vllm \
    HF_HOME=/home/vllm/.cache/huggingface \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1
USER 10001
WORKDIR /home/vllm
ENTRYPOINT ["vllm", "serve"]
