# syntax=docker/dockerfile:1
# A small image for the chart's init containers: copies model weights (and shards) from S3 into
# a volume with fetch_s3.py. Small, so a GPU node pulls it in seconds before vLLM starts.
#   docker build -f docker/fetch.Dockerfile -t pmcvl/fetch:0.1.0 .

FROM python:3.11.13-slim-bookworm
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1
RUN useradd --no-log-init --uid 1000 --create-home fetch
COPY requirements/constraints.txt /tmp/pmcvl/
RUN pip install --no-cache-dir -c /tmp/pmcvl/constraints.txt boto3 && rm -rf /tmp/pmcvl
COPY docker/fetch_s3.py /opt/pmcvl/bin/fetch_s3.py
USER 1000
ENTRYPOINT ["python", "/opt/pmcvl/bin/fetch_s3.py"]
