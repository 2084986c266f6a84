"""The rollout settings fit the upgrade docs/scaling-out.md prescribes ("Upgrading": the workers first, then
the bot), in each way of deploying: docker-compose.yml, deploy/kubernetes (Kustomize) and the Helm chart.

What is checked is relations, each side read from the files as Compose, Kubernetes or Helm would read them,
or from the bot's own settings and code where the files leave a setting to its default:

- one bot at a time, ever: two would poll one token and share one SQLite home (Kubernetes' ``Recreate``);
- the bot's grace period, from SIGTERM to SIGKILL, is longer than its stop wait (ANIMEBOT_STOP_WAIT, the
  photos being drawn finishing) and the time its own drawing processes then get to stop;
- workers replaced without a gap (a new one ready before an old one stops), each with a grace period
  longer than the job timeout, so that a worker told to stop finishes the photo it draws.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from bot.drawing.local.pool import STOP_TIMEOUT_S
from bot.service.config import Config, Shared
from testkit import helm
from testkit.bot_harness import REPO
from testkit.kubernetes import manifests

CHART = REPO / "deploy" / "helm" / "animebot"
STOP_WAIT_S = Config.model_fields["stop_wait_s"].default
JOB_TIMEOUT_S = Shared.model_fields["job_timeout_s"].default
# The chart's values for a scaled-out bot, its token and Redis's password given: the chart refuses less.
SCALED_OUT = {"token": {"value": "123456:a-token"}, "workers": {"replicas": 2}, "redis": {"password": "aRedisPassword0"}}


@dataclass(frozen=True)
class Rollout:
    """What replacing the bot and the workers does, as one way of deploying them says it."""

    bots_at_once: int  # bots that may run at once while the bot is replaced
    bot_grace_s: int  # from SIGTERM to SIGKILL
    stop_wait_s: int  # ANIMEBOT_STOP_WAIT as the bot gets it
    workers_surge: int  # new workers that may start before old ones stop
    workers_down: int  # workers that may be stopped before their replacements are ready
    worker_grace_s: int
    job_timeout_s: int  # ANIMEBOT_JOB_TIMEOUT as the workers get it


def of_kubernetes(objects: dict[tuple[str, str], dict[str, Any]]) -> Rollout:
    bot, worker = objects["Deployment", "animebot"]["spec"], objects["Deployment", "animebot-worker"]["spec"]
    bot_surge, _ = _rolling(bot)
    surge, down = _rolling(worker)
    return Rollout(bot.get("replicas", 1) + bot_surge, bot["template"]["spec"]["terminationGracePeriodSeconds"],
                   int(_env(bot).get("ANIMEBOT_STOP_WAIT", STOP_WAIT_S)), surge, down,
                   worker["template"]["spec"]["terminationGracePeriodSeconds"],
                   int(_env(worker).get("ANIMEBOT_JOB_TIMEOUT", JOB_TIMEOUT_S)))


def _rolling(spec: dict[str, Any]) -> tuple[int, int]:
    """A Deployment's (maxSurge, maxUnavailable) as pods, for its replicas (KEDA's least, 1, where it sets
    them); Recreate stops every old pod before it starts a new one. Kubernetes' defaults: 25% each."""
    strategy = spec.get("strategy", {"type": "RollingUpdate"})
    replicas = spec.get("replicas", 1)
    if strategy["type"] == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate", {})

    def pods(value: int | str, rounding: Any) -> int:
        return value if isinstance(value, int) else rounding(replicas * int(value.rstrip("%")) / 100)
    return pods(rolling.get("maxSurge", "25%"), math.ceil), pods(rolling.get("maxUnavailable", "25%"), math.floor)


def _env(spec: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in spec["template"]["spec"]["containers"][0]["env"] if "value" in e}


def of_compose() -> Rollout:
    """Compose replaces a container by stopping it, then starting the new one; the workers' surge is the
    routine's (docs/scaling-out.md: new workers added beside the old, then the old ones removed)."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    bot, worker = services["animebot"], services["worker"]
    bots = max(bot.get("scale", 1), bot.get("deploy", {}).get("replicas", 1))
    return Rollout(bots, _seconds(bot["stop_grace_period"]), int(bot["environment"]["ANIMEBOT_STOP_WAIT"] or STOP_WAIT_S),
                   1, 0, _seconds(worker["stop_grace_period"]),
                   int(worker["environment"]["ANIMEBOT_JOB_TIMEOUT"] or JOB_TIMEOUT_S))


def _seconds(duration: str) -> int:
    """A Compose duration such as ``1m30s``."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts is not None and duration, duration
    return int(parts.group(1) or 0) * 60 + int(parts.group(2) or 0)


def chart(values: dict[str, Any]) -> tuple[dict[tuple[str, str], dict[str, Any]], str | None]:
    """The chart's objects by kind and name, rendered by real Helm in its helper process, or its refusal."""
    if (why := helm.unavailable()) is not None:
        pytest.skip(why)
    rendered, refused = helm.render(CHART, values, "animebot", "animebot")
    documents = [d for path, text in rendered.items() if path.endswith(".yaml") for d in yaml.safe_load_all(text) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in documents}, refused


def rollout_of(way: str) -> Rollout:
    if way == "compose":
        return of_compose()
    if way == "kustomize":
        return of_kubernetes({(doc["kind"], doc["metadata"]["name"]): doc for _, doc in manifests()})
    objects, refused = chart(SCALED_OUT)
    assert refused is None, refused
    return of_kubernetes(objects)


@pytest.mark.parametrize("way", ["compose", "kustomize", "helm"])
def test_the_bot_is_replaced_never_doubled_and_the_workers_without_a_gap(way: str) -> None:
    rollout = rollout_of(way)
    assert rollout.bots_at_once == 1
    assert rollout.bot_grace_s > rollout.stop_wait_s + STOP_TIMEOUT_S
    assert rollout.workers_down == 0 and rollout.workers_surge >= 1
    assert rollout.worker_grace_s > rollout.job_timeout_s


def test_the_chart_refuses_a_bot_grace_period_that_leaves_no_time_to_close() -> None:
    """Longer than the stop wait is not enough: after it the bot's drawing processes get their time to stop."""
    def bot(grace: int) -> dict[str, Any]:
        return {**SCALED_OUT, "bot": {"stopWait": STOP_WAIT_S, "terminationGracePeriodSeconds": grace}}
    _, refused = chart(bot(STOP_WAIT_S + int(STOP_TIMEOUT_S)))
    assert refused is not None and f"must be more than {STOP_TIMEOUT_S:g} s longer than bot.stopWait" in refused, refused
    objects, refused = chart(bot(STOP_WAIT_S + int(STOP_TIMEOUT_S) + 1))
    assert refused is None and of_kubernetes(objects).bot_grace_s == STOP_WAIT_S + STOP_TIMEOUT_S + 1
