"""The animebot application: command line and Telegram bot."""
