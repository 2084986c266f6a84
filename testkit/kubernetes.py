"""Kubernetes objects checked as an operator's tools would check them, offline: deploy/kubernetes's
objects as its kustomization lists them, and any object against its schema (kubernetes-validate,
strict, for Kubernetes' own kinds; the schemas kept in deploy/kubernetes/schemas for KEDA's
ScaledObject and the Prometheus operator's ServiceMonitor, which kubernetes-validate does not know).

kubernetes-validate and jsonschema are test extras: a test asks for them (``pytest.importorskip``)
before it validates.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from testkit.bot_harness import REPO

KUBERNETES = REPO / "deploy" / "kubernetes"
# The kinds of others that the objects use: (apiVersion, kind) -> their schema in deploy/kubernetes/schemas.
CUSTOM_KINDS = {("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
                ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json"}


def manifests() -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object the kustomization applies, with the file it is in."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for document in yaml.safe_load_all((KUBERNETES / name).read_text()):
            if document is not None:
                yield name, document


def custom_schema(document: dict[str, Any]) -> dict[str, Any] | None:
    """The schema kept for a kind that is not Kubernetes' own, or None for one of Kubernetes' own."""
    name = CUSTOM_KINDS.get((document["apiVersion"], document["kind"]))
    return None if name is None else dict(json.loads((KUBERNETES / "schemas" / name).read_text()))


def validate(document: dict[str, Any]) -> None:
    """Raise if ``document`` is not a valid object of its kind (a misspelt field included)."""
    import jsonschema
    import kubernetes_validate

    schema = custom_schema(document)
    if schema is not None:
        jsonschema.validate(document, schema)
    else:
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
