"""The console's areas, each with the role that may open it (pure).

The nav bar shows an area only to a session holding its role, and the area's pages
check the same role (`require_console_role`), exactly as the API's routes do: roles are
independent, so an `admin` key sees the supervisor's pages only if it also has the
`supervisor` role (router/access.py `allows`).

A new area is one `NavItem` here plus a page module in `pages/` listed in
`router/gateway/console/__init__.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

CONSOLE_ROLES: tuple[str, ...] = ("agent", "supervisor", "labeller", "admin")
"""The roles a person signs in with; a key with none of them (`gateway` only) is refused."""


@dataclass(frozen=True)
class NavItem:
    label: str
    path: str
    """Below `/console`, e.g. `/approvals`."""
    role: str
    also: tuple[str, ...] = ()
    """Other roles that may open it too (a read-only page another role reads)."""

    def opens_for(self, roles: Iterable[str]) -> bool:
        held = set(roles)
        return self.role in held or any(role in held for role in self.also)


NAV: tuple[NavItem, ...] = (
    NavItem("Approvals", "/approvals", "supervisor"),
    NavItem("Hand-offs", "/handoffs", "agent"),
    NavItem("Labelling", "/labels", "labeller"),
    NavItem("Policies", "/policies", "admin", also=("supervisor",)),
    NavItem("Experiments", "/experiments", "admin"),
    NavItem("Reports", "/reports", "admin", also=("supervisor",)),
)


def visible_nav(roles: Iterable[str], items: Iterable[NavItem] = NAV) -> list[NavItem]:
    """The areas a session with `roles` may open, in nav order."""
    held = set(roles)
    return [item for item in items if item.opens_for(held)]
