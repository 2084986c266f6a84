"""The operator's kit under deploy/, checked as the tools an operator runs would check it: Prometheus's
``promtool`` on the alert rules (their syntax, and each alert firing on the series it is meant for),
the Kubernetes manifests against their schemas (``kubernetes-validate``, offline, and KEDA's
ScaledObject against the schema kept beside them), and every metric the alerts and the Grafana
dashboard name is one the bot exports. Nothing here needs ../shared, Redis or a network.

The same files against a running bot (its live ``/metrics``, Prometheus scraping it) are in
tests/deploy/test_operator_kit.py.
"""
from __future__ import annotations

import asyncio
import json
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.drawing.pool import Pool
from bot.service import metrics
from storage.database import Database
from bot.service.config import Config, WorkerConfig, env_name
from testkit.bot_harness import REPO
from testkit.kubernetes import KUBERNETES, custom_schema, manifests, validate

DEPLOY = REPO / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "rules"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "animebot.json"
# A metric of ours inside a PromQL expression, with the suffixes a histogram's series carry.
METRIC = re.compile(r"\banimebot_[a-z_]+\b")
SERIES_SUFFIXES = ("_bucket", "_count", "_sum")


def promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    done = subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    return said


def dashboard_queries() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel.get("targets", ())]


class ScaledOut(Pool):
    """Just enough of a scaled-out pool for the metrics to export what a scaled-out bot exports."""

    def __init__(self) -> None:
        super().__init__(queue_size=10, timeout_s=60)

    async def start(self) -> None: ...
    async def close(self) -> None: ...

    @property
    def size(self) -> int:
        return 2

    @property
    def running(self) -> int:
        return 0

    def healthy(self) -> tuple[bool, str]:
        return True, "two workers"

    def broker_reachable(self) -> bool | None:
        return True

    def workers(self) -> list[Any]:
        return []

    def drawing(self) -> list[Any]:
        return []


def exported_names() -> set[str]:
    """The names in the bot's /metrics page, as a scaled-out bot serves it."""
    async def page_of_a_bot() -> str:
        with tempfile.TemporaryDirectory() as home:
            db = await Database.open(Path(home) / "bot.db")
            metrics.watch(ScaledOut(), db)
            page = metrics.exposition().decode()
            await db.close()
            return page

    page = asyncio.run(page_of_a_bot())
    return {line.split()[2] for line in page.splitlines() if line.startswith("# TYPE ")} | {
        re.split(r"[{ ]", line)[0] for line in page.splitlines() if line and not line.startswith("#")}


def test_the_alert_rules_pass_promtool_and_each_alert_fires_on_what_it_is_meant_for() -> None:
    # Every file in rules/ is a rule file (what prometheus.yml loads), and no rule file is elsewhere.
    yamls = {str(p.relative_to(PROMETHEUS)): yaml.safe_load(p.read_text()) for p in PROMETHEUS.rglob("*.yml")}
    assert sorted(name for name, doc in yamls.items() if "groups" in doc) == ["rules/animebot.rules.yml"]
    assert "SUCCESS: 8 rules found" in promtool("check", "rules", *sorted(str(p) for p in RULES.glob("*")))
    alerts = {rule["alert"] for group in yamls["rules/animebot.rules.yml"]["groups"] for rule in group["rules"]}
    # What the issue asks for, plus the bot itself gone (which silences every other alert), an
    # embedded bot short of drawing processes, and a database that refuses writes.
    assert alerts == {"AnimebotDown", "AnimebotNoWorkerOnline", "AnimebotQueueGrowing", "AnimebotJobsFailing",
                      "AnimebotSlowWait", "AnimebotBrokerUnreachable", "AnimebotDatabaseUnwritable",
                      "AnimebotUnhealthy"}
    fired = {check["alertname"] for case in yamls["tests/animebot.test.yml"]["tests"]
             for check in case.get("alert_rule_test", ()) if check.get("exp_alerts")}
    assert fired == alerts  # every alert is shown firing, not only parsed
    promtool("test", "rules", "tests/animebot.test.yml")


def test_the_compose_prometheus_config_passes_promtool_and_scrapes_the_port_the_bot_serves() -> None:
    assert "is valid prometheus config file syntax" in promtool("check", "config", "prometheus.yml")
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    port = compose["services"]["animebot"]["environment"]["ANIMEBOT_METRICS_PORT"]
    assert targets == [f"animebot:{port.rsplit('-', 1)[-1].rstrip('}')}"], (targets, port)


def test_every_metric_the_alerts_and_the_dashboard_read_is_one_the_bot_exports() -> None:
    exported = exported_names()
    rules = [yaml.safe_load(p.read_text()) for p in RULES.glob("*.yml")]
    queries = [rule["expr"] for doc in rules for group in doc["groups"] for rule in group["rules"]] + dashboard_queries()
    named = {name for query in queries for name in METRIC.findall(query)}
    assert named, queries
    assert named <= exported, sorted(named - exported)
    # A counter's rate is read from its _total series; its bare name would match nothing.
    bare = {line.split()[2].removesuffix("_total") for line in metrics.exposition().decode().splitlines()
            if line.startswith("# TYPE ") and line.endswith(" counter")}
    assert not named & bare, sorted(named & bare)


def test_the_bot_s_metric_names_follow_prometheus_s_conventions() -> None:
    exported = exported_names()
    page = metrics.exposition().decode()
    types = dict(line.split()[2:4] for line in page.splitlines() if line.startswith("# TYPE "))
    for name, kind in types.items():
        assert name.startswith("animebot_"), name
        if kind == "counter":
            assert name.endswith("_total"), name
        if kind == "histogram":
            assert name.endswith("_seconds"), name  # durations in base units
    assert not any(name.endswith("_created") for name in exported)
    labels = set(re.findall(r"[{,](\w+)=", page))
    assert labels <= {"outcome", "result", "le"}, labels  # outcomes and results: never a user or a chat


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """promtool parses a PromQL expression in a rule file only: each query becomes a recording rule."""
    queries = dashboard_queries()
    board = json.loads(DASHBOARD.read_text())
    assert len(queries) >= 10 and board["uid"] == "animebot"
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": q}
                                                        for i, q in enumerate(queries)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    assert f"SUCCESS: {len(queries)} rules found" in promtool("check", "rules", "dashboard.yml", cwd=tmp_path)
    # Each panel asks the data source the provisioning file names (or the board's own variable for it).
    provisioned = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text())
    variables = {v["name"] for v in board["templating"]["list"] if v["type"] == "datasource"}
    uids = {source["uid"] for source in provisioned["datasources"]} | {f"${{{v}}}" for v in variables}
    for panel in board["panels"]:
        if panel.get("targets"):
            assert panel["datasource"]["uid"] in uids, panel["title"]


def test_the_kubernetes_manifests_validate_against_their_schemas() -> None:
    pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed "
                        "(pip install kubernetes-validate)")
    jsonschema = pytest.importorskip("jsonschema")
    kinds = []
    for name, document in manifests():
        kinds.append(document["kind"])
        validate(document)  # KEDA's ScaledObject against the schema kept beside the manifests
    assert sorted(kinds) == ["Deployment", "Deployment", "Deployment", "Namespace", "PersistentVolumeClaim",
                             "ScaledObject", "Service", "Service"]
    # The schema is strict: a misspelt field, which KEDA would ignore without a word, is refused.
    scaled = next(doc for _, doc in manifests() if doc["kind"] == "ScaledObject")
    assert custom_schema(scaled) is not None
    with pytest.raises(jsonschema.ValidationError):
        validate({**scaled, "spec": {**scaled["spec"], "minReplicas": 1}})


def test_kubernetes_wires_the_bot_the_workers_and_keda_to_each_other() -> None:
    """What no schema sees: the names the objects find each other by."""
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for _, doc in manifests()}
    bot = objects["Deployment", "animebot"]["spec"]["template"]
    worker = objects["Deployment", "animebot-worker"]
    scaled = objects["ScaledObject", "animebot-worker"]["spec"]
    assert scaled["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    query = scaled["triggers"][0]["metadata"]["query"]
    assert set(METRIC.findall(query)) <= exported_names(), query  # the bot's queue, not Redis's list
    assert objects["Deployment", "animebot"]["spec"]["replicas"] == 1  # one journal, one bot
    port = bot["metadata"]["annotations"]["prometheus.io/port"]
    env = {e["name"]: e.get("value") for e in bot["spec"]["containers"][0]["env"]}
    assert env["ANIMEBOT_METRICS_PORT"] == port
    probes = bot["spec"]["containers"][0]
    assert probes["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert probes["livenessProbe"]["httpGet"]["path"] == "/livez"  # red while the journal cannot be written
    redis_service = objects["Service", "redis"]["spec"]
    redis_port = redis_service["ports"][0]["port"]
    for deployment in (bot, worker["spec"]["template"]):
        env = {e["name"]: e for e in deployment["spec"]["containers"][0]["env"]}
        assert env["ANIMEBOT_BROKER_URL"]["value"] == f"redis://:$(REDIS_PASSWORD)@redis:{redis_port}/0"
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "animebot-secrets"
    generated = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["secretGenerator"]
    assert [g["name"] for g in generated] == ["animebot-secrets"]


def test_the_compose_monitoring_profile_mounts_what_deploy_ships_where_each_tool_reads_it() -> None:
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    watching = {name for name, service in services.items() if "monitoring" in service.get("profiles", ())}
    assert watching == {"prometheus", "grafana", "flower"}
    mounts = {name: dict(v.split(":")[:2] for v in services[name].get("volumes", ()) if v.startswith("./"))
              for name in watching}
    for name, pairs in mounts.items():
        for source in pairs:
            assert (REPO / source).is_dir(), (name, source)
    assert mounts["prometheus"] == {"./deploy/prometheus": "/etc/prometheus"}
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/animebot.yml").read_text())
    assert mounts["grafana"] == {"./deploy/grafana/provisioning": "/etc/grafana/provisioning",
                                 "./deploy/grafana/dashboards": provider["providers"][0]["options"]["path"]}
    assert services["flower"]["environment"]["CELERY_BROKER_URL"] == "${ANIMEBOT_BROKER_URL:-}"
    for name in watching:  # each tool listens on this host's loopback only
        assert all(port.startswith("127.0.0.1:") for port in services[name]["ports"]), name


def test_the_compose_local_api_profile_hands_the_bot_its_files_where_its_getfile_says_they_are() -> None:
    """The server keeps the files it hands out under its working folder and gives their absolute paths: the
    bot must mount that volume at the same path (read-only), and start without the profile as well."""
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    server, bot = services["telegram-bot-api"], services["animebot"]
    assert server["profiles"] == ["local-api"] and server["environment"]["TELEGRAM_LOCAL"] == "1"
    work_dir = "/var/lib/telegram-bot-api"  # the image's TELEGRAM_WORK_DIR, its --dir
    assert f"telegram-bot-api-data:{work_dir}" in server["volumes"]
    assert f"telegram-bot-api-data:{work_dir}:ro" in bot["volumes"] and "telegram-bot-api-data" in compose["volumes"]
    assert bot["depends_on"]["telegram-bot-api"]["required"] is False
    assert not {k for k in bot["environment"] if k.startswith("TELEGRAM_API_ID") or k.startswith("TELEGRAM_API_HASH")}
    assert set(server["environment"]) == {"TELEGRAM_API_ID", "TELEGRAM_API_HASH", "TELEGRAM_LOCAL"}


def test_compose_requires_nothing_up_front_but_the_token() -> None:
    """Compose reads every service's ${...} before it picks the profiles, so a ${X:?} in a profile's
    service would stop a plain ``docker compose up`` that never starts it."""
    text = (REPO / "docker-compose.yml").read_text()
    required = re.findall(r"(?<!\$)\$\{(\w+):?\?", text)
    assert required == ["TELEGRAM_BOT_TOKEN"], required


def entrypoint(service: str, tmp_path: Path, stand_ins: dict[str, str], **env: str) -> tuple[int, str]:
    """A service's entrypoint script from docker-compose.yml, run by sh as the container would run it
    (``$$`` is Compose's escape for ``$``), with the image's program replaced by a stand-in that
    prints what it was given."""
    argv = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"][service]["entrypoint"]
    assert argv[:2] == ["sh", "-c"]
    script = argv[2].replace("$$", "$")
    for program, name in stand_ins.items():
        stand_in = tmp_path / name
        stand_in.write_text('#!/bin/sh\necho "started $0 $* auth=$FLOWER_BASIC_AUTH"\n')
        stand_in.chmod(0o755)
        script = re.sub(rf"\bexec {re.escape(program)}(?=\s|$)", f"exec {stand_in}", script)
    done = subprocess.run(["sh", "-c", script], env={"PATH": f"{tmp_path}:/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=30)
    return done.returncode, (done.stdout + done.stderr).strip()


def test_grafana_and_flower_refuse_to_start_without_their_passwords(tmp_path: Path) -> None:
    run_sh = {"/run.sh": "run.sh"}
    assert entrypoint("grafana", tmp_path, run_sh, GF_SECURITY_ADMIN_PASSWORD="") == \
        (1, "set GRAFANA_PASSWORD in .env")
    assert entrypoint("grafana", tmp_path, run_sh, GF_SECURITY_ADMIN_PASSWORD="s3cret")[0] == 0
    celery = {"celery": "celery"}
    url = "redis://:pw@redis:6379/0"
    assert entrypoint("flower", tmp_path, celery, CELERY_BROKER_URL=url, FLOWER_PASSWORD="") == \
        (1, "set FLOWER_PASSWORD in .env")
    code, said = entrypoint("flower", tmp_path, celery, CELERY_BROKER_URL=url, FLOWER_PASSWORD="s3cret")
    assert (code, said.split()[-1]) == (0, "auth=admin:s3cret"), said
    # An embedded bot has no broker: Flower says why it stops, and exits cleanly (not restarted).
    code, said = entrypoint("flower", tmp_path, celery, CELERY_BROKER_URL="", FLOWER_PASSWORD="s3cret")
    assert code == 0 and said.startswith("no ANIMEBOT_BROKER_URL") and "started" not in said, said


def dockerfile_env() -> dict[str, str]:
    text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    return {key: value for line in text.splitlines() if line.startswith("ENV ")
            for key, value in (item.split("=", 1) for item in shlex.split(line[4:]))}


def test_compose_gives_each_service_only_the_settings_it_reads() -> None:
    """The bot gets every setting it reads, by name, and no other service's password; a worker gets no token.
    (A whole .env passed to the bot, as env_file did, put Redis's, Grafana's and Flower's passwords in it.)"""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    read = {env_name(field, info) for model in (Config, WorkerConfig) for field, info in model.model_fields.items()}
    image_only = {"ANIMEBOT_BAKED_MODELS"}  # where the image's baked models are: the image's own setting
    bot = services["animebot"]
    assert "env_file" not in bot
    assert set(bot["environment"]) == read - image_only - {"ANIMEBOT_WORKER_CONCURRENCY"}
    worker = services["worker"]
    assert "env_file" not in worker and not {k for k in worker["environment"] if k.startswith("TELEGRAM")}
    # The image's list of models to install, which a bare name in Compose's environment would hide.
    assert bot["environment"]["ANIMEBOT_WEIGHTS"] == f"${{ANIMEBOT_WEIGHTS:-{dockerfile_env()['ANIMEBOT_WEIGHTS']}}}"
