# The Ecdysis driver/worker image: the package, Ray and the CLI in a virtualenv at /opt/venv. Rollout sandboxes are
# sibling containers started through the node's Docker socket (mount /var/run/docker.sock), or the process sandbox
# where no daemon answers. Build it with `cluster/build-image.sh`, which needs no registry and no index inside the
# build: it builds every wheel on the host first (build/image-wheels/) and stamps the version and git commit.
#
#   bash cluster/build-image.sh                           # ecdysis:<version> on the Debian rootfs, offline
#   BASE_IMAGE=python:3.11-slim bash cluster/build-image.sh  # any base with python3 (3.11) works
ARG BASE_IMAGE=ecdysis-sandbox-rootfs:local

FROM ${BASE_IMAGE} AS install
# Labelled so cluster/build-image.sh can remove this stage's image (every wheel) once the build is done.
LABEL ecdysis.stage=install
# Wheels only, no index: pip runs from its own wheel, so the base needs neither pip nor ensurepip, and pip itself
# does not end up in the image. Left out as well: the packages' own test suites, Ray's Java jars and LiteLLM's proxy
# web UI (none is imported by a node); bytecode is compiled once here, so no node compiles it at start-up.
COPY build/image-wheels /wheels
RUN python3 -m venv --without-pip /opt/venv \
    && /opt/venv/bin/python "$(ls /wheels/pip-*.whl)/pip" install --no-index --no-cache-dir --no-compile \
        --disable-pip-version-check --find-links /wheels 'ecdysis[tau2,agentbench]' \
    && cd /opt/venv/lib/python3.11/site-packages \
    && find . -depth -type d -name tests -exec rm -rf {} + \
    && rm -rf ray/jars litellm/proxy/_experimental/out \
    && /opt/venv/bin/python -m compileall -q -j 0 /opt/venv/lib > /dev/null

FROM ${BASE_IMAGE}
ARG VERSION=unknown
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="ecdysis" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${GIT_COMMIT}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      ecdysis=1 ecdysis.role=node
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    ECDYSIS_VERSION=${VERSION} \
    ECDYSIS_GIT_COMMIT=${GIT_COMMIT}
COPY --from=install /opt/venv /opt/venv
# The example configs at a stable path, for cluster manifests (`ecdysis train /opt/ecdysis/ecdysis/configs/...`).
COPY ecdysis/configs /opt/ecdysis/ecdysis/configs
WORKDIR /opt/ecdysis
# Ray's head/worker processes run as this user; the Docker socket's group must be granted at run time
# (`--group-add <gid of /var/run/docker.sock>`).
RUN useradd --create-home --uid 1000 ecdysis 2>/dev/null || echo "ecdysis:x:1000:1000::/home/ecdysis:/bin/sh" >> /etc/passwd \
    ; mkdir -p /home/ecdysis && chown 1000:1000 /home/ecdysis
USER 1000:1000
ENV HOME=/home/ecdysis
ENTRYPOINT ["ecdysis"]
CMD ["--help"]
