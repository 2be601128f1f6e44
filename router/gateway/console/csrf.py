"""CSRF protection for every console form, and an Origin check.

Before sign-in there is no session to hold a token, so the sign-in form uses a
double-submit token: the page sets a random token in an HttpOnly, SameSite=Strict cookie
and the same token in a hidden field; the POST must carry both, equal. Another site can
make a browser post a form but can neither read nor set that cookie.

After sign-in every form carries the session's own token (a synchronizer token, stored
with the session in the database) in the hidden field `csrf_token`; a POST whose field
is missing or differs is refused with 403 `console_csrf` before anything is read or
written. Tokens are compared with `hmac.compare_digest`.

Origin: a POST whose `Origin` (or, without one, `Referer`) names another host than the
request's `Host`, or is `null`, is refused with 403 `console_bad_origin`. Browsers send
`Origin` on every form POST, so this alone stops cross-site posts in current browsers; the
tokens cover the rest.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from fastapi import Request

from router.gateway.console.errors import console_forbidden
from router.gateway.console.forms import Form

CSRF_FIELD = "csrf_token"


def tokens_match(expected: str | None, presented: str | None) -> bool:
    """Both present and equal, compared in constant time (pure)."""
    if not expected or not presented:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))


def check_token(form: Form, expected: str | None) -> None:
    if not tokens_match(expected, form.get(CSRF_FIELD)):
        raise console_forbidden(
            "this form's security token is missing or out of date; reload the page and "
            "submit it again (nothing was changed)", code="console_csrf")


def same_origin(request: Request) -> bool:
    """Whether the POST's `Origin` (else `Referer`) is this host; True when neither is
    sent (non-browser clients), which the token check still covers."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True
    if source == "null":
        return False
    host = request.headers.get("host", "")
    return bool(host) and urlsplit(source).netloc.lower() == host.lower()


def check_origin(request: Request) -> None:
    if not same_origin(request):
        raise console_forbidden(
            "this form was sent from another site; open the console and submit it there "
            "(nothing was changed)", code="console_bad_origin")
