"""What the adapters' suites share: the policy, a ledger of the tools that really ran, a client
that hands the test every question it asks, and a way to expire a decision now (the driver,
test/agents-python.test.ts, sets the environment). The SDK's own test support does the rest."""

from __future__ import annotations

import json
import queue
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping

from herald_sdk import Herald
from herald_sdk.types import AskRecord, AskRequest, Decision, DecisionRequest
from support import env

#: deploy needs a person; read_status is allowed; delete_service is forbidden.
POLICY = """
@id("status-is-fine")
permit(principal, action, resource) when { resource.name == "read_status" };

@id("deploys-are-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy" };

@id("nothing-is-deleted")
forbid(principal, action, resource) when { resource.name == "delete_service" };
"""

#: The arguments the scripted models call deploy with.
DEPLOY_ARGUMENTS: dict[str, object] = {"service": "api", "replicas": 3, "regions": ["eu", "us"]}

#: What the model is given of a deploy a person approved through the answer link.
APPROVED_DEPLOY = json.dumps({"approval": "Approved by the holder of the answer link.", "result": "deploy done"})


class Ledger:
    """The calls the tools' own code made: the proof that a tool ran, with which arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def record(self, tool_name: str, arguments: Mapping[str, Any]) -> str:
        self.calls.append((tool_name, dict(arguments)))
        return f"{tool_name} done"


class WatchedHerald(Herald):
    """The real client, also handing every question it asks and every decision it opens to the
    test (the person's side needs their links; the test checks a resumed run found the same decision)."""

    def __init__(self, api_key: str, base_url: str) -> None:
        super().__init__(api_key, base_url)
        self.asked: queue.Queue[AskRecord] = queue.Queue()
        self.decisions: list[Decision] = []
        self.opened: queue.Queue[Decision] = queue.Queue()

    def ask(self, question: AskRequest, *, timeout: float | None = None) -> AskRecord:
        record = super().ask(question, timeout=timeout)
        self.asked.put(record)
        return record

    def create_decision(self, decision: DecisionRequest, *, idempotency_key: str | None = None, timeout: float | None = None) -> Decision:
        opened = super().create_decision(decision, idempotency_key=idempotency_key, timeout=timeout)
        self.decisions.append(opened)
        self.opened.put(opened)
        return opened


def next_question(client: WatchedHerald, running: Callable[[], object]) -> AskRecord:
    """The next question the client asks while an agent runs (``running`` joins the run: its own
    error is raised if it ended without asking)."""
    try:
        return client.asked.get(timeout=30)
    except queue.Empty:
        running()
        raise


def herald() -> WatchedHerald:
    return WatchedHerald(env("HERALD_API_KEY"), env("HERALD_URL"))


def reviewer() -> tuple[str, Herald]:
    """Another API key of the workspace: its key id (to name it an approver, ``{"kind": "key",
    "id": ...}``) and a client answering with it."""
    return env("HERALD_REVIEWER_KEY_ID"), Herald(env("HERALD_REVIEWER_API_KEY"), env("HERALD_URL"))


def link_answer_status(page_url: str, answer: str) -> int:
    """The holder of the link the caller got answers on the answer page's JSON endpoint; the
    status (a 403 is checked to be in the error shape, code forbidden)."""
    token = page_url[page_url.index("/a/") + 3 :]
    request = urllib.request.Request(
        f"{env('HERALD_URL')}/api/v1/answer/{token}", data=json.dumps({"answer": answer}).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        if err.code == 403:
            assert json.loads(err.read())["code"] == "forbidden"
        return err.code


def broken_herald() -> Herald:
    """A gateway whose policy service is down: /authorize answers 503."""
    return Herald(env("HERALD_API_KEY"), env("HERALD_BROKEN_URL"))


def expire(decision_id: str) -> None:
    """Makes a decision expire now (through the driver: a decision lives at least 60 s)."""
    request = urllib.request.Request(f"{env('HERALD_CONTROL_URL')}/expire/{decision_id}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 204
