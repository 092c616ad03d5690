# The Ecdysis driver/worker image: the package, Ray and the CLI. Rollout sandboxes are sibling containers started
# through the node's Docker socket (mount /var/run/docker.sock), or the process sandbox where no daemon answers.
#
#   docker build -t ecdysis:latest .                                   # with a registry
#   docker build --build-arg BASE_IMAGE=ecdysis-sandbox-base:local .   # air-gapped: any local image with python3
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/ecdysis
COPY pyproject.toml README.md ./
COPY ecdysis ./ecdysis
COPY sandbox ./sandbox
# WHEELS lets air-gapped builds install from wheels downloaded on a machine that reaches an index.
ARG WHEELS=""
RUN if [ -n "$WHEELS" ]; then pip install --no-index --find-links "$WHEELS" . ; else pip install . ; fi

# Ray's head/worker processes run as this user; the Docker socket's group must be granted at run time.
RUN useradd --create-home --uid 1000 ecdysis
USER ecdysis
ENTRYPOINT ["ecdysis"]
CMD ["--help"]
