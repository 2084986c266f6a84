"""``animebot``: the command line, one subcommand per job."""
