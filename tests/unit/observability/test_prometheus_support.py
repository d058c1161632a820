"""tests/support/prometheus.py's pure parts: the rule file of a PrometheusRule, a
ServiceMonitor-like static target, and the times of Prometheus' API."""

from __future__ import annotations

import datetime
import re
from pathlib import Path

import pytest
import yaml

from tests.support.prometheus import configuration, parse_time, rules_file, scrape_config


def test_the_rule_file_is_the_objects_spec() -> None:
    groups = [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "1m"}]}]
    assert yaml.safe_load(rules_file({"spec": {"groups": groups}})) == {"groups": groups}


def test_a_rule_without_groups_says_how_to_render_it() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "PrometheusRule 'x' has no spec.groups: render the chart with "
            "prometheusRule.enabled=true")):
        rules_file({"metadata": {"name": "x"}, "spec": {}})


def test_a_target_carries_the_job_and_namespace_of_a_service_monitor() -> None:
    config = scrape_config("rel-scheduler-metrics", "ns", "127.0.0.1:1", https=True,
                           cert=(Path("/c.crt"), Path("/c.key")))
    assert config["job_name"] == "rel-scheduler-metrics"
    assert config["honor_labels"] is True
    assert config["static_configs"] == [{"targets": ["127.0.0.1:1"],
                                         "labels": {"namespace": "ns"}}]
    assert config["tls_config"] == {"insecure_skip_verify": True, "cert_file": "/c.crt",
                                    "key_file": "/c.key"}
    loaded = yaml.safe_load(configuration([config], [Path("/r.yaml")]))
    assert loaded["global"]["evaluation_interval"] == "1s"
    assert loaded["rule_files"] == ["/r.yaml"]


def test_api_times_are_read_to_the_microsecond() -> None:
    assert parse_time("2026-11-26T21:45:01.123456789Z") == datetime.datetime(
        2026, 11, 26, 21, 45, 1, 123456, tzinfo=datetime.UTC)
    assert parse_time("2026-11-26T21:45:01Z").microsecond == 0
    with pytest.raises(ValueError, match="not a UTC time"):
        parse_time("2026-11-26T21:45:01+02:00")
