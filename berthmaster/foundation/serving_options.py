"""The secure endpoint's command-line flags and settings (pure argument parsing).

Design: kube-scheduler's secure-serving and delegated-auth flags (k8s.io/apiserver@v0.35.4
``pkg/server/options/serving.go``, ``authentication.go``, ``authorization.go``), same names and
defaults except ``--secure-port``, which is off (0) unless given, so that local runs and tests
keep the plain endpoint (berthmaster.foundation.serving). Shared by the scheduler's and the
operator's
commands; :meth:`SecureServing.from_args` checks every flag at once and names each bad one.
"""

from __future__ import annotations

import argparse
import ipaddress
from dataclasses import dataclass

from berthmaster.foundation.delegated_auth import (
    DEFAULT_ALWAYS_ALLOW_PATHS,
    DEFAULT_CACHE_TTL,
    check_always_allow_paths,
)
from berthmaster.foundation.durations import parse_go_duration
from berthmaster.foundation.errors import ConfigurationError


def _duration(text: str) -> float:
    try:
        value = parse_go_duration(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must not be negative")
    return value


def _paths(text: str) -> tuple[str, ...]:
    """pflag's StringSlice: comma-separated, an empty value being the empty list."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_secure_serving_arguments(parser: argparse.ArgumentParser) -> None:
    """kube-scheduler's secure-serving and delegated-auth flags (same names and defaults, but
    ``--secure-port`` is off unless given)."""
    group = parser.add_argument_group("secure serving (HTTPS with delegated authentication and "
                                      "authorization, as kube-scheduler)")
    group.add_argument("--secure-port", type=int, default=0, metavar="PORT",
                       help="serve /metrics, /healthz and /readyz over HTTPS on this port, "
                            "each request authenticated (TokenReview) and authorized "
                            "(SubjectAccessReview) by the API server (kube-scheduler's is "
                            "10259; default: 0, not at all)")
    group.add_argument("--bind-address", default="0.0.0.0", metavar="IP",
                       help="the address --secure-port listens on (default: %(default)s)")
    group.add_argument("--tls-cert-file", default="", metavar="FILE",
                       help="the HTTPS certificate (PEM, with its intermediates); default: a "
                            "self-signed one made at start")
    group.add_argument("--tls-private-key-file", default="", metavar="FILE",
                       help="the key of --tls-cert-file (PEM)")
    group.add_argument("--authentication-kubeconfig", default="", metavar="FILE",
                       help="kubeconfig of the API server that reviews tokens (create "
                            "tokenreviews.authentication.k8s.io); default: the component's own")
    group.add_argument("--authorization-kubeconfig", default="", metavar="FILE",
                       help="kubeconfig of the API server that reviews access (create "
                            "subjectaccessreviews.authorization.k8s.io); default: the "
                            "component's own")
    group.add_argument("--authentication-token-webhook-cache-ttl", type=_duration,
                       default=DEFAULT_CACHE_TTL, metavar="DURATION",
                       help="how long a TokenReview's answer is kept (default: 10s)")
    group.add_argument("--authorization-webhook-cache-authorized-ttl", type=_duration,
                       default=DEFAULT_CACHE_TTL, metavar="DURATION",
                       help="how long an allowing SubjectAccessReview is kept (default: 10s)")
    group.add_argument("--authorization-webhook-cache-unauthorized-ttl", type=_duration,
                       default=DEFAULT_CACHE_TTL, metavar="DURATION",
                       help="how long a refusing SubjectAccessReview is kept (default: 10s)")
    group.add_argument("--authorization-always-allow-paths", type=_paths,
                       default=DEFAULT_ALWAYS_ALLOW_PATHS, metavar="PATHS",
                       help="comma-separated paths served without authorization (a trailing "
                            "'*' is a prefix; default: /healthz,/readyz,/livez)")


@dataclass(frozen=True)
class SecureServing:
    """The secure endpoint's settings, read from the flags above."""

    port: int
    bind_address: str = "0.0.0.0"
    cert_file: str = ""
    key_file: str = ""
    authentication_kubeconfig: str = ""
    authorization_kubeconfig: str = ""
    token_ttl: float = DEFAULT_CACHE_TTL
    allowed_ttl: float = DEFAULT_CACHE_TTL
    denied_ttl: float = DEFAULT_CACHE_TTL
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SecureServing | None:
        """None when ``--secure-port`` is 0; ConfigurationError naming every bad flag."""
        if not args.secure_port:
            return None
        settings = cls(args.secure_port, args.bind_address, args.tls_cert_file,
                       args.tls_private_key_file, args.authentication_kubeconfig,
                       args.authorization_kubeconfig,
                       args.authentication_token_webhook_cache_ttl,
                       args.authorization_webhook_cache_authorized_ttl,
                       args.authorization_webhook_cache_unauthorized_ttl,
                       tuple(args.authorization_always_allow_paths))
        problems = settings.problems()
        if problems:
            raise ConfigurationError("; ".join(problems))
        return settings

    def problems(self) -> list[str]:
        problems = []
        if not 0 < self.port < 65536:
            problems.append(f"--secure-port {self.port} is not a port; give 1-65535, or 0 to "
                            "serve no HTTPS")
        try:
            ipaddress.ip_address(self.bind_address)
        except ValueError:
            problems.append(f"--bind-address {self.bind_address!r} is not an IP address; give "
                            "one (0.0.0.0 for every interface)")
        if bool(self.cert_file) != bool(self.key_file):
            problems.append("--tls-cert-file and --tls-private-key-file go together; give both, "
                            "or neither for a self-signed certificate")
        return problems + check_always_allow_paths(self.always_allow_paths)
