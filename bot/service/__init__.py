"""The bot as a running service: its settings, its life from start to graceful stop, the state
the handlers share, its log and its metrics."""
