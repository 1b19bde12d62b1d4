"""The admin console: server-rendered pages on the controller's own Flask app, at ``/ui``.

Pages (``views``): policies (list, live-validating editor, delete), explain,
live metrics (uPlot charts polled every metric interval, dynamic policies'
thresholds and actor events drawn on them), QoS, filters and storlets, block
volumes and storage groups, and the policy history (diff, rollback). They
are rendered with Jinja; htmx swaps the fragments that change. Both
libraries are vendored at set-up (``deploy/ui-assets.sh``, from the npm
registry) and served from ``static/vendor``: nothing is fetched from the
internet at run time.

Login and scope: the login form takes a token, checked by the controller's
``Authenticator`` exactly as an ``X-Auth-Token`` on the REST API: the admin
token or a Keystone token, or a tenant's Swift token together with its
account. A tenant sees only its own policies, metrics and explain.

Sessions live in Redis (``ui:session:<sha256 of the cookie>``, JSON with
the token, the account and a CSRF token; TTL ``ui_session_seconds``,
default 8 h). The cookie holds only a random id (HttpOnly, SameSite=Strict,
Secure over HTTPS). The token is authenticated again on every page (cached
by the ``Authenticator``), so a revoked Keystone token ends the session.
Every state-changing request must carry the session's CSRF token (htmx sends
it as ``X-CSRF-Token``; forms as a hidden ``csrf`` field), and every one,
the login included, must come from the console's own origin
(``check_origin``: ``Origin`` and ``Sec-Fetch-Site``), so no other site can
log a browser into a session of its choosing. Policy texts the pages show
(the metrics page's actors included) have secret parameters masked.

Responses carry a strict Content-Security-Policy (scripts, styles and
connections from the console's own origin only; no inline script, no eval),
``nosniff``, no framing and no referrer. Pages are ``no-store``; static
files are served with a content hash in their URL and cached for a year.

Config keys (controller JSON): ``ui_session_seconds`` (28800).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from flask import Blueprint, Flask, Response, abort, current_app, request, send_from_directory

from iostack import __version__
from iostack.controller import formatting
from iostack.controller.auth import AuthError, Principal

STATIC = Path(__file__).parent / "static"
COOKIE = "iostack_console"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
STATIC_MAX_AGE = 365 * 24 * 3600

bp = Blueprint("ui", __name__, url_prefix="/ui", template_folder="templates")


@dataclass(frozen=True)
class Session:
    key: str  # the Redis key
    token: str
    account: str | None
    csrf: str


def _ctl():
    return current_app.extensions["iostack"]


def _session_key(cookie: str) -> str:
    # Only a hash of the cookie is stored: reading Redis does not give live cookies.
    return _ctl().keys.ui_sessions + hashlib.sha256(cookie.encode()).hexdigest()


def start_session(token: str, account: str | None) -> tuple[str, Principal]:
    """Check the token like the REST API does; returns (cookie value, principal)."""
    principal = _ctl().auth.authenticate({"X-Auth-Token": token}, account)
    if account and not principal.may_read(account):
        raise AuthError("this token does not give access to that account", 403)
    cookie = secrets.token_urlsafe(32)
    ttl = int(_ctl().config.get("ui_session_seconds", 8 * 3600))
    _ctl().redis.set(_session_key(cookie), json.dumps({
        "token": token, "account": account or principal.account,
        "csrf": secrets.token_urlsafe(24)}), ex=ttl)
    return cookie, principal


def end_session() -> None:
    cookie = request.cookies.get(COOKIE)
    if cookie:
        _ctl().redis.delete(_session_key(cookie))


def current() -> tuple[Session, Principal] | None:
    """The logged-in session and its principal, or None (no, expired or revoked login)."""
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    key = _session_key(cookie)
    raw = _ctl().redis.get(key)
    if raw is None:
        return None
    data = json.loads(raw)
    session = Session(key, data["token"], data["account"], data["csrf"])
    try:
        principal = _ctl().auth.authenticate({"X-Auth-Token": session.token}, session.account)
    except AuthError:
        _ctl().redis.delete(key)
        return None
    return session, principal


def check_origin() -> None:
    """A state-changing request must come from the console's own pages.

    The CSRF token covers requests inside a session; the login has none yet,
    so a page elsewhere could post its own token to ``/ui/login`` and log the
    victim's browser into the attacker's session (login CSRF). Browsers say
    where a request comes from in ``Sec-Fetch-Site``: anything but
    ``same-origin`` (or ``none``, typed by the user) is refused. ``Origin``
    must be this console's when it names one; it is ``null`` on the
    console's own forms, whose pages send no referrer, so ``null`` counts
    only where ``Sec-Fetch-Site`` vouches for it. A client that sends neither
    (curl, scripts) is not a browser that could have been steered, and
    passes."""
    origin = request.headers.get("Origin")
    site = request.headers.get("Sec-Fetch-Site")
    own = f"{request.scheme}://{request.host}"
    if site is not None and site not in ("same-origin", "none"):
        abort(403, f"cross-site request refused (Sec-Fetch-Site: {site})")
    if origin is not None and origin != own and not (origin == "null" and site):
        abort(403, f"cross-origin request refused (Origin {origin!r}, this console is {own})")


def check_csrf(session: Session) -> None:
    sent = request.headers.get("X-CSRF-Token") or request.form.get("csrf") or ""
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
        abort(403, "missing or wrong CSRF token: reload the page")


@cache
def _digest(name: str) -> str:
    return hashlib.sha256((STATIC / name).read_bytes()).hexdigest()[:12]


def asset(name: str) -> str:
    """URL of a static file with its content hash, so it can be cached for a year."""
    return f"{request.script_root}/ui/static/{name}?v={_digest(name)}"


@bp.get("/static/<path:name>")
def static(name: str) -> Response:
    response = send_from_directory(STATIC, name, max_age=STATIC_MAX_AGE)
    response.headers["Cache-Control"] = f"public, max-age={STATIC_MAX_AGE}, immutable"
    return response


@bp.after_request
def security_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    if request.endpoint != "ui.static":
        response.headers["Cache-Control"] = "no-store"
    return response


def rate(value: float | None, direction: str) -> str:
    """A QoS rate for people: ops/s, or MB/s for bandwidth."""
    if value is None:
        return "–"
    return f"{value:.4g}/s" if direction == "ops" else f"{value / 1e6:.3g} MB/s"


def register(app: Flask) -> None:
    """Mount the console on the controller's app."""
    from iostack.controller.ui import views  # noqa: F401 - registers the page routes

    app.jinja_env.globals["asset"] = asset
    app.jinja_env.globals["iostack_version"] = __version__
    app.jinja_env.filters["rate"] = rate
    app.jinja_env.filters["params"] = formatting.params  # as the CLI shows them: level=4, ...
    app.register_blueprint(bp)
