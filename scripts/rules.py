"""Rule workloads beside the papers' generators of :mod:`scripts.workloads`.

* EventBridge-like events (nested JSON, a ``resources`` array) and EventBridge patterns of
  1 to 4 fields (OR-lists, ``prefix``, ``anything-but``, ``exists``,
  ``equals-ignore-case``): :func:`make_events`, :func:`make_rules`, the workload of
  ``scripts.bench.quamina``; :func:`eventbridge` is the same as a :class:`Workload`.
* OpIndex's Fig. 14 (operators ``=`` and prefix only): :func:`prefix_workload`.
"""

from __future__ import annotations

import random
from typing import Any

import orjson

from matchers.events import flatten
from matchers.expr import And, Pred, Subscription, pred
from matchers.language import parse_record
from scripts.draws import Workload

REGIONS = ["us-east-1", "us-east-2", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1",
           "ap-northeast-1", "sa-east-1", "ca-central-1"]
SOURCES = ["aws.ec2", "aws.s3", "aws.lambda", "aws.rds", "aws.ecs", "aws.autoscaling", "aws.cloudtrail",
           "aws.health", "aws.iam", "aws.sns", "custom.orders", "custom.payments"]
DETAIL_TYPES = ["EC2 Instance State-change Notification", "EC2 Spot Instance Interruption Warning",
                "Object Created", "Object Deleted", "Lambda Function Invocation Result", "RDS DB Instance Event",
                "ECS Task State Change", "EC2 Instance Launch Successful", "AWS API Call via CloudTrail",
                "AWS Health Event", "Order Placed", "Payment Settled"]
STATES = ["pending", "running", "stopping", "stopped", "shutting-down", "terminated"]
TYPES = ["t3.micro", "t3.small", "t3.large", "m5.large", "m5.xlarge", "c6g.medium", "r6i.2xlarge", "g5.xlarge"]
ENVS = ["prod", "Prod", "PROD", "staging", "dev", "test"]
ACCOUNTS = [f"{100000000000 + 7919 * i:012d}" for i in range(40)]


def _event(rng: random.Random, i: int) -> dict:
    region, account, source = rng.choice(REGIONS), rng.choice(ACCOUNTS), rng.choice(SOURCES)
    instance = f"i-{rng.getrandbits(64):016x}"
    service = source.split(".")[1]
    resources = [f"arn:aws:{service}:{region}:{account}:instance/{instance}"]
    if rng.random() < 0.25:
        resources.append(f"arn:aws:{service}:{region}:{account}:volume/vol-{rng.getrandbits(48):012x}")
    return {
        "version": "0",
        "id": f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-{rng.getrandbits(16):04x}-"
              f"{rng.getrandbits(16):04x}-{rng.getrandbits(48):012x}",
        "detail-type": rng.choice(DETAIL_TYPES),
        "source": source,
        "account": account,
        "time": f"2026-11-24T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
        "region": region,
        "resources": resources,
        "detail": {
            "instance-id": instance,
            "availability-zone": region + rng.choice("abc"),
            "state": rng.choice(STATES),
            "instance-type": rng.choice(TYPES),
            "cpu-utilization": round(rng.uniform(0, 100), 1),
            "launch-index": rng.randrange(16),
            "private-ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "tags": {"env": rng.choice(ENVS), "team": f"team-{rng.randrange(60)}",
                     "owner": f"user{rng.randrange(500)}@example.com"},
            **({"spot": True} if rng.random() < 0.2 else {}),
        },
    }


def make_events(n: int, seed: int) -> list[bytes]:
    """``n`` EventBridge-like events as JSON bytes (compact, as a producer writes them)."""
    rng = random.Random(seed)
    return [orjson.dumps(_event(rng, i)) for i in range(n)]


SELECTIVE = (0, 1, 3, 6, 7, 8, 9)
"""Kinds of field a pattern starts with (the others, broad, only come after one of these)."""


def _field(rng: random.Random, kind: int) -> tuple[tuple[str, ...], list]:
    """One field of a pattern: its path and its array of values or matchers."""
    if kind == 0:
        return ("source",), rng.sample(SOURCES, rng.randint(1, 3))
    if kind == 1:
        return ("detail-type",), [{"prefix": rng.choice(DETAIL_TYPES)[:rng.randint(3, 12)]}]
    if kind == 2:
        return ("region",), [{"anything-but": rng.sample(REGIONS, rng.randint(1, 4))}]
    if kind == 3:
        return ("detail", "state"), rng.sample(STATES, rng.randint(1, 2))
    if kind == 4:
        return ("detail", "tags", "env"), [{"equals-ignore-case": rng.choice(["prod", "staging", "DEV"])}]
    if kind == 5:
        return ("detail", "spot"), [{"exists": rng.random() < 0.5}]
    if kind == 6:
        return ("account",), rng.sample(ACCOUNTS, rng.randint(1, 3))
    if kind == 7:
        return ("detail", "tags", "team"), [f"team-{rng.randrange(60)}"]
    if kind == 8:
        return ("resources",), [{"prefix": f"arn:aws:{rng.choice(SOURCES).split('.')[1]}:{rng.choice(REGIONS)}"}]
    return ("detail", "instance-type"), rng.sample(TYPES, rng.randint(1, 3))


BROAD = (2, 5)
"""Kinds of field ``anything-but`` and ``exists`` (left out by ``native_only``)."""


def make_rules(n: int, seed: int, native_only: bool = False) -> list[dict]:
    """``n`` subscription records ``{"id": "r<i>", "rule": pattern}`` of 1 to 4 fields
    (``native_only``: without ``anything-but`` and ``exists``, the tests of presence states,
    :mod:`matchers.presence`)."""
    rng = random.Random(seed + 1)
    kinds = [k for k in range(10) if not (native_only and k in BROAD)]
    out = []
    for i in range(n):
        rule: dict = {}
        for j in range(rng.randint(1, 4)):
            path, values = _field(rng, rng.choice(SELECTIVE) if j == 0 else rng.choice(kinds))
            node = rule
            for part in path[:-1]:
                node = node.setdefault(part, {})
            node[path[-1]] = values
        out.append({"id": f"r{i}", "rule": rule})
    return out


def eventbridge(n_subs: int, n_events: int, seed: int = 0) -> Workload:
    """EventBridge-like rules (OR-lists, ``prefix``, ``anything-but``, ``exists``,
    ``equals-ignore-case``) over nested events: the rules of :func:`make_rules` and :func:`make_events`."""
    subs = [parse_record(dict(r)) for r in make_rules(n_subs, seed)]
    events: list[Any] = [flatten(orjson.loads(raw)) for raw in make_events(n_events, seed)]  # rows where arrays
    return Workload(subs, events)


def prefix_workload(n_subs: int, n_events: int, share: float, length: int, seed: int = 0) -> Workload:
    """Fig. 14: 10,000 numeric and 100 string attributes, operators ``=`` and prefix only.

    A subscription has 1 to 4 predicates; each is a prefix of ``length`` characters of
    a word on a string attribute with probability ``share``, else ``=`` on a numeric
    attribute (σ = 50).  An event has 20 attributes, 2 of them strings holding words.
    Words are drawn from a fixed pseudo-word vocabulary (the paper used Wikipedia's).
    """
    rnd = random.Random(seed)
    syllables = ("ka", "lo", "tri", "vo", "nex", "ar", "mi", "qu", "sol", "ra", "tek", "on", "lu", "fy", "ze",
                 "bri", "do", "pe", "st", "an")
    vocab = sorted({"".join(rnd.choice(syllables) for _ in range(rnd.randint(2, 5))) for _ in range(20_000)})
    nums = [f"n{i}" for i in range(10_000)]
    strs = [f"w{i}" for i in range(100)]
    subs = []
    for i in range(n_subs):
        chosen: dict[str, Pred] = {}
        for _ in range(rnd.randint(1, 4)):
            if rnd.random() < share:
                attr = rnd.choice(strs)
                chosen.setdefault(attr, pred(attr, "prefix", rnd.choice(vocab)[:length]))
            else:
                attr = rnd.choice(nums)
                chosen.setdefault(attr, pred(attr, "=", rnd.randint(1, 50)))
        parts = tuple(chosen.values())
        subs.append(Subscription.of(f"p{i}", parts[0] if len(parts) == 1 else And(parts)))
    events = []
    for _ in range(n_events):
        event: dict = {nums[a]: float(rnd.randint(1, 50)) for a in rnd.sample(range(10_000), 18)}
        event.update({strs[a]: rnd.choice(vocab) for a in rnd.sample(range(100), 2)})
        events.append(event)
    return Workload(subs, events)
