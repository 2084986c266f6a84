"""The scaled-out pool: ``animebot worker`` processes on other machines, through Celery over Redis."""
