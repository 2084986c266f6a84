"""Where a photo waits and is drawn: the pool protocol and the fair queue, and its two kinds of
workers, the bot's own processes (local/) or ``animebot worker`` machines over Celery (celery/)."""
