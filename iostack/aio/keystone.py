"""The all-in-one's OpenStack Keystone (``iostack aio start --auth keystone``).

Keystone runs from a virtualenv of its own (its pins clash with Swift's),
``<state dir>/openstack/keystone-venv`` unless ``keystone_venv`` says
otherwise; ``install_venv`` creates it from PyPI (``make setup`` and ``make
test`` call it through ``iostack aio install-keystone``; ``aio start`` does
when it is missing). It is reinstalled when ``REQUIREMENTS`` change.

Everything else lives in ``<state dir>/openstack/keystone/`` (0700):
``keystone.conf``, the SQLite database, the Fernet token and credential key
repositories. The first start runs ``keystone-manage`` ``db_sync``,
``fernet_setup``, ``credential_setup`` and ``bootstrap`` (user ``admin`` with
the generated ``keystone_admin_password``, project ``admin``, roles
``admin``/``member``/``reader``); uwsgi then serves
``keystone.wsgi.api:application`` on ``host:keystone_port`` (loopback).

``provision`` (idempotent, run on every start) creates what Swift and
IOStack need: the ``service`` project with the ``iostack`` service user
(role ``service``: authtoken and the controller validate tokens with it),
Swift's ``object-store`` endpoint, the ``ResellerAdmin`` role for ``admin``,
and per tenant a project named after it, a user ``<tenant>-user`` with role
``member`` (an operator role of ``keystoneauth``: owner of the project's
account) and an EC2 credential for S3 (``s3token``).
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iostack.private_files import private_dir, write_private_text

REQUIREMENTS = ("keystone>=30,<31", "uwsgi>=2.0.26,<2.1")
INSTALLED_MARKER = ".iostack-installed"
REGION = "RegionOne"
DOMAIN = "Default"
ADMIN_USER = "admin"
ADMIN_PROJECT = "admin"
SERVICE_PROJECT = "service"
SERVICE_USER = "iostack"
SERVICE_ROLE = "service"  # enough for validating tokens (Keystone's default policy)
OPERATOR_ROLES = ("admin", "member")  # keystoneauth's operator_roles: owners of their account
RESELLER_ADMIN_ROLE = "ResellerAdmin"


class KeystoneError(RuntimeError):
    """Keystone could not be installed, set up or provisioned."""


def default_venv(state_dir: Path) -> Path:
    return state_dir / "openstack" / "keystone-venv"


def install_venv(venv: Path) -> Path:
    """Create (or bring up to date) Keystone's virtualenv; return it."""
    marker = venv / INSTALLED_MARKER
    wanted = "\n".join(REQUIREMENTS) + "\n"
    if marker.is_file() and marker.read_text(encoding="utf-8") == wanted:
        return venv
    try:
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # noqa: S603
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",  # noqa: S603
                        *REQUIREMENTS], check=True)
    except subprocess.CalledProcessError as exc:
        raise KeystoneError(f"installing Keystone into {venv} failed: {exc}") from None
    marker.write_text(wanted, encoding="utf-8")
    return venv


@dataclass(frozen=True)
class TenantIdentity:
    """What a client of one tenant needs (``aio.json``'s ``tenants``)."""

    tenant: str
    project_id: str
    username: str
    password: str
    ec2_access: str
    ec2_secret: str


class KeystoneServer:
    """One Keystone under ``<state dir>/openstack/keystone``, served by uwsgi."""

    def __init__(self, state_dir: Path, venv: Path, host: str, port: int,
                 admin_password: str) -> None:
        self.dir = state_dir / "openstack" / "keystone"
        self.venv = venv
        self.host, self.port = host, port
        self.admin_password = admin_password
        self.conf = self.dir / "keystone.conf"

    @property
    def url(self) -> str:
        """The identity API (what clients call ``auth_url``)."""
        return f"http://{self.host}:{self.port}/v3"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "OS_KEYSTONE_CONFIG_FILES": str(self.conf)}

    def prepare(self) -> None:
        """Write the config; set up the database and keys on the first start."""
        install_venv(self.venv)
        private_dir(self.dir)
        write_private_text(self.conf, "\n".join([
            "[DEFAULT]", "use_stderr = true", "",
            "[database]", f"connection = sqlite:///{self.dir / 'keystone.db'}", "",
            "[token]", "provider = fernet", "",
            # bcrypt's fewest rounds: every password here is 32 random characters, which no
            # guessing reaches, and the default cost made each token request ~0.3 s of CPU.
            "[identity]", "password_hash_rounds = 4", "",
            "[fernet_tokens]", f"key_repository = {self.dir / 'fernet-keys'}", "",
            # Receipts (multi-factor auth) use the token keys, as Keystone's defaults do.
            "[fernet_receipts]", f"key_repository = {self.dir / 'fernet-keys'}", "",
            "[credential]", f"key_repository = {self.dir / 'credential-keys'}", "",
        ]) + "\n")
        done = self.dir / "bootstrapped"
        if done.is_file():
            return
        owner = ["--keystone-user", pwd.getpwuid(os.getuid()).pw_name,
                 "--keystone-group", grp.getgrgid(os.getgid()).gr_name]
        self._manage("db_sync")
        self._manage("fernet_setup", *owner)
        self._manage("credential_setup", *owner)
        self._manage("bootstrap", "--bootstrap-password", self.admin_password,
                     "--bootstrap-username", ADMIN_USER,
                     "--bootstrap-project-name", ADMIN_PROJECT,
                     "--bootstrap-public-url", self.url, "--bootstrap-region-id", REGION)
        done.touch()

    def _manage(self, *args: str) -> None:
        manage = self.venv / "bin" / "keystone-manage"
        # keystone-manage reads only --config-file (OS_KEYSTONE_CONFIG_FILES is the WSGI
        # app's); without it, it would set up /etc/keystone and a database in the cwd.
        result = subprocess.run(  # noqa: S603 - fixed argv
            [str(manage), "--config-file", str(self.conf), *args], cwd=self.dir,
            capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise KeystoneError(f"keystone-manage {args[0]} failed:\n{result.stderr[-2000:]}")

    def argv(self) -> list[str]:
        """The uwsgi command line (run with ``env``); SIGTERM stops it."""
        # uwsgi speaks HTTP itself (no router process) and says it closes each connection:
        # with its --http router, clients reusing a kept-alive connection were cut off.
        return [str(self.venv / "bin" / "uwsgi"), "--http-socket", f"{self.host}:{self.port}",
                "--add-header", "Connection: close",
                "--module", "keystone.wsgi.api:application", "--master", "--processes", "1",
                "--threads", "2", "--die-on-term", "--need-app", "--disable-logging"]

    def admin_session(self):
        """A keystoneauth session as the bootstrap admin (project ``admin``)."""
        from keystoneauth1 import session
        from keystoneauth1.identity import v3

        auth = v3.Password(auth_url=self.url, username=ADMIN_USER, password=self.admin_password,
                           project_name=ADMIN_PROJECT, user_domain_name=DOMAIN,
                           project_domain_name=DOMAIN)
        return session.Session(auth=auth, timeout=30)

    def provision(self, service_password: str, swift_url: str,
                  tenants: dict[str, dict[str, str]]) -> list[TenantIdentity]:
        """Create (or find) the service user, Swift's endpoint and each tenant's identity.

        ``tenants`` maps a tenant name to its ``password``, ``ec2_access`` and
        ``ec2_secret``.
        """
        from keystoneclient.v3 import client

        ks = client.Client(session=self.admin_session(), interface="public")
        domain = ks.domains.get("default")
        roles = {name: _ensure(ks.roles, name) for name in
                 (SERVICE_ROLE, *OPERATOR_ROLES, RESELLER_ADMIN_ROLE)}
        service_project = _ensure(ks.projects, SERVICE_PROJECT, domain=domain)
        service_user = _user(ks, SERVICE_USER, service_password, service_project, domain)
        ks.roles.grant(roles[SERVICE_ROLE], user=service_user, project=service_project)
        admin = ks.users.find(name=ADMIN_USER)
        ks.roles.grant(roles[RESELLER_ADMIN_ROLE], user=admin,
                       project=ks.projects.find(name=ADMIN_PROJECT))
        swift = _ensure(ks.services, "swift", type="object-store")
        url = f"{swift_url}/v1/AUTH_%(project_id)s"
        endpoints = ks.endpoints.list(service=swift, interface="public")
        if not endpoints:
            ks.endpoints.create(swift, url, interface="public", region=REGION)
        elif endpoints[0].url != url:
            ks.endpoints.update(endpoints[0], url=url)
        identities = []
        for tenant, creds in tenants.items():
            project = _ensure(ks.projects, tenant, domain=domain)
            user = _user(ks, f"{tenant}-user", creds["password"], project, domain)
            ks.roles.grant(roles["member"], user=user, project=project)
            blob = json.dumps({"access": creds["ec2_access"], "secret": creds["ec2_secret"]})
            current = [c for c in ks.credentials.list(user_id=user.id, type="ec2")
                       if json.loads(c.blob).get("access") == creds["ec2_access"]]
            if not current:
                ks.credentials.create(user=user, type="ec2", blob=blob, project=project)
            elif current[0].blob != blob:
                ks.credentials.update(current[0], user=user, type="ec2", blob=blob,
                                      project=project)
            identities.append(TenantIdentity(tenant, project.id, user.name, creds["password"],
                                             creds["ec2_access"], creds["ec2_secret"]))
        return identities

    def client_settings(self, identity: TenantIdentity) -> dict[str, Any]:
        """The ``os_*`` settings of one tenant's user, as OpenStack clients name them."""
        return {"os_auth_url": self.url, "os_project_name": identity.tenant,
                "os_username": identity.username, "os_password": identity.password,
                "os_user_domain_name": DOMAIN, "os_project_domain_name": DOMAIN,
                "os_project_id": identity.project_id}


def _ensure(manager, name: str, **create: Any):
    """The entity called ``name``, created if missing."""
    found = manager.list(name=name)
    return found[0] if found else manager.create(name=name, **create)


def _user(ks, name: str, password: str, project, domain):
    """The user ``name``, created with this password if missing (the stack's generated
    passwords never change, and changing one would revoke the user's tokens)."""
    found = ks.users.list(name=name)
    return found[0] if found else ks.users.create(name=name, password=password, domain=domain,
                                                  default_project=project)
