"""What every `support-router` command group shares: one error boundary and literal help.

Exit codes:

- 0: done;
- 1: one of our errors (`router.errors.SupportRouterError` and its subclasses), printed on
  stderr as ``error (<code>): <message>`` with no traceback, or a command's own "no"
  (`check` when the guarantee no longer holds, `tasks run` with a failing task);
- 2: a usage error (an unknown option, a value outside an option's choices, options that
  contradict each other), reported by click with the command's usage line.

Every command group is made by `command_group`, so every command runs inside
`BoundaryGroup.invoke`: commands raise our errors and never catch them to print. Anything
else that escapes is a bug and keeps its plain Python traceback.

Help is rendered literally (`rich_markup_mode=None`): a help text such as "needs the [e5]
extra" is shown as written, flags are shown without a value placeholder, and rendering
help imports neither rich nor anything heavy. Command modules import numpy, scikit-learn,
the database and the models inside the commands, so `--help` stays fast
(`tests/router/cli/test_help.py` checks what it imports). Typer itself imports pydantic to
coerce option values, so `<command> --help` pays for that import too.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from typer.core import TyperGroup

from router.errors import SupportRouterError

if TYPE_CHECKING:
    from rich.console import Console

_WHOLE_SENTENCE = 500
"""Characters of a command's first sentence shown in its group's command list."""


def fail(exc: SupportRouterError, *, exit_code: int = 1) -> NoReturn:
    """Print `exc` as ``error (<code>): <message>`` on stderr and exit."""
    # Plain text, not rich markup: a message quoting "[e5]" or a customer's brackets
    # must come out as written.
    typer.echo(f"error ({exc.code}): {exc.message}", err=True)
    raise typer.Exit(exit_code) from exc


class BoundaryGroup(TyperGroup):
    """A command group whose commands' `SupportRouterError`s exit 1 with their code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except SupportRouterError as exc:
            fail(exc)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List the commands with each one's whole first sentence, wrapped rather than cut
        at the terminal's width."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=_WHOLE_SENTENCE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def command_group(help: str, **options: Any) -> typer.Typer:
    """A Typer app with the error boundary, literal help and no value shown for flags."""
    options.setdefault("no_args_is_help", True)
    return typer.Typer(
        help=help,
        cls=BoundaryGroup,
        rich_markup_mode=None,
        # A bug's traceback as Python prints it, without rich's local variables (they
        # may hold a customer's text or a key).
        pretty_exceptions_enable=False,
        **options,
    )


@cache
def console(*, stderr: bool = False) -> Console:
    """The rich console for tables, spinners and progress (stderr for what is not output)."""
    from rich.console import Console

    return Console(stderr=stderr)
