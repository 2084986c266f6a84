"""Webhook mode: Telegram POSTs each update to us instead of being polled.

- Telegram sends the secret we gave ``setWebhook`` in the
  ``X-Telegram-Bot-Api-Secret-Token`` header; any other request gets 403.
- 200 is answered only after the update is in the journal, so an update
  Telegram believes delivered is on disk. While the bot stops, POSTs get
  503 and Telegram delivers them again later (to the next start).
- ``GET /healthz`` reports whether the workers are up and the database
  takes writes, for a load balancer or an orchestrator; ``GET /livez`` only
  the database, for a liveness probe; ``GET /metrics`` serves Prometheus metrics. In
  polling mode the same server runs without the webhook route when
  ``ANIMEBOT_METRICS_PORT`` is set. The Mini App (bot/webapp/), when configured,
  is served by this same server at ``/app``.

aiohttp serves it: PTB's own webhook server (tornado) answers 200 as soon
as an update is queued in memory, which is the gap this mode must close.
"""
from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web

from storage.database import Unwritable
from storage.errors import AnimebotError
from bot.service import metrics
from bot.updates.intake import Intake

log = logging.getLogger("animebot.webhook")


class ListenError(AnimebotError):
    code = "listen"


SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_UPDATE_BYTES = 1 << 20  # an update is JSON of a few KB; files are fetched separately


# What else the server serves beside updates, health and metrics: it adds its routes (the Mini App's).
Mount = Callable[[web.Application], None]


class WebhookServer:
    """``path`` None: only /healthz and /metrics (polling mode). ``mount`` adds other routes (the Mini App):
    the server takes what it serves, and knows nothing of it."""

    def __init__(self, intake: Intake, path: str | None, secret: str, health: Callable[[], dict[str, Any]],
                 host: str, port: int, mount: Mount | None = None) -> None:
        self.intake = intake
        self.path = path
        self.secret = secret
        self.health = health
        self.host = host
        self.port = port
        self.stopping = False
        app = web.Application(client_max_size=MAX_UPDATE_BYTES)
        if path is not None:
            app.router.add_post(path, self._update)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/metrics", self._metrics)
        if mount is not None:
            mount(app)
        self._runner = web.AppRunner(app, access_log=None)

    async def start(self) -> None:
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self.host, self.port).start()
        except OSError as exc:
            await self._runner.cleanup()
            raise ListenError(f"cannot listen on {self.host}:{self.port} ({exc.strerror}); is another program, or "
                              "another bot, using that port?") from None
        if self.path is not None:
            log.info("webhook listening on %s:%d%s", self.host, self.port, self.path)
        else:
            log.info("health and metrics on http://%s:%d/healthz and /metrics", self.host, self.port)

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _update(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            log.warning("webhook: refused a request from %s without the secret token", request.remote)
            return web.Response(status=403, text="forbidden")
        if self.stopping:
            return web.Response(status=503, text="stopping; send it again later")
        try:
            update = json.loads(await request.read())
            int(update["update_id"])
        except (ValueError, KeyError, TypeError):
            return web.Response(status=400, text="not a Telegram update")
        try:
            await self.intake.accept([update])
        except Unwritable:  # said by the database, once; Telegram delivers it again later
            return web.Response(status=503, text="cannot store updates now; send it again later")
        return web.Response(status=200)

    async def _healthz(self, request: web.Request) -> web.Response:
        report = self.health()
        return web.json_response(report, status=200 if report["ok"] else 503)

    async def _livez(self, request: web.Request) -> web.Response:
        """For a liveness probe: alive while the event loop answers and the database takes writes. A
        restart may mend what keeps this process from writing; it mends nothing else /healthz reports
        (workers down, Redis away), which the bot waits out, taking photos meanwhile."""
        database = self.health()["database"]
        return web.json_response({"ok": database == "ok", "database": database}, status=200 if database == "ok" else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": metrics.CONTENT_TYPE})
