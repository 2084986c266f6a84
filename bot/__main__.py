"""``python -m bot``: the same command line as the ``animebot`` script."""
from bot.cli import main

raise SystemExit(main())
