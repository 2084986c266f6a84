"""The Helm chart deploy/helm/animebot, rendered and linted by real Helm (helm-python-sdk embeds Helm v4:
no helm binary, no cluster, no network) for every combination of values docs/operations.md documents,
each object validated as tests/deploy/test_deploy.py validates deploy/kubernetes's, and kept in step with
deploy/kubernetes: rendered with the values that kustomization amounts to, it makes the same objects.
"""
from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from testkit.bot_harness import REPO
from testkit import helm
from testkit.kubernetes import KUBERNETES, manifests, validate

if (_why := helm.unavailable()) is not None:
    pytest.skip(_why, allow_module_level=True)

CHART = REPO / "deploy" / "helm" / "animebot"
RELEASE = "animebot"
TOKEN = "123456:a-token-that-must-never-be-a-plain-value"
REDIS_PASSWORD = "aRedisPasswordNeverAPlainValue0"  # letters and digits: it goes into a URL
WEBAPP = "https://bot.example.com/app"
EXTERNAL_REDIS = "rediss://redis.example.com:6380/2"
# The Secret deploy/kubernetes/secrets.env makes (`kubectl create secret generic ... --from-env-file`).
SECRET = "animebot-secrets"
Objects = dict[tuple[str, str], dict[str, Any]]


def render(values: dict[str, Any]) -> Objects:
    """The objects Helm renders from the chart with ``values``, by kind and name."""
    rendered, refused = helm.render(CHART, values, RELEASE, "animebot")
    assert refused is None, refused
    objects: Objects = {}
    for path, text in rendered.items():
        if path.endswith(".yaml"):
            for document in yaml.safe_load_all(text):
                if document is not None:
                    key = (document["kind"], document["metadata"]["name"])
                    assert key not in objects, key
                    objects[key] = document
    return objects


def refusal(values: dict[str, Any]) -> str:
    """What Helm says when the chart refuses ``values``."""
    _, refused = helm.render(CHART, values, RELEASE, "animebot")
    assert refused is not None, "Helm rendered values it should refuse"
    return refused


def pods(objects: Objects) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each Deployment's name and its pod spec."""
    for (kind, name), document in objects.items():
        if kind == "Deployment":
            yield name, document["spec"]["template"]["spec"]


def env(objects: Objects, deployment: str) -> dict[str, dict[str, Any]]:
    """The first container's env of a Deployment, by name."""
    spec = objects["Deployment", deployment]["spec"]["template"]["spec"]
    return {e["name"]: e for e in spec["containers"][0]["env"]}


def secret_data(objects: Objects, name: str) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in objects["Secret", name]["data"].items()}


def redis_objects(objects: Objects) -> set[tuple[str, str]]:
    return {key for key in objects if "redis" in key[1] and key[0] in ("Deployment", "Service")}


# Each documented combination: its values, and what an operator would see of it.
def embedded(objects: Objects) -> None:
    assert set(objects) == {("PersistentVolumeClaim", "animebot-data"), ("Deployment", "animebot"),
                            ("Service", "animebot"), ("Secret", "animebot")}
    bot = env(objects, "animebot")
    assert "ANIMEBOT_BROKER_URL" not in bot and "REDIS_PASSWORD" not in bot  # the bot draws itself
    assert bot["TELEGRAM_BOT_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "animebot", "key": "TELEGRAM_BOT_TOKEN"}
    assert secret_data(objects, "animebot") == {"TELEGRAM_BOT_TOKEN": TOKEN}
    container = objects["Deployment", "animebot"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["memory"] == "1400Mi"  # room for its own drawing process
    volume = objects["Deployment", "animebot"]["spec"]["template"]["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"]["claimName"] == "animebot-data"
    # `helm uninstall` leaves the journal and users' settings.
    assert objects["PersistentVolumeClaim", "animebot-data"]["metadata"]["annotations"] == \
        {"helm.sh/resource-policy": "keep"}


def existing_secret(objects: Objects) -> None:
    assert not [key for key in objects if key[0] == "Secret"]  # the chart makes none
    bot = env(objects, "animebot")
    assert bot["TELEGRAM_BOT_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == SECRET
    # The Mini App's address too, when secrets.env has one, as deploy/kubernetes reads it.
    assert bot["ANIMEBOT_WEBAPP_URL"]["valueFrom"]["secretKeyRef"] == \
        {"name": SECRET, "key": "ANIMEBOT_WEBAPP_URL", "optional": True}


def three_workers_and_the_chart_s_redis(objects: Objects) -> None:
    worker = objects["Deployment", "animebot-worker"]
    assert worker["spec"]["replicas"] == 3
    assert worker["spec"]["template"]["spec"]["containers"][0]["args"] == ["worker"]
    assert redis_objects(objects) == {("Deployment", "animebot-redis"), ("Service", "animebot-redis")}
    for name in ("animebot", "animebot-worker"):
        pod_env = env(objects, name)
        assert pod_env["ANIMEBOT_BROKER_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@animebot-redis:6379/0"
        assert pod_env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "animebot", "key": "REDIS_PASSWORD"}
    assert env(objects, "animebot-redis")["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "animebot"
    assert objects["Service", "animebot-redis"]["spec"]["ports"][0]["port"] == 6379
    assert secret_data(objects, "animebot") == {"TELEGRAM_BOT_TOKEN": TOKEN, "REDIS_PASSWORD": REDIS_PASSWORD}
    bot = objects["Deployment", "animebot"]["spec"]["template"]["spec"]["containers"][0]
    assert bot["resources"]["requests"]["memory"] == "256Mi"  # it draws nothing now


def two_workers_and_an_external_redis(objects: Objects) -> None:
    assert objects["Deployment", "animebot-worker"]["spec"]["replicas"] == 2
    assert redis_objects(objects) == set()
    for name in ("animebot", "animebot-worker"):
        pod_env = env(objects, name)
        assert pod_env["ANIMEBOT_BROKER_URL"]["value"] == "rediss://:$(REDIS_PASSWORD)@redis.example.com:6380/2"
        assert pod_env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "REDIS_PASSWORD"}


def keda(objects: Objects) -> None:
    scaled = objects["ScaledObject", "animebot-worker"]["spec"]
    worker = objects["Deployment", "animebot-worker"]["spec"]
    assert scaled["scaleTargetRef"] == {"name": "animebot-worker"}
    assert "replicas" not in worker  # KEDA's: an upgrade must not put them back
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (1, 10)
    assert scaled["triggers"][0]["metadata"]["query"] == "sum(animebot_queue_photos) + sum(animebot_running_photos)"


def mini_app_and_ingress(objects: Objects) -> None:
    assert env(objects, "animebot")["ANIMEBOT_WEBAPP_URL"] == {"name": "ANIMEBOT_WEBAPP_URL", "value": WEBAPP}
    ingress = objects["Ingress", "animebot"]["spec"]
    assert ingress["ingressClassName"] == "nginx"
    assert ingress["tls"] == [{"secretName": "animebot-tls", "hosts": ["bot.example.com"]}]
    (rule,) = ingress["rules"]
    assert rule["host"] == "bot.example.com"  # from the Mini App's address
    # Only /app reaches the bot from outside: never /metrics.
    assert [(p["path"], p["backend"]["service"]) for p in rule["http"]["paths"]] == \
        [("/app", {"name": "animebot", "port": {"name": "http"}})]
    service_ports = {p["name"] for p in objects["Service", "animebot"]["spec"]["ports"]}
    assert "http" in service_ports


def service_monitor(objects: Objects) -> None:
    monitor = objects["ServiceMonitor", "animebot"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"  # the operator's selector, from values
    service = objects["Service", "animebot"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]} and endpoint["path"] == "/metrics"


def placement_and_resources(objects: Objects) -> None:
    bot, worker = (dict(pods(objects))[name] for name in ("animebot", "animebot-worker"))
    assert bot["nodeSelector"] == {"kubernetes.io/arch": "amd64"}
    assert worker["nodeSelector"] == {"pool": "drawing"}  # the workers' own wins
    assert bot["tolerations"] == worker["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert worker["containers"][0]["resources"] == {"requests": {"cpu": "4", "memory": "2600Mi"},
                                                    "limits": {"memory": "4Gi"}}
    assert [c["image"] for c in bot["containers"] + worker["containers"]] == ["ghcr.io/me/animebot:0.2.0"] * 2
    assert env(objects, "animebot-worker")["ANIMEBOT_WORKER_CONCURRENCY"]["value"] == "2"


def no_persistence(objects: Objects) -> None:
    assert not [key for key in objects if key[0] == "PersistentVolumeClaim"]
    assert dict(pods(objects))["animebot"]["volumes"] == [{"name": "data", "emptyDir": {}}]


COMBINATIONS: dict[str, tuple[dict[str, Any], Callable[[Objects], None]]] = {
    "defaults": ({"token": {"value": TOKEN}}, embedded),
    "an existing Secret": ({"token": {"existingSecret": SECRET}}, existing_secret),
    "3 workers, the chart's Redis": ({"token": {"value": TOKEN}, "workers": {"replicas": 3},
                                      "redis": {"password": REDIS_PASSWORD}},
                                     three_workers_and_the_chart_s_redis),
    "2 workers, redis.url": ({"token": {"existingSecret": SECRET}, "workers": {"replicas": 2},
                              "redis": {"url": EXTERNAL_REDIS}}, two_workers_and_an_external_redis),
    "KEDA": ({"token": {"existingSecret": SECRET}, "workers": {"replicas": 1}, "keda": {"enabled": True}}, keda),
    "the Mini App and an Ingress": ({"token": {"value": TOKEN}, "webapp": {"url": WEBAPP}, "ingress": {
        "enabled": True, "className": "nginx", "tls": [{"secretName": "animebot-tls", "hosts": ["bot.example.com"]}]}},
        mini_app_and_ingress),
    "a ServiceMonitor": ({"token": {"value": TOKEN}, "metrics": {"serviceMonitor": {
        "enabled": True, "labels": {"release": "prometheus"}}}}, service_monitor),
    "placement, resources, image": ({
        "token": {"value": TOKEN}, "image": {"repository": "ghcr.io/me/animebot", "tag": "0.2.0"},
        "nodeSelector": {"kubernetes.io/arch": "amd64"}, "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        "workers": {"replicas": 2, "concurrency": 2, "nodeSelector": {"pool": "drawing"},
                    "resources": {"requests": {"cpu": "4", "memory": "2600Mi"}, "limits": {"memory": "4Gi"}}},
        "redis": {"password": REDIS_PASSWORD}}, placement_and_resources),
    "no persistence": ({"token": {"value": TOKEN}, "persistence": {"enabled": False}}, no_persistence),
}


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_each_combination_lints_clean_validates_and_does_what_it_says(combination: str) -> None:
    pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (pip install -e '.[test]')")
    values, check = COMBINATIONS[combination]
    report = helm.lint(CHART, values, "animebot")
    # Info only (Chart.yaml has no icon): no warning, no error.
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report
    objects = render(values)
    for document in objects.values():
        validate(document)
    check(objects)
    secrets_kept_secret(objects)


def secrets_kept_secret(objects: Objects) -> None:
    """The token and Redis's password reach a pod only through a Secret, never as a plain value, and
    appear in no object at all (the chart's Secret holds them base64-encoded)."""
    assert TOKEN not in yaml.safe_dump(list(objects.values()))
    assert REDIS_PASSWORD not in yaml.safe_dump(list(objects.values()))
    for name, spec in pods(objects):
        for container in spec["containers"]:
            for variable in container.get("env", ()):
                if variable["name"] in ("TELEGRAM_BOT_TOKEN", "REDIS_PASSWORD"):
                    assert set(variable) == {"name", "valueFrom"}, (name, variable)
                    assert set(variable["valueFrom"]) == {"secretKeyRef"}, (name, variable)
    bot = env(objects, "animebot")
    assert {name for name, spec in pods(objects) if any(
        e["name"] == "TELEGRAM_BOT_TOKEN" for c in spec["containers"] for e in c.get("env", ()))} == {"animebot"}
    assert "TELEGRAM_BOT_TOKEN" in bot  # the workers never hold the token


def documented_commands() -> list[str]:
    """The ``helm install`` and ``helm upgrade`` commands in docs/operations.md's Helm section."""
    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index("\n## Helm\n"):]
    section = section[:section.index("\n## ", 1)]
    joined = section.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if re.match(r"\s*helm (install|upgrade) ", line)]


def test_every_helm_command_in_the_docs_renders_on_top_of_the_install_before_it() -> None:
    """Each documented command, its ``--set``s applied as Helm applies them (``--reuse-values``: on top
    of the release's values so far), renders a chart that lints clean and validates."""
    pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed (pip install -e '.[test]')")
    commands = documented_commands()
    assert len(commands) >= 5, commands
    assert commands[0].startswith("helm install ")
    values: dict[str, Any] = {}
    for command in commands:
        words = shlex.split(command)
        assert words[2:4] == [RELEASE, "deploy/helm/animebot"], command
        if words[1] == "install" or "--reuse-values" not in words:
            values = {}
        for flag, expression in zip(words, words[1:]):
            if flag == "--set":
                values = merged(values, helm.parse_set_string(expression))
        report = helm.lint(CHART, values, "animebot")
        assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], (command, report)
        for document in render(values).values():
            validate(document)
    assert values["keda"]["enabled"] is True


def merged(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in more.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def test_an_upgrade_takes_the_workers_first_then_the_bot() -> None:
    """docs/operations.md's two steps: the workers of the new release beside the old bot, then the bot."""
    before = {"token": {"existingSecret": SECRET}, "image": {"tag": "0.1.0"}, "workers": {"replicas": 2}}
    first = merged(before, {"workers": {"imageTag": "0.2.0"}})
    second = merged(first, {"image": {"tag": "0.2.0"}, "workers": {"imageTag": ""}})

    def images(values: dict[str, Any]) -> dict[str, str]:
        return {name: spec["containers"][0]["image"].rsplit(":", 1)[1]
                for name, spec in pods(render(values)) if name != "animebot-redis"}
    assert images(before) == {"animebot": "0.1.0", "animebot-worker": "0.1.0"}
    assert images(first) == {"animebot": "0.1.0", "animebot-worker": "0.2.0"}
    assert images(second) == {"animebot": "0.2.0", "animebot-worker": "0.2.0"}


@pytest.mark.parametrize(("values", "said"), [
    ({}, "set token.existingSecret (a Secret holding the token) or token.value"),
    ({"token": {"value": TOKEN}, "keda": {"enabled": True}}, "keda.enabled needs workers.replicas > 0"),
    ({"token": {"value": TOKEN}, "workers": {"replicas": 1}, "redis": {"url": "redis://:pw@redis.example.com:6379/0"}},
     "redis.url must not hold the password"),
    ({"token": {"value": TOKEN}, "workers": {"replicas": 1}, "redis": {"url": "http://redis.example.com"}},
     "redis.url must be a redis:// or rediss:// URL"),
    ({"token": {"value": TOKEN}, "bot": {"stopWait": 90}}, "must be more than 10 s longer than bot.stopWait"),
    ({"token": {"value": TOKEN}, "workers": {"replicas": 1}, "env": {"ANIMEBOT_JOB_TIMEOUT": "300"}},
     "must be longer than ANIMEBOT_JOB_TIMEOUT"),
    ({"token": {"value": TOKEN}, "bot": {"env": {"TELEGRAM_BOT_TOKEN": TOKEN}}},
     "TELEGRAM_BOT_TOKEN is set by the chart"),
    ({"token": {"value": TOKEN}, "ingress": {"enabled": True}}, "ingress.enabled needs ingress.host"),
    ({"token": {"value": TOKEN}, "workers": {"replicas": 1}}, "set redis.password"),
    ({"token": {"value": TOKEN}, "workers": {"replicas": 1}, "redis": {"password": "p@ss:word"}},
     "redis.password must be letters and digits only"),
    ({"token": {"value": TOKEN}, "webapp": {"url": "http://bot.example.com/app"}}, "webapp.url must start with https://"),
], ids=["no token", "KEDA with no workers", "a password in redis.url", "not a Redis URL", "grace shorter than the stop wait",
        "grace shorter than a job", "the token as a plain env", "an Ingress with no host", "no Redis password",
        "a Redis password a URL would break", "a Mini App not on https"])
def test_the_chart_refuses_what_would_not_work_in_one_sentence(values: dict[str, Any], said: str) -> None:
    message = refusal(values)
    assert said in message, message
    assert TOKEN not in message


@pytest.mark.parametrize(("typed", "pointer", "said"), [
    ("workers.replicas=-1", "/workers/replicas", "minimum: got -1, want 0"),
    ("workers.replicas=three", "/workers/replicas", "got string, want integer"),
    ("worker.replicas=2", "", "additional properties 'worker' not allowed"),
    ("keda.enabled=yes", "/keda/enabled", "got string, want boolean"),
    ("bot.stopwait=90", "/bot", "additional properties 'stopwait' not allowed"),
    ("persistence.size=20", "/persistence/size", "got number, want string"),
    ("nodeSelector.gpu=true", "/nodeSelector/gpu", "got boolean, want string"),
    ("ingress.paths={/}", "/ingress/paths/0", "does not match pattern"),
], ids=["negative workers", "workers in words", "a misspelt top-level key", "a boolean in words", "a misspelt key",
        "a size without its unit", "a label that is not a string", "an Ingress for every path, /metrics too"])
def test_helm_refuses_a_mistyped_value_by_the_chart_s_schema_naming_it(typed: str, pointer: str, said: str) -> None:
    """An operator's ``--set`` (parsed as Helm parses it) on top of values that work: Helm refuses it by
    values.schema.json, in the render (install, upgrade, template) and in lint, naming the value and what is
    wrong. Without the schema each rendered something other than asked: no workers for -1 or "three" (the
    templates' ``int``), nothing for a misspelt key, KEDA on for any string, 20 bytes of volume."""
    values = merged({"token": {"value": TOKEN}}, helm.parse_set_string(typed))
    message = refusal(values)
    assert "values don't meet the specifications of the schema" in message, message
    assert [line for line in message.splitlines() if line.startswith(f"- at '{pointer}': ") and said in line], message
    assert [error for error in helm.lint(CHART, values, "animebot")["errors"] if said in error]


def test_the_schema_leaves_a_missing_token_to_the_template_s_sentence() -> None:
    """values.yaml's defaults meet the schema as they are (`helm lint deploy/helm/animebot` passes): a release
    without a token is refused at install by the template, in its sentence naming both ways, not by the schema."""
    report = helm.lint(CHART, {}, "animebot")
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report
    message = refusal({})
    assert "schema" not in message and "set token.existingSecret" in message, message


def kustomize_as_the_chart_names_it(document: dict[str, Any]) -> dict[str, Any]:
    """A deploy/kubernetes object as the chart, released as "animebot", names it: Redis's objects get the
    release's prefix, and the image is the kustomization's ``images:``."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in kustomization["images"]}
    renamed = {"redis": "animebot-redis"}

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, dict):
            return {k: walk(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str):
            if key == "app.kubernetes.io/name":
                return renamed.get(node, node)
            if key == "image":
                return images.get(node, node)
            return node.replace("@redis:", "@animebot-redis:")
        return node
    out = walk(document)
    out["metadata"]["name"] = renamed.get(out["metadata"]["name"], out["metadata"]["name"])
    return dict(out)


def as_kustomize_writes_it(document: dict[str, Any]) -> dict[str, Any]:
    """A chart object without what only Helm adds: its release's labels (kept: the name label), and
    its instructions to Helm (the volume kept on uninstall)."""
    def strip(labels: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in labels.items() if k == "app.kubernetes.io/name"}
    out = yaml.safe_load(yaml.safe_dump(document))
    out["metadata"].pop("labels", None)
    kept = {k: v for k, v in out["metadata"].pop("annotations", {}).items() if not k.startswith("helm.sh/")}
    if kept:
        out["metadata"]["annotations"] = kept
    spec = out.get("spec", {})
    if "selector" in spec and "matchLabels" in spec["selector"]:
        spec["selector"]["matchLabels"] = strip(spec["selector"]["matchLabels"])
        spec["template"]["metadata"]["labels"] = strip(spec["template"]["metadata"]["labels"])
    if out["kind"] == "Service":
        spec["selector"] = strip(spec["selector"])
    return dict(out)


def test_the_chart_makes_deploy_kubernetes_s_objects_from_the_values_it_amounts_to() -> None:
    """deploy/kubernetes is the chart with an existing Secret (secrets.env's), scaled out, with KEDA: rendered
    so, the chart makes the same objects, field for field (containers, env, probes, ports, volumes,
    securityContext, rollout, KEDA's trigger), but for the release's labels and Redis's name. A change to
    one that the other lacks fails here."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    chart = render({"token": {"existingSecret": kustomization["secretGenerator"][0]["name"]},
                    "image": {"repository": image["newName"], "tag": image["newTag"]},
                    "workers": {"replicas": 1}, "keda": {"enabled": True}})
    ours = {key: as_kustomize_writes_it(doc) for key, doc in chart.items()}
    theirs = {}
    for _, document in manifests():
        if document["kind"] != "Namespace":  # Helm's --namespace (--create-namespace) makes it
            document = kustomize_as_the_chart_names_it(document)
            theirs[document["kind"], document["metadata"]["name"]] = document
    assert sorted(ours) == sorted(theirs)
    for key, document in theirs.items():
        assert flat(ours[key]) == flat(document), key


def flat(node: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of an object by its path (``spec.template.spec.containers.0.env.3.value``): a
    difference is shown as the fields that differ."""
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in flat(value, f"{path}.{key}").items()} or {path: {}}
    if isinstance(node, list):
        return {k: v for i, value in enumerate(node) for k, v in flat(value, f"{path}.{i}").items()} or {path: []}
    return {path.lstrip("."): node}


def test_the_chart_s_release_is_the_package_s() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = (REPO / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', project, re.M)
    assert version is not None
    assert chart["appVersion"] == version[1]
