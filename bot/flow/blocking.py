"""/block and /unblock carried out: the block written down, and the user's jobs in flight stopped.

The block is written in the user's turn at admission (bot/flow/admission.py), so no request of theirs is
halfway through it; from then on :meth:`~bot.flow.access.Access.refusal` refuses whatever they send. Their
jobs already taken on are stopped where they are (waiting, downloading, drawing), as /forget stops them
(bot/flow/running.py), and closed in the journal as refused, so a restart does not draw them either.

A photo the bot accepted gets an answer, whatever happens; a blocked user's is never drawn. Both hold: each
job stopped here is answered with the block's sentence ("Sorry, you can't use this bot.") where its
drawing would have gone (the runner, bot/flow/runner.py), and nothing drawn for it is sent.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.flow.access import Access
from bot.flow.runner import JobRunner
from storage.blocked import Block, Blocked

log = logging.getLogger("animebot.admin")


@dataclass(frozen=True)
class Blocking:
    runner: JobRunner
    access: Access
    blocked: Blocked

    async def block(self, user_id: int, by: int) -> int | None:
        """Block ``user_id`` and stop their jobs; how many were stopped, or None for an admin (never blocked)."""
        if self.access.is_admin(user_id):
            return None
        async with self.runner.admission.turn(user_id):
            await self.blocked.block(user_id, by)
        stopped = await self.runner.jobs.stop_all_of(user_id, blocked=True)  # each answered with the sentence
        for job_id in stopped:
            await self.runner.journal.finish_job(job_id, "refused", "blocked")
        log.info("user %s blocked by admin %s; %d job(s) of theirs stopped", user_id, by, len(stopped))
        return len(stopped)

    async def unblock(self, user_id: int, by: int) -> bool:
        """Lift the block; False if there was none."""
        lifted = await self.blocked.unblock(user_id)
        if lifted:
            log.info("user %s unblocked by admin %s", user_id, by)
        return lifted

    async def listed(self) -> list[Block]:
        return await self.blocked.listed()
