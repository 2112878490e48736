"""Kafka's own authentication and authorization for the integration tests.

The one embedded broker of a test run (``kafka_broker`` in ``conftest.py``) is an Apache
Kafka with, besides the PLAINTEXT listener every other test uses, these listeners
(:data:`LISTENERS`):

* ``SASL_PLAINTEXT``: SASL/PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
* ``SASL_SSL``: the same mechanisms over TLS (the broker's certificate is signed by a CA
  made here with ``openssl``; Kafka reads PEM key and trust stores);
* ``SSL``: TLS with a client certificate required (the principal is its subject,
  ``User:CN=pubsub-client``).

Kafka's standard authorizer (:data:`AUTHORIZER`) is on and denies whatever no ACL allows.
``User:ANONYMOUS`` (the PLAINTEXT listener's principal, and the controller's) and the
admin SCRAM user :data:`ADMIN` are super users, so the tests on the PLAINTEXT listener are
unaffected. PLAIN users live in the SASL listeners' JAAS configuration (fixed when the
broker starts); SCRAM users are created at any time with Kafka's Admin API
(AlterUserScramCredentials, :meth:`SecuredKafka.add_user`) and ACLs granted with it
(CreateAcls, :meth:`SecuredKafka.grant`), both through confluent-kafka's ``AdminClient`` on
the PLAINTEXT listener. The broker logs each refusal of its authorizer (logger
``kafka.authorizer.logger``, conf/kafka-log4j2.properties): :meth:`SecuredKafka.refusals`.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from streaming.kafka.client_config import KafkaClientConfig

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
#: Listener name -> security protocol of the listeners opened besides PLAINTEXT.
LISTENERS = {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL", "SSL": "SSL"}
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: The admin SCRAM user (a super user, with every mechanism).
ADMIN = "pubsub-admin"
#: The SASL/PLAIN users besides the admin, in the listeners' JAAS configuration from the start.
PLAIN_USERS = ("alice",)
#: The subject of the client certificate (:attr:`Certificates.client`): the SSL listener's principal.
CLIENT_SUBJECT = "CN=pubsub-client"
SCRAM_ITERATIONS = 4096
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: The authorizer's line of a refusal: "Principal = User:x is Denied operation = READ ...".
DENIED = " is Denied operation = "


def reader_group() -> str:
    """The group id of the project's librdkafka readers (``streaming/kafka/fetch.py``): never
    joined, but librdkafka looks up its coordinator, which takes DESCRIBE on the group."""
    from streaming.kafka import fetch

    return str(fetch._RDKAFKA_READ_SETTINGS["group.id"])  # noqa: SLF001 - the one place it is set


class Credentials(NamedTuple):
    """A SASL user: its name and password (the principal is ``User:<name>``)."""

    name: str
    password: str

    @property
    def principal(self) -> str:
        return f"User:{self.name}"


def password() -> str:
    """A new random password (JAAS-safe: letters, digits, ``-`` and ``_``)."""
    return secrets.token_urlsafe(18)


# -- certificates ---------------------------------------------------------------------------

class KeyPair(NamedTuple):
    """A certificate and its private key (PEM files, the key unencrypted PKCS#8)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Certificates:
    """A test CA and what it signed: the broker's certificate and a client certificate.

    ``broker_store`` holds the broker's key and certificate chain in one PEM file, Kafka's
    ``ssl.keystore.type=PEM`` key store.
    """

    ca: KeyPair
    broker: KeyPair
    client: KeyPair
    broker_store: Path


def _openssl(*argv: object) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the Kafka security fixture needs the openssl binary to make its certificates")
    subprocess.run([openssl, *map(str, argv)], check=True, capture_output=True, timeout=60)


_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


def make_ca(directory: Path, name: str = "ca") -> KeyPair:
    """A self-signed CA (``<name>.pem``, ``<name>.key``) valid two days."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = KeyPair(directory / f"{name}.pem", directory / f"{name}.key")
    _openssl("req", "-x509", *_EC_KEY, "-keyout", pair.key, "-out", pair.cert, "-days", "2",
             "-subj", f"/CN=pubsub test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pair


def sign(ca: KeyPair, directory: Path, name: str, subject: str, alt_names: str | None = None) -> KeyPair:
    """A certificate of ``subject`` (``/CN=...``) signed by ``ca``; ``alt_names`` its subjectAltName."""
    pair, csr, ext = KeyPair(directory / f"{name}.pem", directory / f"{name}.key"), directory / f"{name}.csr", \
        directory / f"{name}.ext"
    ext.write_text("basicConstraints=CA:FALSE\n" + (f"subjectAltName={alt_names}\n" if alt_names else ""))
    _openssl("req", *_EC_KEY, "-keyout", pair.key, "-out", csr, "-subj", subject)
    _openssl("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-out", pair.cert,
             "-days", "2", "-extfile", ext)
    return pair


def make_certificates(directory: Path) -> Certificates:
    """A CA, the broker's certificate (for 127.0.0.1 and localhost) and a client's (:data:`CLIENT_SUBJECT`)."""
    ca = make_ca(directory)
    broker = sign(ca, directory, "broker", "/CN=localhost", "IP:127.0.0.1,DNS:localhost")
    client = sign(ca, directory, "client", f"/{CLIENT_SUBJECT}")
    store = directory / "broker-keystore.pem"
    store.write_text(broker.key.read_text() + broker.cert.read_text() + ca.cert.read_text())
    return Certificates(ca, broker, client, store)


# -- the broker's settings ---------------------------------------------------------------------

def jaas(mechanism: str, plain_users: Mapping[str, str] | None = None) -> str:
    """The broker's JAAS configuration of ``mechanism`` on a listener (PLAIN: its users)."""
    users = "".join(f' user_{name}="{pw}"' for name, pw in (plain_users or {}).items()) \
        if mechanism == "PLAIN" else ""
    return f"{_JAAS_MODULES[mechanism]} required{users};"


def broker_properties(certs: Certificates, plain_users: Mapping[str, str], super_users: Iterable[str]) -> dict[str, str]:
    """Broker settings of :data:`LISTENERS`, the PLAIN users and the standard authorizer.

    Parameters
    ----------
    certs : the broker's key store and the CA it trusts for client certificates.
    plain_users : user name -> password of SASL/PLAIN (SCRAM users are added later).
    super_users : principals the authorizer allows everything (``User:ANONYMOUS`` first).
    """
    props = {
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker_store),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca.cert),
        "listener.name.ssl.ssl.client.auth": "required",
        "authorizer.class.name": AUTHORIZER,
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(super_users),
    }
    for listener, protocol in LISTENERS.items():
        if protocol.startswith("SASL_"):
            for mechanism in MECHANISMS:
                props[f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"] = \
                    jaas(mechanism, plain_users)
    return props


# -- the Admin API -------------------------------------------------------------------------------

class Acl(NamedTuple):
    """One ALLOW rule: ``operation`` on ``resource`` (``topic``, ``group``, ``cluster``)
    ``name`` matched ``pattern`` (``literal`` or ``prefixed``)."""

    operation: str
    resource: str
    name: str
    pattern: str = "literal"

    def binding(self, principal: str) -> AclBinding:
        return AclBinding(ResourceType[self.resource.upper()], self.name, ResourcePatternType[self.pattern.upper()],
                          principal, "*", AclOperation[self.operation.upper()], AclPermissionType.ALLOW)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _acls_of(principal: str) -> AclBindingFilter:
    """The filter of every ACL of ``principal``."""
    anything: Any = None  # a None name or host matches any (confluent-kafka's stubs want a str)
    return AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, principal, anything,
                            AclOperation.ANY, AclPermissionType.ANY)


def add_scram_user(bootstrap: str, user: Credentials, timeout_s: float = 30.0) -> None:
    """Give ``user`` SCRAM-SHA-256 and SCRAM-SHA-512 credentials (Admin API, as a super user on
    ``bootstrap``) and wait until the broker knows them."""
    admin = _admin(bootstrap)
    for mechanism in SCRAM_MECHANISMS:  # one alteration of a user a request (Kafka's rule)
        info = ScramCredentialInfo(ScramMechanism[mechanism.replace("-", "_")], SCRAM_ITERATIONS)
        upsert = UserScramCredentialUpsertion(user.name, info, user.password.encode())
        for future in admin.alter_user_scram_credentials([upsert], request_timeout=timeout_s).values():
            future.result()
    deadline = time.monotonic() + timeout_s
    while True:  # the credentials travel through the metadata log to the broker's cache
        try:
            described: Any = admin.describe_user_scram_credentials([user.name], request_timeout=timeout_s)
            if len(described[user.name].result().scram_credential_infos) == len(SCRAM_MECHANISMS):
                return
        except Exception:  # noqa: BLE001 - not there yet
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def grant(bootstrap: str, principal: str, acls: Iterable[Acl], timeout_s: float = 30.0) -> None:
    """Allow ``principal`` the ``acls`` (Admin API, as a super user on ``bootstrap``) and wait
    until the broker's authorizer holds them."""
    admin = _admin(bootstrap)
    bindings = [acl.binding(principal) for acl in acls]
    if not bindings:
        return
    for future in admin.create_acls(bindings, request_timeout=timeout_s).values():
        future.result()
    wanted = set(bindings)
    deadline = time.monotonic() + timeout_s
    while not wanted <= set(admin.describe_acls(_acls_of(principal), request_timeout=timeout_s).result()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the ACLs of {principal} did not reach the broker's authorizer in {timeout_s} s")
        time.sleep(0.05)


def acls_of(bootstrap: str, principal: str) -> set[tuple[str, str, str, str]]:
    """``(operation, resource, name, pattern)`` of every ACL the broker holds for ``principal``."""
    admin = _admin(bootstrap)  # held until the answer is in: a dropped client cancels its requests
    return {(b.operation.name, b.restype.name, b.name, b.resource_pattern_type.name)
            for b in admin.describe_acls(_acls_of(principal), request_timeout=30).result()}


# -- what the tests get ------------------------------------------------------------------------

@dataclass
class SecuredKafka:
    """The test broker's secured side: its listeners, certificates, users and log.

    Parameters
    ----------
    bootstrap_servers : the PLAINTEXT listener (``User:ANONYMOUS``, a super user).
    addresses : listener name -> ``host:port``.
    certificates : the CA and what it signed.
    admin : the admin SCRAM user (a super user).
    plain_users : the users of SASL/PLAIN (user name -> password), fixed at the broker's start.
    log_path : the broker's log (the authorizer's refusals among its lines).
    """

    bootstrap_servers: str
    addresses: Mapping[str, str]
    certificates: Certificates
    admin: Credentials
    plain_users: Mapping[str, str]
    log_path: Path | None
    users: dict[str, Credentials] = field(default_factory=dict)

    def plain_user(self, name: str) -> Credentials:
        """A SASL/PLAIN user of the broker's JAAS configuration, its SCRAM credentials (the same
        password) added: one principal whatever the mechanism."""
        if name not in self.users:
            self.add_user(name, self.plain_users[name])
        return self.users[name]

    def add_user(self, name: str, password_: str | None = None) -> Credentials:
        """A SCRAM user (SCRAM-SHA-256 and -512) created now with Kafka's Admin API."""
        user = Credentials(name, password_ or password())
        add_scram_user(self.bootstrap_servers, user)
        self.users[name] = user
        return user

    def grant(self, principal: str, acls: Iterable[Acl]) -> None:
        """Allow ``principal`` (``User:name``) the ``acls`` (Admin API)."""
        grant(self.bootstrap_servers, principal, acls)

    def acls_of(self, principal: str) -> set[tuple[str, str, str, str]]:
        """The ACLs the broker holds for ``principal``."""
        return acls_of(self.bootstrap_servers, principal)

    def config(self, listener: str, user: Credentials | None = None, mechanism: str = "SCRAM-SHA-512",
               client: str = "confluent", **extra: Any) -> KafkaClientConfig:
        """A client configuration of ``user`` on ``listener`` (``SSL``: the client certificate),
        ``extra`` kafka-python options over it."""
        protocol = LISTENERS[listener]
        options: dict[str, Any] = {"security_protocol": protocol}
        if protocol.startswith("SASL_"):
            assert user is not None, f"the {listener} listener needs a user"
            options.update(sasl_mechanism=mechanism, sasl_plain_username=user.name,
                           sasl_plain_password=user.password)
        if "SSL" in protocol:
            options["ssl_cafile"] = str(self.certificates.ca.cert)
        if protocol == "SSL":
            options.update(ssl_certfile=str(self.certificates.client.cert),
                           ssl_keyfile=str(self.certificates.client.key))
        return KafkaClientConfig.create(self.addresses[listener], {**options, **extra}, client)

    def log_text(self) -> str:
        """The broker's log so far."""
        return self.log_path.read_text(errors="replace") if self.log_path is not None else ""

    def log_size(self) -> int:
        """Where the log ends now (to read the refusals from there on)."""
        try:
            return self.log_path.stat().st_size if self.log_path is not None else 0
        except OSError:
            return 0

    def refusals(self, since: int = 0, principal: str | None = None) -> list[str]:
        """The authorizer's refusal lines logged after byte ``since`` (of ``principal``, if given)."""
        if self.log_path is None:
            return []
        with open(self.log_path, "rb") as log:
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
        return [line for line in lines if DENIED in line
                and (principal is None or f"Principal = {principal} is Denied" in line)]


@dataclass(frozen=True)
class BrokerSecurity:
    """What the broker is started with: certificates, the admin, the PLAIN users (made before it starts).

    Build it with :meth:`create`; :meth:`properties` are the broker's settings.
    """

    certificates: Certificates
    admin: Credentials
    plain_users: Mapping[str, str]

    @classmethod
    def create(cls, directory: Path, plain_users: Iterable[str] = ()) -> BrokerSecurity:
        """New certificates in ``directory``, an admin and ``plain_users`` with random passwords."""
        admin = Credentials(ADMIN, password())
        users = {admin.name: admin.password, **{name: password() for name in plain_users}}
        return cls(make_certificates(directory), admin, users)

    @property
    def super_users(self) -> tuple[str, ...]:
        """``User:ANONYMOUS`` (PLAINTEXT, the controller) and the admin."""
        return ("User:ANONYMOUS", self.admin.principal)

    def properties(self) -> dict[str, str]:
        """The broker's settings (:func:`broker_properties`)."""
        return broker_properties(self.certificates, self.plain_users, self.super_users)

    def secured(self, broker: Any) -> SecuredKafka:
        """The running ``broker``'s :class:`SecuredKafka`, the admin's SCRAM credentials added."""
        kafka = SecuredKafka(broker.bootstrap_servers, {name: broker.address(name) for name in LISTENERS},
                             self.certificates, self.admin, self.plain_users, broker.log_path)
        kafka.add_user(self.admin.name, self.admin.password)
        return kafka
