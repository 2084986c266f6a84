"""The Helm chart's values.schema.json and its values.yaml, walked together so that the two cannot drift: every
value of values.yaml is described by the schema, and every setting of the chart's own the schema names is in
values.yaml. Read as files, without Helm: tests/deploy/test_helm.py has real Helm refuse wrong values with it.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml

from testkit.bot_harness import REPO

CHART = REPO / "deploy" / "helm" / "animebot"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
# JSON Schema draft-07's keywords (Helm reads the schema as draft-07): a misspelt one ("minimun") would be
# ignored by Helm, checking nothing.
DRAFT_07 = {
    "$schema", "$id", "$ref", "$comment", "title", "description", "default", "examples", "readOnly", "writeOnly",
    "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "items", "additionalItems",
    "maxItems", "minItems", "uniqueItems", "contains", "maxProperties", "minProperties", "required", "properties",
    "patternProperties", "additionalProperties", "dependencies", "propertyNames", "if", "then", "else", "allOf",
    "anyOf", "oneOf", "not", "definitions",
}


def resolved(node: dict[str, Any]) -> dict[str, Any]:
    """A schema node, or the definition its ``$ref`` names."""
    if "$ref" not in node:
        return node
    prefix = "#/definitions/"
    assert node["$ref"].startswith(prefix), node["$ref"]
    return resolved(SCHEMA["definitions"][node["$ref"][len(prefix):]])


def child(node: dict[str, Any], key: str) -> dict[str, Any] | None:
    """The schema of ``key`` in an object ``node`` describes: its own property, else any property's."""
    node = resolved(node)
    if key in node.get("properties", {}):
        return dict(node["properties"][key])
    extra = node.get("additionalProperties", True)
    return dict(extra) if isinstance(extra, dict) else None


def undescribed(value: Any, node: dict[str, Any], path: str) -> Iterator[str]:
    """The keys under ``path`` of values.yaml the schema does not describe, with what it lacks."""
    if not (node.get("description") or resolved(node).get("description")):
        yield f"{path or '(the values)'}: no description"
    if isinstance(value, dict):
        for key, item in value.items():
            below = child(node, key)
            if below is None:
                yield f"{path}.{key}: not in the schema"
            else:
                yield from undescribed(item, below, f"{path}.{key}".lstrip("."))


def unlisted(value: Any, node: dict[str, Any], path: str) -> Iterator[str]:
    """The chart's own settings in the schema that values.yaml lacks. The chart's own objects are written out in
    place; a ``$ref`` is a Kubernetes shape (resources, a securityContext), whose fields values.yaml need not all set."""
    if "$ref" in node or not isinstance(value, dict):
        return
    for key, below in node.get("properties", {}).items():
        if key == "global" and not path:
            continue  # Helm's, for a chart used as a dependency
        if key not in value:
            yield f"{path}.{key}".lstrip(".")
        else:
            yield from unlisted(value[key], below, f"{path}.{key}".lstrip("."))


def keywords(node: Any) -> Iterator[str]:
    """Every keyword the schema uses, wherever it is."""
    if not isinstance(node, dict):
        return
    yield from node
    for named in ("properties", "patternProperties", "definitions"):
        for below in node.get(named, {}).values():
            yield from keywords(below)
    for one in ("items", "additionalProperties", "additionalItems", "not", "propertyNames", "contains", "if", "then",
                "else"):
        yield from keywords(node.get(one))
    for many in ("allOf", "anyOf", "oneOf"):
        for below in node.get(many, ()):
            yield from keywords(below)


def test_every_value_in_values_yaml_is_described_by_the_schema() -> None:
    assert list(undescribed(VALUES, SCHEMA, "")) == []


def test_every_setting_the_schema_names_is_in_values_yaml() -> None:
    assert list(unlisted(VALUES, SCHEMA, "")) == []


def test_the_chart_s_own_objects_take_no_unknown_key() -> None:
    """``additionalProperties: false`` on each object the chart defines, so that a misspelt key is refused."""
    def open_objects(node: dict[str, Any], path: str) -> Iterator[str]:
        if "$ref" in node or node.get("type") != "object" or path.endswith("global"):
            return
        if "properties" in node and node.get("additionalProperties") is not False:
            yield path or "(the values)"
        for key, below in node.get("properties", {}).items():
            yield from open_objects(below, f"{path}.{key}".lstrip("."))
    assert list(open_objects(SCHEMA, "")) == []


def test_the_schema_is_draft_07_in_keywords_helm_reads() -> None:
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert set(keywords(SCHEMA)) <= DRAFT_07, set(keywords(SCHEMA)) - DRAFT_07
