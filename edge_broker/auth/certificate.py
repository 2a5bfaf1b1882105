"""The ``certificate`` authentication method (AUTHZ.md §1): the subject CN of a TLS client
certificate that the listener verified against its CA (``tls_ca``, ``require_client_cert``).

It applies to a CONNECT on a connection that presented a verified client certificate; the
identity's ``cert_cn`` (and its username, for permissions and the site ACL) is that CN. Without
a certificate it does not apply, and the listener's next method decides (none left: 0x87).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .method_api import Accepted, AuthOutcome, AuthRequest

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth


class CertificateAuthenticator:
    __slots__ = ()

    @property
    def method(self) -> str:
        return "certificate"

    @property
    def enhanced_method(self) -> str | None:
        return None

    def applies(self, request: AuthRequest) -> bool:
        return (
            request.info.cert_cn is not None
            and request.connect.properties.authentication_method is None
        )

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        return Accepted(request.identity_for("certificate", username=request.info.cert_cn))


def build(listener: ListenerAuth, config: AuthSections) -> CertificateAuthenticator:
    return CertificateAuthenticator()
