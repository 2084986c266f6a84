"""The default, embedded pool: worker processes of the bot's own, spoken to over pipes."""
