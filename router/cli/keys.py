"""`support-router keys new | list`: make API keys and show which ones are configured.

`keys new` prints the key once (it is never stored anywhere) and the settings entry that
holds only its digest; `keys list` shows names and roles, never digests' owners' keys.
Mounted by `router.cli.main`.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from router.cli.boundary import command_group
from router.cli.choices import Role

keys_app = command_group("API keys and their roles.")


@keys_app.command("new")
def new(
    name: Annotated[str, typer.Option(help="Who holds the key (shown in logs), e.g. desk-1.")],
    role: Annotated[
        list[Role],
        typer.Option(metavar=f"<{'|'.join(Role)}>",
                     help="A role for the key; repeat the option for several."),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print {key, entry} as one JSON object.")
    ] = False,
) -> None:
    """Make a random key; print it once, and the entry to add to SUPPORT_ROUTER_API_KEYS."""
    from pydantic import ValidationError

    from router.access import ApiKey, hash_key, new_key

    key = new_key()
    roles = tuple(dict.fromkeys(r.value for r in role))
    try:
        entry = ApiKey.model_validate({"name": name, "sha256": hash_key(key), "roles": roles})
    except ValidationError as exc:
        problems = "; ".join(error["msg"] for error in exc.errors())
        raise typer.BadParameter(problems, param_hint="'--name'") from exc
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
    from router.settings import get_settings

    keys = get_settings().api_keys
    if not keys:
        typer.echo("no API keys configured: `serve` binds loopback only")
        return
    for entry in keys:
        typer.echo(f"{entry.name}\t{','.join(entry.roles)}")
