"""The leaf every room reports to: the bot's settings, its log and its metrics; it imports no other room."""
