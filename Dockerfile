# handback's container image: the CLI as entry point, run as a non-root user.
#   docker build -t handback:0.1.0 .
#   docker run --env-file handback.env -p 3000:3000 handback:0.1.0 run myagent:agent
# Your own agent: an image FROM this one that copies your module into /app (docs/deploy.md).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY blocks ./blocks
COPY state ./state
COPY deploy/image-build.sh /usr/local/bin/image-build.sh
# The same script CI runs (.ci/run), so the image's build steps are tested without an engine.
RUN image-build.sh /src /opt/handback

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 handback \
    && useradd --system --uid 10001 --gid handback --home-dir /app --create-home handback
COPY --from=build /opt/handback /opt/handback
ENV PATH=/opt/handback/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOST=0.0.0.0 \
    PORT=3000 \
    HANDBACK_LOG_FORMAT=json
WORKDIR /app
USER 10001:10001
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('HANDBACK_METRICS_PORT') or os.environ['PORT']}/healthz\", timeout=2)"]
ENTRYPOINT ["handback"]
CMD ["run"]
