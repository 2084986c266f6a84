"""A request's way through the bot once a handler made it: admitted against the limits, its
results looked up or drawn and stored, answered; and run again after a restart (recovery)."""
