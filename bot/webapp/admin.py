"""The Mini App's admin view: the queue now, today's drawings, the blocked users and the workers.

For the bot's admins (``ANIMEBOT_ADMINS``) only, and only when they ask: every call is checked as the
page's others are (Telegram's signature, the rate: bot/webapp/api.py), then against the admin list,
so a signed user who is not an admin gets 403 and one sentence, and learns nothing else.

- ``GET /app/api/admin``: all four at once (docs/webapp.md, "The admin view"). The counts are those
  /stats reads (the pool, the journal, storage/counters.py), so the two never tell different stories.
- ``POST /app/api/admin/unblock`` with ``{"user": ID}``: what ``/unblock ID`` does, through the same
  code (bot/flow/blocking.py), so the log names the admin either way.
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.webapp.auth import WebAppUser
from bot.webapp.http import as_json, error
from bot.webapp.needs import PageNeeds
from bot.words.catalogue import t

Caller = Callable[[web.Request], Awaitable[tuple[WebAppUser, str]]]  # the signed user and their language
Body = Callable[[web.Request, str], Awaitable[dict[str, Any]]]  # a POST's JSON object
TOP = 5  # the busiest users shown


class AdminApi:
    def __init__(self, st: PageNeeds, caller: Caller, body: Body) -> None:
        self.st = st
        self.caller = caller
        self.body = body

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/app/api/admin", self._overview)
        app.router.add_post("/app/api/admin/unblock", self._unblock)

    async def _admin(self, request: web.Request) -> tuple[WebAppUser, str]:
        user, lang = await self.caller(request)
        if not self.st.access.is_admin(user.id):
            raise error(web.HTTPForbidden, t(lang, "webapp_admins_only"))
        return user, lang

    async def _overview(self, request: web.Request) -> web.Response:
        await self._admin(request)
        pool, now = self.st.pool, time.time()
        lines = pool.lines()
        today = await self.st.stores.counters.today(now)
        top = await self.st.journal.top_drawn(now - now % 86400, TOP)  # since UTC midnight, as the quota's day
        return as_json({
            "queue": {"waiting": pool.waiting, "drawing": pool.running,
                      "oldest_s": round(max((line.oldest_s for line in lines), default=0.0)),
                      "users": [{"user": line.user_id, "waiting": line.waiting, "drawing": line.drawing,
                                 "oldest_s": round(line.oldest_s)} for line in lines]},
            "today": {"photos": today.get("photos", 0), "clips": today.get("clips", 0), "hd": today.get("hd", 0),
                      "top": [{"user": uid, "photos": n} for uid, n in top]},
            "blocked": await self._blocked(),
            "workers": [{"name": w.name, "styles": list(w.styles), "engine": w.engine, "busy": w.busy}
                        for w in pool.workers()],
            "health": pool.healthy()[1]})

    async def _unblock(self, request: web.Request) -> web.Response:
        """The block lifted; the list as it is now, so the page shows what the bot holds, not what it guessed."""
        admin, lang = await self._admin(request)
        target = (await self.body(request, lang)).get("user")
        if not isinstance(target, int) or isinstance(target, bool) or not 0 < target < 2 ** 63:
            raise error(web.HTTPBadRequest, t(lang, "webapp_bad_request"))
        lifted = await self.st.blocking.unblock(target, by=admin.id)
        return as_json({"unblocked": lifted, "blocked": await self._blocked()})

    async def _blocked(self) -> list[dict[str, Any]]:
        return [{"user": b.user_id, "by": b.by, "at": int(b.at)} for b in await self.st.blocking.listed()]
