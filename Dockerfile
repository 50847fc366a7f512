# syntax=docker/dockerfile:1
#
# The LLM transcript gateway as a container: slim Python 3.11, runtime dependencies only, a
# non-root user, the config from a mounted volume, a health check on /healthz.
#
#   docker build -t llm-gateway .
#   docker run --rm -p 8787:8787 -v "$PWD/config/examples:/config:ro" \
#     -e GATEWAY_CONFIG=/config/round-robin-redis.toml -e GATEWAY_TOKEN=... \
#     -e ANTHROPIC_API_KEY=... -e OPENAI_API_KEY=... llm-gateway
#
# Inside a container the gateway must listen on 0.0.0.0 to be reachable, so it refuses to start
# unless the config has [auth] tokens: clients and remote Prometheus scrapers send one of them.
# `docker stop` waits 10 s by default; give it longer than [server] shutdown_grace_seconds
# (docker stop -t 30, or stop_grace_period in compose) so in-flight streams can finish.

# -- build: install the package and its runtime dependencies into a self-contained venv -------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY runtime.lock otel.lock pyproject.toml README.md ./
COPY gateway ./gateway
# OTEL=1: the OpenTelemetry SDK and exporter for [tracing] (the `otel` extra, locked in otel.lock)
ARG OTEL=0
# The runtime dependencies exactly as locked, every file checked against its hash; then the
# gateway itself without resolving anything again, and a check that the two fit. No dev extras:
# the dev tools (pytest, openai, ruff...) stay out of the image.
RUN python -m venv /opt/gateway \
 && /opt/gateway/bin/pip install --require-hashes --no-deps -r runtime.lock \
 && if [ "$OTEL" = 1 ]; then /opt/gateway/bin/pip install --require-hashes --no-deps -r otel.lock; fi \
 && /opt/gateway/bin/pip install . --no-deps \
 && /opt/gateway/bin/pip check \
 && /opt/gateway/bin/pip uninstall --yes pip setuptools

# -- runtime ---------------------------------------------------------------------------------
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/gateway/bin:$PATH \
    GATEWAY_CONFIG=/config/gateway.toml \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8787
RUN groupadd --system --gid 10001 gateway \
 && useradd --system --uid 10001 --gid gateway --home-dir /var/lib/gateway --create-home \
      --shell /usr/sbin/nologin gateway
COPY --from=build /opt/gateway /opt/gateway
# the working directory holds the sqlite store's default path (.gateway/continuity.db)
WORKDIR /var/lib/gateway
USER 10001:10001
VOLUME ["/config", "/var/lib/gateway"]
EXPOSE 8787
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('GATEWAY_PORT', '8787') + '/healthz', timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["gateway"]
CMD ["serve"]
