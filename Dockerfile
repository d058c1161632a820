#
# One image for every component: `berthmaster scheduler`, `berthmaster operator`,
# `berthmaster deschedule` (the Jobs the operator creates). Two stages:
#   build  - installs the locked dependencies (hack/image/*.lock, every file hash-checked) into
#            a venv, builds the berthmaster wheel and installs it there;
#   final  - the same Python base, the venv copied in, no pip, no compilers, uid 65532.
#
# Users build it with `docker build -t berthmaster:dev .` (the official Python base and PyPI).
# `make image` builds the same file on machines that reach no registry: it passes a local
# Debian base as PYTHON_IMAGE and fills hack/image/wheelhouse/ from the locks first, which the
# build then installs from with no index (see docs/deployment.md).
#
# The base is pinned by tag. Pin it by digest too where you build:
#   docker buildx imagetools inspect python:3.13-slim-trixie --format '{{.Manifest.Digest}}'
#   docker build --build-arg PYTHON_IMAGE=python:3.13-slim-trixie@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.13-slim-trixie

FROM ${PYTHON_IMAGE} AS build
# /src holds operator/, which would shadow the standard library's `operator` for any
# `python -m` run from here (python puts the working directory first on sys.path).
ENV PYTHONSAFEPATH=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# Dependencies first, so a source change reuses this layer.
COPY hack/image/ hack/image/
RUN set -eu; \
    if ls hack/image/wheelhouse/*.whl >/dev/null 2>&1; then \
      set -- --no-index --find-links hack/image/wheelhouse; \
    else \
      set --; \
    fi; \
    python3 -m venv /opt/build; \
    /opt/build/bin/pip install "$@" --require-hashes -r hack/image/requirements-build.lock; \
    python3 -m venv /opt/berthmaster; \
    /opt/berthmaster/bin/pip install "$@" --require-hashes --no-deps -r hack/image/requirements.lock
COPY pyproject.toml setup.py README.md ./
COPY berthmaster/ berthmaster/
COPY scheduler/ scheduler/
COPY operator/ operator/
RUN /opt/build/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheels . \
 && /opt/berthmaster/bin/pip install --no-deps --no-index /wheels/berthmaster-*.whl \
 && /opt/berthmaster/bin/pip check \
 && /opt/berthmaster/bin/pip uninstall --yes pip setuptools wheel \
 && cd / \
 && /opt/berthmaster/bin/python -c "import berthmaster.scheduler.daemon.command, berthmaster.operator.command, berthmaster.scheduler.descheduler.command" \
 && /opt/berthmaster/bin/berthmaster version

FROM ${PYTHON_IMAGE}
# The OCI annotations of the image spec (opencontainers/image-spec annotations.md); `make image`
# and `make release` pass VERSION and REVISION (the commit).
ARG VERSION=unknown
ARG REVISION=unknown
LABEL org.opencontainers.image.title="berthmaster" \
      org.opencontainers.image.description="OpenShift's scheduling and machine-lifecycle features for any Kubernetes cluster" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/berthmaster/berthmaster" \
      org.opencontainers.image.url="https://github.com/berthmaster/berthmaster" \
      org.opencontainers.image.documentation="https://github.com/berthmaster/berthmaster/tree/main/docs" \
      org.opencontainers.image.vendor="berthmaster" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# The base's own pip and the wheels ensurepip would install are build tools too: the final
# image has none (official base: /usr/local; Debian base: /usr/lib, /usr/share/python-wheels).
RUN rm -rf /usr/local/lib/python3.13/site-packages/pip \
           /usr/local/lib/python3.13/site-packages/pip-* \
           /usr/local/bin/pip /usr/local/bin/pip3 /usr/local/bin/pip3.13 \
           /usr/local/lib/python3.13/ensurepip /usr/lib/python3.13/ensurepip \
           /usr/share/python-wheels
# uid 65532 gets a name: kopf (like getpass.getuser()) asks the passwd database who runs it.
RUN echo 'berthmaster:x:65532:65532:berthmaster:/tmp:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'berthmaster:x:65532:' >> /etc/group
COPY --from=build /opt/berthmaster /opt/berthmaster
ENV PATH=/opt/berthmaster/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONSAFEPATH=1
# The chart runs with a read-only root filesystem and an emptyDir at /tmp: HOME points there.
ENV HOME=/tmp
WORKDIR /tmp
USER 65532:65532
ENTRYPOINT ["berthmaster"]
CMD ["--help"]
