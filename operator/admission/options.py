"""``berthmaster operator``'s admission flags and the settings they make."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from dataclasses import dataclass, field

from berthmaster.errors import ConfigurationError
from berthmaster.operator.admission.certs import Lifetimes

DEFAULT_NAME = "berthmaster-placement"


@dataclass(frozen=True)
class AdmissionSettings:
    host: str
    port: int
    namespace: str
    name: str  # the webhook configurations
    config_map: str
    secret: str
    service: str = ""  # set: the chart's configurations point at this Service
    service_port: int = 443
    failure_policy: str = "Fail"
    timeout_seconds: int = 5
    check_seconds: float = 60.0
    lifetimes: Lifetimes = field(default_factory=Lifetimes)

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"https://{host}:{self.port}"

    def hosts(self) -> list[str]:
        """The names the serving certificate must carry."""
        if self.service:
            base = f"{self.service}.{self.namespace}"
            return [f"{base}.svc", f"{base}.svc.cluster.local", base, self.service]
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        names = [host]
        try:
            if ipaddress.ip_address(host).is_loopback:
                names.append("localhost")
        except ValueError:
            pass
        return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("placement admission webhook (docs/admission.md)")
    group.add_argument("--admission-listen", default="", metavar="HOST:PORT",
                       help="serve the placement admission webhook (PodNodeSelector, "
                            "PodTolerationRestriction, PodNodeConstraints) over HTTPS here "
                            "(default: off)")
    group.add_argument("--admission-namespace", default="",
                       help="namespace of the webhook's Secret and ConfigMap, excluded from "
                            "the webhook (default: $POD_NAMESPACE, else berthmaster)")
    group.add_argument("--admission-name", default=DEFAULT_NAME,
                       help="name of the Mutating/ValidatingWebhookConfiguration "
                            f"(default {DEFAULT_NAME}); also names the ConfigMap "
                            "(<name>) and the Secret (<name>-tls) unless given below")
    group.add_argument("--admission-config-map", default="",
                       help="ConfigMap with the plugins' configuration in key config.yaml")
    group.add_argument("--admission-secret", default="",
                       help="Secret holding the serving certificate and its CA")
    group.add_argument("--admission-service", default="",
                       help="in a cluster: the Service in front of the webhook; the operator "
                            "then only injects its CA into the configurations the chart "
                            "installed (without it, it writes them, pointing at "
                            "--admission-listen)")
    group.add_argument("--admission-service-port", type=int, default=443)
    group.add_argument("--admission-failure-policy", choices=("Fail", "Ignore"), default="Fail",
                       help="failurePolicy of the configurations it writes (default Fail)")
    group.add_argument("--admission-timeout-seconds", type=int, default=5,
                       help="timeoutSeconds of the configurations it writes (1-30, default 5)")


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError as error:
        raise ConfigurationError(f"${name}={raw!r} is not a number of seconds") from error


def settings_from_args(args: argparse.Namespace) -> AdmissionSettings | None:
    """The settings, None when the webhook is off; ConfigurationError for a bad flag."""
    if not args.admission_listen:
        return None
    host, sep, port = args.admission_listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"--admission-listen {args.admission_listen!r} is not HOST:PORT "
                                 "(for example 127.0.0.1:9443)")
    if not 1 <= args.admission_timeout_seconds <= 30:
        raise ConfigurationError("--admission-timeout-seconds must be between 1 and 30 (the "
                                 "API server's limits)")
    namespace = args.admission_namespace or os.environ.get("POD_NAMESPACE") or "berthmaster"
    lifetimes = Lifetimes(
        ca=datetime.timedelta(seconds=_seconds("BERTHMASTER_ADMISSION_CA_SECONDS",
                                               Lifetimes().ca.total_seconds())),
        serving=datetime.timedelta(seconds=_seconds("BERTHMASTER_ADMISSION_CERT_SECONDS",
                                                    Lifetimes().serving.total_seconds())))
    return AdmissionSettings(
        host=host.strip("[]"), port=int(port), namespace=namespace, name=args.admission_name,
        config_map=args.admission_config_map or args.admission_name,
        secret=args.admission_secret or f"{args.admission_name}-tls",
        service=args.admission_service, service_port=args.admission_service_port,
        failure_policy=args.admission_failure_policy,
        timeout_seconds=args.admission_timeout_seconds,
        check_seconds=_seconds("BERTHMASTER_ADMISSION_CHECK_SECONDS", 60.0),
        lifetimes=lifetimes)
