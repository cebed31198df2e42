"""What the tests share: the stack's address and keys (set by sdks/sdk/test/python.test.ts),
a person answering on the answer page, and a counting proxy. The agent adapters' tests
(sdks/agents-python) use it too."""

from __future__ import annotations

import http.server
import json
import os
import threading
import urllib.error
import urllib.request
from typing import Any, Callable, TypeVar

from herald_sdk import Herald, HeraldError
from herald_sdk.types import AskRecord

T = TypeVar("T")

#: A Cedar policy with one plain permit and one that needs a person.
POLICY = """
@id("read-anything")
permit(principal, action, resource) when { resource.name == "read_file" };

@id("deploy-reviewed")
@requires_human
permit(principal, action, resource) when { resource.name == "deploy" };
"""


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run these tests through their driver (sdks/sdk/test/python.test.ts, sdks/agents-python/test/agents-python.test.ts)")
    return value


def client(key_variable: str = "HERALD_API_KEY", base_url: str | None = None) -> Herald:
    return Herald(env(key_variable), base_url or env("HERALD_URL"))


def person_answers(record: AskRecord, answer: str) -> None:
    """A person answers on the answer page's JSON endpoint (what a notification action does)."""
    answer_page(record["liveUrl"], answer)


def answer_page(page_url: str, answer: str) -> None:
    """Answers the question behind an answer page link (an ask's liveUrl, a decision's decisionPageUrl)."""
    token = page_url[page_url.index("/a/") + 3 :]
    request = urllib.request.Request(
        f"{env('HERALD_URL')}/api/v1/answer/{token}", data=json.dumps({"answer": answer}).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def raised(error_class: type[HeraldError], call: Callable[[], object]) -> Any:
    """The error a call raises, checked to be of the class (Any: each test reads the subclass's fields)."""
    try:
        call()
    except HeraldError as err:
        if not isinstance(err, error_class):
            raise AssertionError(f"expected {error_class.__name__}, got {type(err).__name__}: {err}") from err
        return err
    raise AssertionError(f"expected {error_class.__name__}, but the call succeeded")


def in_background(call: Callable[[], T]) -> Callable[[], T]:
    """Runs a blocking call in a thread; the returned function joins it and gives its result."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # handed to the joining thread
            outcome["error"] = err

    thread = threading.Thread(target=target)
    thread.start()

    def join() -> T:
        thread.join(120)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]  # type: ignore[no-any-return]

    return join


class CountingProxy:
    """A plain HTTP proxy in front of a gateway that records every request: the SDK's retries would show here."""

    def __init__(self, target: str) -> None:
        self.requests: list[str] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self) -> None:
                proxy.requests.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {name: value for name, value in self.headers.items() if name.lower() not in ("host", "connection")}
                request = urllib.request.Request(f"{target}{self.path}", data=body, headers=headers, method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=60) as answer:
                        status, answer_headers, payload = answer.status, answer.headers, answer.read()
                except urllib.error.HTTPError as error:
                    status, answer_headers, payload = error.code, error.headers, error.read()
                self.send_response(status)
                for name, value in answer_headers.items():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
