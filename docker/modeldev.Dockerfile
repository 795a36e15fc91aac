# The model-development image: the pipeline image plus modeldev/ (`pmcvl-dev`: synthetic and
# real-figure data, detector, label-reader and classifier training and evaluation). The
# detector_training DAG's Ray jobs run on a RayCluster of this image; the dataset build's
# workers run the pipeline image, which never carries modeldev/ (the product does not import it).
#
#   make docker-build-modeldev      (builds the pipeline image first and starts from it)
#
# `pipeline` is a named build context the Makefile pins to $(REGISTRY)/pipeline:$(TAG), so this
# image is always the pipeline image of the same tag plus the tooling.
# hadolint ignore=DL3006
FROM pipeline
COPY --chown=ray:users modeldev /opt/pmcvl/modeldev
ENV PYTHONPATH=/opt/pmcvl
RUN python -c "import modeldev.cli" && pmcvl-dev --help > /dev/null
USER 1000
