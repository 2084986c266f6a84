"""``python -m bot``: the same command line as the ``animebot`` script."""
from bot.cli.main import main

raise SystemExit(main())
