"""The Mini App's server side: the page at ``/app``, its JSON API, and its pictures.

Mounted on the bot's own aiohttp server (bot/updates/webhook.py): the
webhook's in webhook mode, the one on ``ANIMEBOT_METRICS_PORT`` when polling.

- ``GET /app``: the page (bot/webapp/page/), plain HTML, CSS and JS, with its sentences put in
  from the bot's catalogue (bot/words), every language's: there is one table, not two.
- ``/app/api/...``: JSON, each call signed by Telegram (``Authorization: tma
  <initData>``, bot/webapp/auth.py); anything unsigned or stale is a bare 401.
  A user reaches only the results shown in their own chat with the bot.
- ``/app/img/...``: the pictures (bot/webapp/pictures.py), by signed addresses (bot/webapp/links.py),
  within per-user rates (bot/webapp/limits.py).

What the page asks to have drawn is an ordinary request (bot/flow/requests.py,
``answer="app"``): journalled, queued fairly behind everyone else's photos,
counted against the same limits and quota, cached. Sending a result to the
chat is a request too, answered from the cache.
"""
from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.flow.answering import Shape
from bot.flow.kinds.base import Kind
from bot.flow.kinds import registry as kinds
from bot.flow.kinds.registry import plan, redrawn
from bot.flow.previews import PREVIEW_SETTINGS
from bot.flow.requests import Request, Source, StoredRequestError, request_from_json
from bot.webapp.admin import AdminApi
from bot.webapp.auth import Unauthorized, WebAppUser, from_header
from bot.webapp.http import as_json as _json, error as _error
from bot.webapp.jobs import AppJob, AppJobs
from bot.webapp.limits import API_PER_MINUTE, IMAGES_PER_MINUTE, Window
from bot.webapp.links import PREFIX, Links
from bot.webapp.needs import PageNeeds
from bot.webapp.photos import Originals
from bot.webapp.pictures import Pictures, drawing_key, hd_key, tile_key
from bot.words.catalogue import page_words, pick_lang, t
from inference.pipeline import ConvertSettings
from storage.buttons import ShownResult
from storage.cache import CachedResult

log = logging.getLogger("animebot.webapp")

PAGE_DIR = Path(__file__).with_name("page")
# The page's files: its stylesheet and its ES modules (app.js imports the others; no build step).
PAGE_FILES = {"app.css": "text/css", **{name: "text/javascript" for name in (
    "app.js", "views.js", "admin.js", "api.js", "colour.js", "divider.js", "words.js", "telegram.js")}}
WORDS_SLOT = '<script id="words" type="application/json">{}</script>'  # in index.html: the page's sentences go here
PAGE = 24  # results a page
LISTED = 500  # the newest results looked at; older ones are still in the chat
MAX_BODY = 4096  # the page's JSON bodies are a few dozen bytes
# The page's own script and Telegram's; pictures from here; no other origin at all.
POLICY = ("default-src 'self'; script-src 'self' https://telegram.org; img-src 'self' data: blob:; "
          "style-src 'self' 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'")


class WebApp:
    def __init__(self, st: PageNeeds, desk: AppJobs, originals: Originals, token: str, links: Links) -> None:
        self.st = st
        self.desk = desk  # how the jobs the page started are doing (the runner's onlooker)
        self.token = token
        self.links = links
        self.calls = Window(API_PER_MINUTE)
        self.fetches = Window(IMAGES_PER_MINUTE)
        self.pictures = Pictures(st.stores.results, st.styles, originals)
        self._tasks: set[asyncio.Task[None]] = set()

    def mount(self, app: web.Application) -> None:
        app.router.add_get("/app", self._page)
        app.router.add_get("/app/", self._page)
        app.router.add_get("/app/static/{name}", self._static)
        app.router.add_get("/app/api/results", self._list)
        # Any id reaches the handler, which answers one that names nothing with the page's sentence.
        app.router.add_get("/app/api/results/{id}", self._one)
        app.router.add_get("/app/api/results/{id}/styles", self._styles)
        app.router.add_post("/app/api/results/{id}/styles", self._draw_styles)
        app.router.add_post("/app/api/results/{id}/send", self._send)
        app.router.add_post("/app/api/results/{id}/hd", self._hd)
        app.router.add_post("/app/api/draw", self._draw)
        app.router.add_get("/app/api/jobs/{job}", self._job)
        AdminApi(self.st, self._caller, self._body).mount(app)  # the admins' page (bot/webapp/admin.py)
        app.router.add_get(PREFIX + r"/{uid:\d{1,20}}/{id:[\w-]{12}}/{variant:[\w.-]{1,40}}/{expires:\d{1,12}}"
                           r"/{mac:[\w-]{24}}", self._picture)

    async def close(self) -> None:
        """At a stop: the requests the page started are left to the journal, which runs them at the next start."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- the page -----------------------------------------------------------------

    async def _page(self, request: web.Request) -> web.Response:
        return web.Response(body=_page_html(), content_type="text/html", charset="utf-8", headers=_page_headers())

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in PAGE_FILES:
            raise web.HTTPNotFound()
        return web.Response(body=(PAGE_DIR / name).read_bytes(), content_type=PAGE_FILES[name], charset="utf-8",
                            headers=_page_headers())

    # --- who asks -------------------------------------------------------------------

    async def _caller(self, request: web.Request) -> tuple[WebAppUser, str]:
        """The signed user and their language; 401 (no detail), 403 blocked or off the allowlist, 429 past the rate."""
        try:
            user = from_header(request.headers.get("Authorization"), self.token, time.time())
        except Unauthorized as exc:
            log.info("webapp: refused a call to %s: %s", request.path, exc)
            raise web.HTTPUnauthorized(text="unauthorized") from None
        lang = pick_lang((await self.st.stores.users.prefs(user.id)).lang, user.language_code)
        if (why := self.st.access.refusal(user.id, user.id)) is not None:  # blocked, or off the allowlist
            raise _error(web.HTTPForbidden, t(lang, why))
        if wait := self.calls.admit(user.id, time.monotonic()):
            raise _error(web.HTTPTooManyRequests, t(lang, "webapp_too_many"), {"Retry-After": str(int(wait) + 1)})
        if request.can_read_body and (size := request.content_length or 0) > MAX_BODY:
            raise web.HTTPRequestEntityTooLarge(MAX_BODY, size, text=json.dumps({"error": t(lang, "webapp_bad_request")}),
                                                content_type="application/json")
        return user, lang

    async def _body(self, request: web.Request, lang: str) -> dict[str, Any]:
        raw = await request.content.read(MAX_BODY + 1)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if len(raw) > MAX_BODY or not isinstance(body, dict):
            raise _error(web.HTTPBadRequest, t(lang, "webapp_bad_request"))
        return body

    # --- results --------------------------------------------------------------------

    async def _results_of(self, user_id: int) -> list[tuple[str, ShownResult[ConvertSettings], CachedResult]]:
        """The user's still results the page can show, newest first: drawn whole (not an avatar's square or a
        sticker's cut, whose pixels do not line up with the photo), in a style still installed, still cached."""
        styles = self.st.styles
        shown = [(rid, s) for rid, s in await self.st.buttons.shown_in(user_id, LISTED)
                 if s.style in styles.names and not s.settings.cut and not s.settings.avatar
                 and s.settings.fmt in ("jpg", "png")]
        keys = [drawing_key(styles, s) for _, s in shown]
        cached = await self.st.stores.results.peek(keys)
        return [(rid, s, cached[key]) for (rid, s), key in zip(shown, keys) if key in cached]

    async def _lookup(self, user_id: int, result_id: str) -> tuple[ShownResult[ConvertSettings], CachedResult] | None:
        """The result of this id, if it was shown in the user's chat and is still cached."""
        shown = await self.st.buttons.find(result_id, user_id)
        found = await self.st.stores.results.peek([drawing_key(self.st.styles, shown)]) if shown is not None else {}
        return (shown, next(iter(found.values()))) if shown is not None and found else None

    async def _find(self, user_id: int, result_id: str, lang: str) -> tuple[ShownResult[ConvertSettings], CachedResult]:
        """:meth:`_lookup`, or the page's 404."""
        if (found := await self._lookup(user_id, result_id)) is None:
            raise _error(web.HTTPNotFound, t(lang, "webapp_gone"))
        return found

    async def _described(self, user_id: int, rows: list[tuple[str, ShownResult[ConvertSettings], CachedResult]], lang: str
                         ) -> list[dict[str, Any]]:
        """Results as the page reads them (docs/webapp.md's Result), their full-strength drawings and their HDs
        looked up at once."""
        styles = self.st.styles
        pure = {rid: drawing_key(styles, s, strength=100, keep_colours=False) for rid, s, _ in rows
                if s.settings.strength != 100 or s.settings.keep_colours}
        hds = {rid: hd_key(styles, s) for rid, s, _ in rows} if self.st.hd else {}
        cached = await self.st.stores.results.peek([*pure.values(), *hds.values()])
        described = []
        for rid, shown, result in rows:
            s, image = shown.settings, self.links.image(user_id, rid, "image")
            base = self.links.image(user_id, rid, "base") if pure.get(rid) in cached else None
            described.append({
                "id": rid, "image": image, "thumb": self.links.image(user_id, rid, "thumb"),
                "photo": self.links.image(user_id, rid, "photo"), "base": image if rid not in pure else base,
                "style": shown.style, "style_name": styles.display(shown.style, lang), "strength": s.strength,
                "keep_colours": s.keep_colours, "width": result.width, "height": result.height,
                "format": s.fmt, "hd_available": self.st.hd,
                "hd": self.links.image(user_id, rid, "hd") if hds.get(rid) in cached else None,
                "created": int(shown.shown_at)})
        return described

    async def _list(self, request: web.Request) -> web.Response:
        user, lang = await self._caller(request)
        offset = _number(request.query.get("offset", "0"), 0, LISTED, lang)
        rows = await self._results_of(user.id)
        page = await self._described(user.id, rows[offset:offset + PAGE], lang)
        styles = [{"name": n, "title": self.st.styles.display(n, lang)} for n in self.st.styles.ordered]
        return _json({"lang": lang, "results": page, "more": offset + PAGE < len(rows), "styles": styles,
                      "admin": self.st.access.is_admin(user.id)})  # the page offers its admin view to admins only

    async def _one(self, request: web.Request) -> web.Response:
        user, lang = await self._caller(request)
        rid = request.match_info["id"]
        (described,) = await self._described(user.id, [(rid, *await self._find(user.id, rid, lang))], lang)
        return _json({"result": described})

    async def _styles(self, request: web.Request) -> web.Response:
        """The result's photo in every installed style, small: those drawn, and a null for the rest."""
        user, lang = await self._caller(request)
        rid = request.match_info["id"]
        shown, _ = await self._find(user.id, rid, lang)
        names = list(self.st.styles.ordered)
        keys = [tile_key(self.st.styles, shown.content_sha256, n) for n in names]
        drawn = await self.st.stores.results.peek(keys)
        return _json({"styles": [{"name": n, "title": self.st.styles.display(n, lang),
                                  "image": self.links.image(user.id, rid, f"s.{n}") if key in drawn else None}
                                 for n, key in zip(names, keys)]})

    # --- drawing and sending ------------------------------------------------------------

    async def _draw_styles(self, request: web.Request) -> web.Response:
        """Draw the missing tiles of :meth:`_styles`: one photo of the quota for all of them, as /style's sheet."""
        user, lang = await self._caller(request)
        shown, _ = await self._find(user.id, request.match_info["id"], lang)
        style = self.st.styles.resolve((await self.st.stores.users.prefs(user.id)).style) or self.st.styles.default
        return await self._start(await self._request(user.id, lang, shown, style, PREVIEW_SETTINGS, kind=kinds.TILES,
                                                     styles=tuple(self.st.styles.ordered)))

    async def _draw(self, request: web.Request) -> web.Response:
        """The result's photo drawn again at full size: in a style, at a strength, keeping colours or not."""
        user, lang = await self._caller(request)
        body = await self._body(request, lang)
        rid, strength, keep = body.get("id"), body.get("strength"), body.get("keep_colours")
        style = self.st.styles.resolve(body["style"]) if isinstance(body.get("style"), str) else None
        if not (isinstance(rid, str) and isinstance(strength, int) and not isinstance(strength, bool)
                and 0 <= strength <= 100 and isinstance(keep, bool) and style is not None):
            raise _error(web.HTTPBadRequest, t(lang, "webapp_bad_request"))
        shown, _ = await self._find(user.id, rid, lang)
        settings = replace(shown.settings, strength=strength, keep_colours=keep)
        return await self._start(await self._request(user.id, lang, shown, style, settings, redrawn(settings)))

    async def _send(self, request: web.Request) -> web.Response:
        """The result into the user's chat with the bot: as the photo it is, or drawn as a sticker into their set."""
        user, lang = await self._caller(request)
        body = await self._body(request, lang)
        if body.get("as") not in ("photo", "sticker"):
            raise _error(web.HTTPBadRequest, t(lang, "webapp_bad_request"))
        shown, _ = await self._find(user.id, request.match_info["id"], lang)
        kind = kinds.STICKER if body["as"] == "sticker" else redrawn(shown.settings)
        return await self._start(await self._request(user.id, lang, shown, shown.style, shown.settings, kind,
                                                     answer="chat"))

    async def _hd(self, request: web.Request) -> web.Response:
        """The result doubled by Real-CUGAN (bot/flow/kinds/hd.py), for its ``hd`` picture: one photo of the
        quota, none when its HD is cached; refused in one sentence where HD is off or not installed."""
        user, lang = await self._caller(request)
        if not self.st.hd:
            raise _error(web.HTTPConflict, t(lang, "hd_off"))
        shown, _ = await self._find(user.id, request.match_info["id"], lang)
        return await self._start(await self._request(user.id, lang, shown, shown.style, shown.settings, kinds.DOUBLED))

    async def _request(self, user_id: int, lang: str, shown: ShownResult[ConvertSettings], style: str,
                       settings: ConvertSettings, kind: Kind, answer: str = "app", styles: tuple[str, ...] = ()
                       ) -> Request:
        file_id = await self.st.stores.uploads.file_id_of(shown.content_sha256)
        if file_id is None:
            raise _error(web.HTTPNotFound, t(lang, "webapp_gone"))
        return Request(job_id=f"app-{secrets.token_urlsafe(12)}", chat_id=user_id, user_id=user_id, reply_to=None,
                       lang=lang, style=style, settings=settings, kind=kind.name, styles=styles, answer=answer,
                       sources=(Source(file_id, sha256=shown.content_sha256, spoiler=shown.spoiler),))

    async def _start(self, req: Request) -> web.Response:
        if self.st.runner.stopping:
            raise _error(web.HTTPServiceUnavailable, t(req.lang, "webapp_restarting"))
        self.desk.track(req.job_id, req.user_id, req.lang)
        task = asyncio.create_task(self._run(req))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return _json({"job": req.job_id})

    async def _run(self, req: Request) -> None:
        desk = self.desk
        try:
            await self.st.runner.run(req)
        except asyncio.CancelledError:  # a stop: the journal has it, if it was taken on, for the next start
            desk.say(req.job_id, t(req.lang, "webapp_restarting"))
            raise
        except Exception:  # a bug: keep its traceback; the page still hears that it failed
            log.exception("job %s: the Mini App's request failed unexpectedly", req.job_id)
        finally:
            desk.ended(req.job_id)

    async def _job(self, request: web.Request) -> web.Response:
        """How a job the page started is doing: from memory while the bot runs, else from the journal."""
        user, lang = await self._caller(request)
        job_id = request.match_info["job"]
        job = self.desk.get(job_id, user.id)
        if job is None:
            return _json(await self._job_from_journal(job_id, user.id, lang))
        result = None
        if job.result:
            (result,) = await self._described(user.id, [(job.result, *await self._find(user.id, job.result, lang))],
                                              lang)
        # Waiting on workers that are down (or a broker that is): the page says so rather than "next"
        stalled = job.ended_at is None and not self.st.pool.healthy()[0]
        return _json({"state": job.state, "ahead": _ahead(job), "result": result, "error": job.error,
                      "stalled": stalled})

    async def _job_from_journal(self, job_id: str, user_id: int, lang: str) -> dict[str, Any]:
        journal = self.st.journal
        stored = await journal.job_request(job_id)
        try:
            req = request_from_json(stored) if stored is not None else None
        except StoredRequestError:
            req = None
        if req is None or req.user_id != user_id:
            raise _error(web.HTTPNotFound, t(lang, "webapp_no_job"))
        state = await journal.job_state(job_id)
        if state in ("queued", "running"):
            return {"state": "queued" if state == "queued" else "drawing", "ahead": None, "result": None, "error": None,
                    "stalled": not self.st.pool.healthy()[0]}
        if state != "done":
            return {"state": "failed", "ahead": None, "result": None, "error": t(lang, "internal"), "stalled": False}
        result = None
        if req.answer == "app" and plan(req).shape != Shape.TILES:
            shown = ShownResult(user_id, req.sources[0].sha256 or "", req.style, req.settings, req.sources[0].spoiler)
            rid = await self.st.buttons.id_for(shown)
            if (found := await self._lookup(user_id, rid)) is not None:
                (result,) = await self._described(user_id, [(rid, *found)], lang)
        return {"state": "done", "ahead": None, "result": result, "error": None, "stalled": False}

    # --- pictures -----------------------------------------------------------------------

    async def _picture(self, request: web.Request) -> web.StreamResponse:
        """A picture of a result: ``image`` (the drawing), ``thumb`` (the list's), ``photo`` (the "before"),
        ``base`` (full strength, own colours), ``hd`` (doubled, once asked for), ``s.STYLE`` (a style's tile)."""
        info = request.match_info
        user_id, rid, variant = int(info["uid"]), info["id"], info["variant"]
        if not self.links.valid(user_id, rid, variant, int(info["expires"]), info["mac"]):
            raise web.HTTPForbidden(text="forbidden")
        if wait := self.fetches.admit(user_id, time.monotonic()):
            raise web.HTTPTooManyRequests(headers={"Retry-After": str(int(wait) + 1)})
        shown = await self.st.buttons.find(rid, user_id)
        found = await self.pictures.of(user_id, shown, variant) if shown is not None else None
        if shown is None or found is None:
            raise web.HTTPNotFound(text="gone")
        headers = {"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff"}
        if variant == "thumb":
            thumbnail = await self.pictures.thumbnails.of(found.path)
            return web.Response(body=thumbnail, content_type="image/jpeg", headers=headers)
        if variant in ("image", "hd"):  # saved by the browser, or Telegram's downloadFile, under a name that says it
            name = f"anime-{shown.style}{'-hd' if variant == 'hd' else ''}{found.path.suffix}"  # (style names are ASCII)
            headers["Content-Disposition"] = f'inline; filename="{name}"'
        return web.FileResponse(found.path, headers=headers)


def _ahead(job: AppJob) -> int | None:
    return job.progress.ahead() if job.state == "queued" and job.progress is not None and job.progress.tickets else None


def _number(raw: str, lo: int, hi: int, lang: str) -> int:
    if not raw.isdigit() or not lo <= int(raw) <= hi:
        raise _error(web.HTTPBadRequest, t(lang, "webapp_bad_request"))
    return int(raw)


@functools.cache
def _page_html() -> bytes:
    """index.html with what the page says, in every language, from the catalogue: the page picks its language
    itself (it is served before anyone signs in), and has its words before it has asked the bot anything."""
    html = (PAGE_DIR / "index.html").read_text("utf-8")
    words = json.dumps(page_words(), ensure_ascii=False).replace("<", "\\u003c")  # nothing in it can close the tag
    return html.replace(WORDS_SLOT, WORDS_SLOT.replace("{}", words)).encode()


def _page_headers() -> dict[str, str]:
    return {"Content-Security-Policy": POLICY, "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-cache"}
