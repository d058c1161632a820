"""``berthmaster admission``'s flags and the settings they make.

Two ways to hold the serving certificate (docs/admission.md, "Certificates"):

- ``--webhook-cert-file``/``--webhook-key-file``: files (in a cluster, the chart's Secret
  mounted into every replica), re-read when they change; the webhook configurations belong to
  whoever made the certificate (the chart), and the process writes nothing to the API server.
  Any number of replicas serve the same certificate. (``--tls-cert-file`` is the secure metrics
  port's, as kube-scheduler's.)
- neither: the process keeps a CA and a serving certificate in a Secret and registers both
  configurations itself, pointing at ``--listen`` (one process outside a cluster: the local
  control plane, the demo, a development machine). Two such processes would each make a CA on
  first start and write their own caBundle, so this mode is for one replica.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from dataclasses import dataclass, field

from berthmaster.foundation.errors import ConfigurationError
from berthmaster.operator.admission.certs import Lifetimes
from berthmaster.operator.admission.schedulername import DEFAULT_SCHEDULER, LABEL
from berthmaster.scheduler.label_string import label_value_problem

DEFAULT_NAME = "berthmaster-placement"
FAILURE_POLICIES = ("Fail", "Ignore")
# An AdmissionReview carries the object, plus on UPDATE the stored old object, plus the
# request's own fields. kube-apiserver accepts objects of up to 3 MiB (MaxRequestBodyBytes in
# k8s.io/apiserver/pkg/server/config.go), so a review of a pod it accepts can be well over 3 MiB;
# refusing it would refuse the pod under failurePolicy Fail. controller-runtime's webhooks take
# two 3 MiB objects and 1 MiB for the rest, 7 MiB (sigs.k8s.io/controller-runtime
# pkg/webhook/admission/http.go, maxRequestSize); so do we.
DEFAULT_MAX_REQUEST_BYTES = 7 * 1024 * 1024
DEFAULT_MAX_TOLERATIONS = 1000
DEFAULT_MAX_IN_FLIGHT = 32
# The bodies one replica holds at once (budget.py). A body costs its raw bytes plus its parsed
# form while it is answered: about three times its size for a review of a few large strings,
# up to about ten times for one of many small keys (orjson's objects of a review of 150,000
# labels take 9 times its bytes; docs/admission.md). 16 MiB is then 48 to 160 MiB, beside the
# process's ~55 MiB, within the chart's 256Mi memory limit (admission.resources.limits.memory),
# and holds two reviews at --max-request-bytes at once.
DEFAULT_MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024
_UNITS = {"": 1, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "k": 1000, "M": 1000 ** 2}


@dataclass(frozen=True)
class Limits:
    """What one replica takes on: the largest request body it reads, the most tolerations a
    pod may carry into the merge, how many reviews it works on at once and how many bytes of
    their bodies it holds, how long an excess
    request waits for a slot and how long a body may take to arrive."""

    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_tolerations: int = DEFAULT_MAX_TOLERATIONS
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES
    queue_wait_seconds: float = 0.5
    read_timeout_seconds: float = 10.0


@dataclass(frozen=True)
class AdmissionSettings:
    host: str
    port: int
    namespace: str
    name: str  # the webhook configurations
    config_map: str
    secret: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    client_ca_file: str = ""
    failure_policy: str = "Fail"
    timeout_seconds: int = 5
    check_seconds: float = 60.0
    metrics_address: str = ""
    shutdown_delay_seconds: float = 0.0
    scheduler_name: str = ""
    limits: Limits = field(default_factory=Limits)
    lifetimes: Lifetimes = field(default_factory=Lifetimes)

    @property
    def self_managed(self) -> bool:
        """The process keeps its certificate in a Secret and registers the configurations."""
        return not self.tls_cert_file

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"https://{host}:{self.port}"

    def hosts(self) -> list[str]:
        """The names a self-managed serving certificate must carry."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0", "::") else self.host
        names = [host]
        try:
            if ipaddress.ip_address(host).is_loopback:
                names.append("localhost")
        except ValueError:
            pass
        return names


def byte_size(text: str) -> int:
    """``3145728``, ``3Mi``, ``512Ki`` -> bytes (Kubernetes quantity suffixes)."""
    number = text.rstrip("KMGik")
    unit = text[len(number):]
    if not number.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in bytes (e.g. 3Mi, 512Ki)")
    return int(number) * _UNITS[unit]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    parser.add_argument("--listen", default="0.0.0.0:9443", metavar="HOST:PORT",
                        help="serve the webhook over HTTPS here (default 0.0.0.0:9443)")
    parser.add_argument("--namespace", default="",
                        help="namespace of the ConfigMap (and of the Secret when self-managed), "
                             "excluded from the webhook (default: $POD_NAMESPACE, else "
                             "berthmaster)")
    parser.add_argument("--name", default=DEFAULT_NAME,
                        help="name of the Mutating/ValidatingWebhookConfiguration "
                             f"(default {DEFAULT_NAME}); also names the ConfigMap (<name>) and "
                             "the Secret (<name>-tls) unless given below")
    parser.add_argument("--config-map", default="",
                        help="ConfigMap with the plugins' configuration in key config.yaml")
    _add_certificates(parser.add_argument_group("certificates"))
    _add_configuration_policy(parser.add_argument_group("policy of the configurations"))
    parser.add_argument_group("scheduler routing").add_argument(
        "--scheduler-name", default="", metavar="NAME",
        help=f"set spec.schedulerName to NAME on new pods of namespaces labelled {LABEL}=NAME "
             f"whose schedulerName is empty or {DEFAULT_SCHEDULER} (a pod labelled "
             f"{LABEL}={DEFAULT_SCHEDULER} keeps it); self-managed, also registers that webhook "
             "(default: route nothing)")
    _add_bounded_work(parser.add_argument_group("bounded work"))
    parser.add_argument("--metrics-bind-address", default="", metavar="HOST:PORT",
                        help="serve /metrics, /healthz and /readyz over plain HTTP here "
                             "(default off; --secure-port serves them over HTTPS with delegated "
                             "authentication)")
    parser.add_argument("--shutdown-delay-seconds", type=float, default=0.0, metavar="SECONDS",
                        help="on SIGTERM, report not ready and keep serving this long before "
                             "stopping, while the Service stops sending to this replica "
                             "(default 0; the chart sets 5)")


def _add_certificates(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--webhook-cert-file", default="",
                       help="serving certificate (PEM), re-read when it changes; with it the "
                            "process registers nothing (the chart owns the configurations)")
    group.add_argument("--webhook-key-file", default="", help="its private key (PEM)")
    group.add_argument("--secret", default="",
                       help="without --webhook-cert-file: the Secret where the process keeps "
                            "its own CA and serving certificate (one replica)")
    group.add_argument("--client-ca-file", default="",
                       help="require callers of /mutate and /validate to present a client "
                            "certificate signed by this CA (the API server's "
                            "AdmissionConfiguration kubeConfigFile; docs/admission.md)")


def _add_configuration_policy(group: argparse._ArgumentGroup) -> None:
    """The webhook configurations' failurePolicy and timeout."""
    group.add_argument("--failure-policy", choices=FAILURE_POLICIES, default="Fail",
                       help="the configurations' failurePolicy (default Fail); with Ignore, "
                            "a request this webhook cannot decide (its own API reads fail) is "
                            "admitted with a warning, as the API server admits one it cannot send")
    group.add_argument("--timeout-seconds", type=int, default=5,
                       help="the configurations' timeoutSeconds (1-30, default 5)")


def _add_bounded_work(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--max-request-bytes", type=byte_size, default=DEFAULT_MAX_REQUEST_BYTES,
                       metavar="SIZE",
                       help="refuse a request body larger than this without reading it "
                            "(default 7Mi: two of kube-apiserver's 3 MiB objects, for an UPDATE's "
                            "object and old object, and 1 MiB for the rest of the review)")
    group.add_argument("--max-tolerations", type=int, default=DEFAULT_MAX_TOLERATIONS,
                       help="refuse a pod with more tolerations than this (default "
                            f"{DEFAULT_MAX_TOLERATIONS})")
    group.add_argument("--max-in-flight", type=int, default=DEFAULT_MAX_IN_FLIGHT,
                       help="reviews worked on at once; one more waits briefly for a slot, "
                            "then is answered 429 so the API server applies the failurePolicy "
                            f"(default {DEFAULT_MAX_IN_FLIGHT})")
    group.add_argument("--max-in-flight-bytes", type=byte_size,
                       default=DEFAULT_MAX_IN_FLIGHT_BYTES, metavar="SIZE",
                       help="request bytes held at once, reserved by Content-Length before "
                            "reading; a review that does not fit is answered 429 at once "
                            "(default 16Mi: three to ten times that once parsed, within the "
                            "chart's 256Mi memory limit; at least --max-request-bytes)")


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError as error:
        raise ConfigurationError(f"${name}={raw!r} is not a number of seconds") from error


def settings_from_args(args: argparse.Namespace) -> AdmissionSettings:
    """The settings; ConfigurationError naming the flag and the fix for a bad one."""
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigurationError(f"--listen {args.listen!r} is not HOST:PORT (for example "
                                 "127.0.0.1:9443)")
    if not 1 <= args.timeout_seconds <= 30:
        raise ConfigurationError("--timeout-seconds must be between 1 and 30 (the API "
                                 "server's limits)")
    if bool(args.webhook_cert_file) != bool(args.webhook_key_file):
        raise ConfigurationError("--webhook-cert-file and --webhook-key-file go together: give "
                                 "both or neither")
    for flag, value in (("--max-tolerations", args.max_tolerations),
                        ("--max-in-flight", args.max_in_flight),
                        ("--max-request-bytes", args.max_request_bytes)):
        if value < 1:
            raise ConfigurationError(f"{flag} must be at least 1")
    if args.max_in_flight_bytes < args.max_request_bytes:
        raise ConfigurationError(
            f"--max-in-flight-bytes {args.max_in_flight_bytes} is less than --max-request-bytes "
            f"{args.max_request_bytes}: a review of the largest size allowed could never be "
            "read; raise --max-in-flight-bytes (chart value admission.maxInFlightBytes) or "
            "lower --max-request-bytes")
    scheduler_name = args.scheduler_name
    if scheduler_name and (scheduler_name == DEFAULT_SCHEDULER
                           or label_value_problem(scheduler_name)):
        raise ConfigurationError(
            f"--scheduler-name {scheduler_name!r}: "
            f"{label_value_problem(scheduler_name) or 'that is kube-scheduler'}; give the "
            "schedulerName of a berthmaster profile (the chart's scheduler.name)")
    namespace = args.namespace or os.environ.get("POD_NAMESPACE") or "berthmaster"
    lifetimes = Lifetimes(
        ca=datetime.timedelta(seconds=_seconds("BERTHMASTER_ADMISSION_CA_SECONDS",
                                               Lifetimes().ca.total_seconds())),
        serving=datetime.timedelta(seconds=_seconds("BERTHMASTER_ADMISSION_CERT_SECONDS",
                                                    Lifetimes().serving.total_seconds())))
    return AdmissionSettings(
        host=host.strip("[]"), port=int(port), namespace=namespace, name=args.name,
        config_map=args.config_map or args.name,
        secret="" if args.webhook_cert_file else (args.secret or f"{args.name}-tls"),
        tls_cert_file=args.webhook_cert_file, tls_key_file=args.webhook_key_file,
        client_ca_file=args.client_ca_file,
        failure_policy=args.failure_policy, timeout_seconds=args.timeout_seconds,
        check_seconds=_seconds("BERTHMASTER_ADMISSION_CHECK_SECONDS", 60.0),
        metrics_address=args.metrics_bind_address,
        shutdown_delay_seconds=max(0.0, args.shutdown_delay_seconds),
        scheduler_name=scheduler_name,
        limits=Limits(max_request_bytes=args.max_request_bytes,
                      max_tolerations=args.max_tolerations,
                      max_in_flight=args.max_in_flight,
                      max_in_flight_bytes=args.max_in_flight_bytes),
        lifetimes=lifetimes)
