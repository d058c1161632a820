# syntax=docker/dockerfile:1
#
# One image for every component: `berthmaster scheduler`, `berthmaster operator`,
# `berthmaster deschedule` (the Jobs the operator creates). Two stages:
#   build  - builds the berthmaster wheel and installs it with its dependencies into a venv;
#   final  - the same slim Python base, the venv copied in, no pip, no compilers, uid 65532.
#
# The base is pinned by tag. Pin it by digest too where you build (this repository's build
# machines have no registry access to resolve one):
#   docker buildx imagetools inspect python:3.11-slim-bookworm --format '{{.Manifest.Digest}}'
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps everything else out of the context).
COPY pyproject.toml setup.py README.md ./
COPY berthmaster/ berthmaster/
COPY scheduler/ scheduler/
COPY operator/ operator/
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/berthmaster \
 && /opt/berthmaster/bin/pip install /wheels/berthmaster-*.whl \
 && /opt/berthmaster/bin/pip uninstall --yes pip setuptools wheel \
 && cd / \
 && /opt/berthmaster/bin/python -P -c "import berthmaster.scheduler.daemon.command, berthmaster.operator.command, berthmaster.scheduler.descheduler.command" \
 && /opt/berthmaster/bin/berthmaster version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="berthmaster" \
      org.opencontainers.image.description="OpenShift's scheduling and machine-lifecycle features for any Kubernetes cluster" \
      org.opencontainers.image.licenses="Apache-2.0"
# The base image's own pip is a build tool too: the final image has none.
RUN rm -rf /usr/local/lib/python3.11/site-packages/pip \
           /usr/local/lib/python3.11/site-packages/pip-* \
           /usr/local/bin/pip /usr/local/bin/pip3 /usr/local/bin/pip3.11
COPY --from=build /opt/berthmaster /opt/berthmaster
ENV PATH=/opt/berthmaster/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The chart runs with a read-only root filesystem and an emptyDir at /tmp; uid 65532 has no
# passwd entry, so HOME points there too.
ENV HOME=/tmp
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["berthmaster"]
CMD ["--help"]
