"""Keeps the fuzzer from holding calls open: a wait lasts up to 55 s and only burns the time budget.

Waiting itself is tested in gateway/test/ask.test.ts and decisions.test.ts.
"""
import schemathesis

HOLDING = {("POST", "/api/v1/server/ask"), ("POST", "/api/v1/server/decisions")}
WAITING_READS = {("GET", "/api/v1/server/ask/{correlationId}"), ("GET", "/api/v1/server/decisions/{decisionId}")}


@schemathesis.hook
def map_case(context, case):
    key = (case.method.upper(), case.path)
    if key in HOLDING and isinstance(case.body, dict):
        case.body["wait"] = False
    if key in WAITING_READS and isinstance(case.query, dict):
        case.query.pop("wait", None)
    return case
