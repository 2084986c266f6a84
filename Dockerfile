# animebot: a Telegram bot that draws photos as anime on the CPU.
#   docker compose up -d            (see docker-compose.yml and the README)
# Build with the models inside the image instead of downloading them into the
# data volume on first start:
#   docker build --build-arg BAKE_WEIGHTS="hayao hayao_v3 shinkai cute jp_face sketch cartoon det_500m selfie realcugan_up2x sample" -t animebot .
# Only what .dockerignore lets through reaches the build: never a .env, a
# virtualenv or a data folder.

# The virtualenv is made in a stage of its own, so that pip's and apt's leftovers
# stay out of the image.
FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY docker/install.sh docker/install.sh
COPY bot bot
COPY inference inference
COPY storage storage
COPY weights weights
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN TORCH_INDEX="$TORCH_INDEX" sh docker/install.sh /opt/venv

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/venv/bin:$PATH
COPY --from=build /opt/venv /opt/venv

ARG BAKE_WEIGHTS=""
# The names are a list: word splitting is wanted.
# hadolint ignore=SC2086
RUN if [ -n "$BAKE_WEIGHTS" ]; then ANIMEBOT_HOME=/opt/animebot animebot weights download $BAKE_WEIGHTS; fi

# The bot runs as UID 10001, which must own /data (docs/operations.md, "The
# data volume"). A new volume takes this ownership from the image.
RUN useradd --create-home --uid 10001 animebot \
    && mkdir -p /data/models /data/cache \
    && chown -R animebot:animebot /data
USER 10001:10001
WORKDIR /app

# The data volume holds the models, the SQLite journal and cache, and the
# results. docker-compose.yml mounts named volumes here: /data, and
# /data/models, which workers share.
ENV ANIMEBOT_HOME=/data \
    ANIMEBOT_WEIGHTS=hayao,hayao_v3,shinkai,cute,jp_face,sketch,cartoon,det_500m,selfie,realcugan_up2x,sample \
    ANIMEBOT_BAKED_MODELS=/opt/animebot/models

# Healthy while the bot runs with all its workers (a heartbeat file in /data).
# The first start may download models and export them, hence the long grace.
HEALTHCHECK --interval=30s --timeout=10s --start-period=5m --retries=3 CMD ["animebot", "health"]

# Exec form: the bot is PID 1's process and gets SIGTERM itself, so
# `docker stop` lets the photos being drawn finish (give it --time 60).
ENTRYPOINT ["animebot"]
CMD ["run"]
