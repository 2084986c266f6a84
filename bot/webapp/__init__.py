"""The Mini App: a web page the bot opens inside Telegram, served by the bot's own HTTP server."""
