"""Which CAs a connection to the API trusts: one order, for every path that connects.

The first of these that is set is the trust, and the only one:

1. ``ca_bundle=`` (``--ca-bundle``): a PEM file;
2. ``REQUESTS_CA_BUNDLE``, then ``CURL_CA_BUNDLE`` (requests' and curl's variables): a PEM
   file or a folder of hashed certificates;
3. ``SSL_CERT_FILE`` and/or ``SSL_CERT_DIR`` (OpenSSL's, Python's and httpx's variables):
   both are loaded when both are set, as OpenSSL does; ``SSL_CERT_DIR`` may list folders
   separated by ``:``;
4. the store ``ca_store`` names: ``"certifi"`` (certifi's copy of Mozilla's list, as
   requests trusts) or ``"system"`` (the operating system's store through truststore, as
   pip does: macOS' keychain, Windows' certificate store, the distribution's bundle on Linux),
   where a corporate TLS-inspecting proxy's CA usually is.

A named file or folder that cannot be read is a ``ConfigurationError`` naming where it was
named: never a silent fall-through to the next source. The built-in pool (urllib3), the
async client (httpx) and a ``session=`` of yours whose ``verify`` is left at ``True`` all
ask here, so a server one accepts the others accept too.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass

import certifi

from .._core import ClientConfig, ConfigurationError

__all__ = ["Trust", "context_class", "trust_of"]

# the variables of steps 2 and 3, in their order
_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


@dataclass(frozen=True)
class Trust:
    """The CAs to trust and where they were named (for messages)."""

    source: str  # "ca_bundle", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "certifi", ...
    cafile: str | None = None
    capath: str | None = None
    system: bool = False  # the operating system's store (truststore)

    def load(self, context: ssl.SSLContext) -> None:
        """Load these CAs into ``context``, or raise ``ConfigurationError`` naming them."""
        if self.system or (self.cafile is None and self.capath is None):
            return  # truststore's context asks the system at each handshake (or no trust)
        where = " and ".join(p for p in (self.cafile, self.capath) if p is not None)
        for folder in (self.capath or "").split(os.pathsep) if self.capath else ():
            # OpenSSL reads a folder lazily, at each handshake: a missing one would go unseen
            if not os.path.isdir(folder):
                raise ConfigurationError(
                    f"{self.source} names {folder!r}, which is not a folder: fix or unset it"
                )
        try:
            context.load_verify_locations(cafile=self.cafile, capath=self.capath)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"cannot load the CAs of {self.source} ({where!r}): {exc}; fix or unset it"
            ) from None


def trust_of(config: ClientConfig) -> Trust:
    """The first source of the order that is set (module docstring)."""
    if config.ca_bundle:
        return _file_or_folder("ca_bundle", config.ca_bundle)
    for name in _BUNDLE_VARIABLES:
        value = os.environ.get(name)
        if value:  # an empty variable is unset (as requests reads it)
            return _file_or_folder(name, value)
    cafile, capath = os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None
    if cafile is not None or capath is not None:
        named = [n for n, v in (("SSL_CERT_FILE", cafile), ("SSL_CERT_DIR", capath)) if v]
        return Trust(" and ".join(named), cafile, capath)
    if config.ca_store == "system":
        return Trust("the system's store (ca_store='system')", system=True)
    return Trust("certifi", certifi.where())


def _file_or_folder(source: str, path: str) -> Trust:
    return Trust(source, capath=path) if os.path.isdir(path) else Trust(source, cafile=path)


def context_class(mixin: type, trust: Trust) -> type[ssl.SSLContext]:
    """A context class of ``mixin`` (the package's: it hands the socket to the attempt) on
    Python's context, or on truststore's for the system's store."""
    base: type[ssl.SSLContext] = ssl.SSLContext
    if trust.system:
        import truststore  # noqa: PLC0415  (optional: the truststore extra)

        base = truststore.SSLContext
    made = _MADE.get((mixin, base))
    if made is None:
        made = _MADE[(mixin, base)] = type(
            f"_{base.__module__}_{mixin.__name__}", (mixin, base), {}
        )
    return made


_MADE: dict[tuple[type, type], type[ssl.SSLContext]] = {}
