# animebot: a Telegram bot that draws photos as anime on the CPU.
#   docker compose up -d            (see docker-compose.yml and the README)
# Build with the models inside the image instead of downloading them into the
# data volume on first start:
#   docker build --build-arg BAKE_WEIGHTS="hayao hayao_v3 shinkai cute jp_face sketch cartoon det_500m selfie sample" -t animebot .
FROM python:3.11-slim-bookworm

# insightface needs opencv-python (the GUI build), which needs libGL and GLib.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgl1=1.6.* libglib2.0-0=2.74.* \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH

WORKDIR /app
COPY pyproject.toml README.md ./
COPY docker/install.sh docker/install.sh
COPY bot bot
COPY inference inference
COPY storage storage
COPY weights weights
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN TORCH_INDEX="$TORCH_INDEX" sh docker/install.sh /opt/venv

ARG BAKE_WEIGHTS=""
# The names are a list: word splitting is wanted.
# hadolint ignore=SC2086
RUN if [ -n "$BAKE_WEIGHTS" ]; then ANIMEBOT_HOME=/opt/animebot animebot weights download $BAKE_WEIGHTS; fi

RUN useradd --create-home --uid 10001 animebot \
    && mkdir /data \
    && chown animebot:animebot /data
USER 10001:10001

# The data volume holds the models, the SQLite journal and cache, and the results.
ENV ANIMEBOT_HOME=/data \
    ANIMEBOT_WEIGHTS=hayao,hayao_v3,shinkai,cute,jp_face,sketch,cartoon,det_500m,selfie,sample \
    ANIMEBOT_BAKED_MODELS=/opt/animebot/models
VOLUME ["/data"]

# Healthy while the bot runs with all its workers (a heartbeat file in /data).
# The first start may download models and export them, hence the long grace.
HEALTHCHECK --interval=30s --timeout=10s --start-period=5m --retries=3 CMD ["animebot", "health"]

# Exec form: the bot is PID 1's process and gets SIGTERM itself, so
# `docker stop` lets the photos being drawn finish (give it --time 60).
ENTRYPOINT ["animebot"]
CMD ["run"]
