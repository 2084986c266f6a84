"""Which models exist, where they come from, and which are installed here."""
