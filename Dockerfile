# SumpWatch gateway image: `sumpwatch gateway` (MQTT ingest, store, rules, alerts, API).
# Built by docker-compose.yml; see docs/deploy.md. Two stages: build a wheel, then
# install it into a slim runtime image that runs as an unprivileged user.
ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
# gateway/examples links to the example files here; the wheel copies their contents.
COPY deploy ./deploy
COPY gateway ./gateway
COPY alerts ./alerts
COPY firmware_sim ./firmware_sim
COPY dashboards ./dashboards
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SUMPWATCH_DATA_DIR=/var/lib/sumpwatch \
    SUMPWATCH_SITES_FILE=/etc/sumpwatch/sites.toml \
    SUMPWATCH_API__HOST=0.0.0.0 \
    SUMPWATCH_API__PORT=8000
RUN useradd --system --uid 10001 --home-dir /var/lib/sumpwatch --shell /usr/sbin/nologin sumpwatch \
    && mkdir -p /var/lib/sumpwatch /etc/sumpwatch \
    && chown sumpwatch:sumpwatch /var/lib/sumpwatch
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# The demo registry as a default; deployments mount their own (docker-compose.yml).
COPY deploy/sites.example.toml /etc/sumpwatch/sites.toml
USER sumpwatch
WORKDIR /var/lib/sumpwatch
VOLUME ["/var/lib/sumpwatch"]
EXPOSE 8000
# /health answers 503 when the broker is disconnected, the store refuses writes
# (e.g. the InfluxDB spool is full) or ingest lags.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]
ENTRYPOINT ["sumpwatch"]
CMD ["gateway"]
