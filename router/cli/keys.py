"""`support-router keys new | list`: make API keys and show which ones are configured.

`keys new` prints the key once (it is never stored anywhere) and the settings entry that
holds only its digest; `keys list` shows names and roles, never digests' owners' keys.
Mounted by `router.cli.main`.
"""

from __future__ import annotations

import json
from typing import Annotated, cast

import typer

from router.access import ROLES, ApiKey, Role, hash_key, new_key
from router.settings import get_settings

keys_app = typer.Typer(help="API keys and their roles.", no_args_is_help=True)


@keys_app.command("new")
def new(
    name: Annotated[str, typer.Option(help="Who holds the key (shown in logs), e.g. desk-1.")],
    role: Annotated[
        list[str],
        typer.Option(help=f"A role for the key; repeat for several: {', '.join(ROLES)}."),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {key, entry} as one JSON object.")
    ] = False,
) -> None:
    """Make a random key; print it once, and the entry to add to SUPPORT_ROUTER_API_KEYS."""
    unknown = sorted(set(role) - set(ROLES))
    if unknown:
        typer.echo(f"error (invalid_role): unknown role(s) {unknown}; roles are {ROLES}",
                   err=True)
        raise typer.Exit(2)
    key = new_key()
    try:
        roles = cast("tuple[Role, ...]", tuple(dict.fromkeys(role)))  # unknown ones refused above
        entry = ApiKey(name=name, sha256=hash_key(key), roles=roles)
    except ValueError as exc:
        typer.echo(f"error (invalid_key_entry): {exc}", err=True)
        raise typer.Exit(2) from exc
    entry_json = entry.model_dump_json()
    if as_json:
        typer.echo(json.dumps({"key": key, "entry": json.loads(entry_json)}))
        return
    typer.echo(f"key (shown once, give it to {name}; it is not stored anywhere):\n  {key}")
    typer.echo("settings entry (add it to the JSON list in SUPPORT_ROUTER_API_KEYS):")
    typer.echo(f"  {entry_json}")


@keys_app.command("list")
def list_keys() -> None:
    """The configured keys' names and roles (from SUPPORT_ROUTER_API_KEYS)."""
    keys = get_settings().api_keys
    if not keys:
        typer.echo("no API keys configured: `serve` binds loopback only")
        return
    for entry in keys:
        typer.echo(f"{entry.name}\t{','.join(entry.roles)}")
