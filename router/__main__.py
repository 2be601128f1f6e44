"""`python -m router`: the `support-router` command line."""

from router.cli.main import main

main()
