"""Every endpoint of the Python client once, with exact results, against the running system."""

from __future__ import annotations

import re
import time
import unittest
import uuid

from herald_sdk import ConflictError, Herald, NotFoundError, PermissionError, ValidationError
from herald_sdk.types import AnsweredBy, Approver, DecisionRequest, EscalationStep
from support import POLICY, client, env, raised


class AccountTest(unittest.TestCase):
    def test_identity_site_channels_machines(self) -> None:
        herald = client()
        identity = herald.get_identity()
        site = herald.get_site()
        self.assertEqual(identity["site"], site)
        self.assertEqual(site["id"], env("HERALD_SITE_ID"))
        self.assertEqual(site["domain"], "shop.example.test")
        self.assertEqual(
            identity["plan"],
            {"name": "growth", "active": True, "apiAccess": True, "partner": False, "rateLimitPerMinute": 500, "monthlyNotificationAllowance": 500_000},
        )
        self.assertEqual((identity["key"]["origin"], identity["key"]["boundExternalId"]), ("dashboard", None))
        self.assertTrue(env("HERALD_API_KEY").startswith(f"pk_{identity['key']['id']}."))
        # Without arguments the client reads HERALD_API_KEY and HERALD_URL.
        self.assertEqual(Herald().get_site(), site)
        self.assertEqual(
            herald.get_channels(),
            {
                "keyOwner": {"externalId": "owner", "nativeAppDevices": 0, "browserSubscriptions": 0, "reachable": False},
                "site": {"nativeAppDevices": 0, "browserSubscriptions": 2},
            },
        )
        machine = herald.report_machine({"machineId": "py-box-1", "name": "Python box", "platform": "linux"})
        self.assertEqual(
            {**machine, "firstSeenAt": "", "lastSeenAt": ""},
            {"id": "py-box-1", "name": "Python box", "platform": "linux", "keyId": identity["key"]["id"], "firstSeenAt": "", "lastSeenAt": ""},
        )
        self.assertIn(machine, herald.list_machines())


class SendTest(unittest.TestCase):
    def test_send_with_idempotency_key_then_the_notification_and_recipients(self) -> None:
        herald = client()
        key = f"py-send-{uuid.uuid4()}"
        sent = herald.send({"title": "Hello", "body": "From Python"}, idempotency_key=key)
        self.assertRegex(sent["campaignId"], r"^ntf_")
        self.assertEqual(sent["sent"], 2)
        self.assertEqual((sent["success"], sent["status"], sent["duplicate"], sent["limits"]["limit"]), (True, "queued", False, 500_000))
        self.assertEqual(herald.send({"title": "Hello", "body": "From Python"}, idempotency_key=key), {**sent, "duplicate": True})
        raised(ConflictError, lambda: herald.send({"title": "Changed", "body": "From Python"}, idempotency_key=key))

        deadline = time.monotonic() + 20
        notification = herald.get_notification(sent["campaignId"])
        while notification["status"] != "completed" and time.monotonic() < deadline:
            time.sleep(0.1)
            notification = herald.get_notification(sent["campaignId"])
        self.assertEqual(notification["counts"], {"targeted": 2, "queued": 2, "delivered": 2, "failed": 0, "expired": 0, "pending": 0})
        self.assertEqual((notification["title"], notification["body"], notification["url"]), ("Hello", "From Python", None))
        ids = sorted(env("HERALD_SUBSCRIBER_IDS").split(","))
        first = herald.list_notification_recipients(sent["campaignId"], limit=1, status="delivered")
        self.assertEqual(([r["subscriberId"] for r in first["data"]], first["hasMore"]), (ids[:1], True))
        second = herald.list_notification_recipients(sent["campaignId"], limit=1, cursor=first["nextCursor"])
        self.assertEqual(([r["subscriberId"] for r in second["data"]], second["hasMore"], second["nextCursor"]), (ids[1:], False, None))


class SubscriberTest(unittest.TestCase):
    def test_list_count_get_patch_delete(self) -> None:
        herald = client()
        ids = env("HERALD_SUBSCRIBER_IDS").split(",")
        page = herald.list_subscribers(limit=1)
        self.assertEqual(([s["id"] for s in page["data"]], page["hasMore"]), ([ids[1]], True))
        rest = herald.list_subscribers(limit=1, cursor=page["nextCursor"])
        self.assertEqual([s["id"] for s in rest["data"]], [ids[0]])
        self.assertEqual([s["id"] for s in herald.list_subscribers(external_id="user-1", status="active")["data"]], [ids[1]])
        counts = herald.count_subscribers()
        self.assertEqual(counts, {"total": 2, "active": 2, "unsubscribed": 0})

        detail = herald.get_subscriber(ids[0])
        self.assertEqual((detail["externalId"], detail["tags"], detail["delivery"]["reachable"]), ("user-0", [], True))
        updated = herald.update_subscriber(ids[0], {"tags": ["vip"], "customData": {"tier": "gold"}})
        self.assertEqual((updated["tags"], updated["customData"], updated["externalId"]), (["vip"], {"tier": "gold"}, "user-0"))
        self.assertEqual([s["id"] for s in herald.list_subscribers(tags=["vip"])["data"]], [ids[0]])
        restored = herald.update_subscriber(ids[0], {"tags": []})
        self.assertEqual(restored["tags"], [])
        self.assertEqual(herald.get_subscriber(ids[0]), restored)

    def test_delete_and_not_found(self) -> None:
        herald = client("HERALD_ASK_KEY")
        error = raised(NotFoundError, lambda: herald.delete_subscriber("sub_unknown"))
        self.assertEqual((error.status, error.code), (404, "not_found"))
        # Another workspace's subscriber is 404 too.
        raised(NotFoundError, lambda: herald.get_subscriber(env("HERALD_SUBSCRIBER_IDS").split(",")[0]))


class CampaignTest(unittest.TestCase):
    def test_templates_and_campaigns(self) -> None:
        herald = client()
        template = herald.create_template({"name": "Welcome", "title": "Hello {{name|friend}}", "body": "Thanks for joining"})
        self.assertEqual((template["name"], template["actionUrl"]), ("Welcome", None))
        self.assertEqual(herald.update_template(template["id"], {"body": "Welcome aboard"})["body"], "Welcome aboard")
        self.assertEqual([t["id"] for t in herald.list_templates(limit=1)["data"]], [template["id"]])
        self.assertEqual(herald.get_template(template["id"])["body"], "Welcome aboard")

        campaign = herald.create_campaign({"name": "Onboarding", "templateId": template["id"], "variables": {"name": "Ada"}})
        self.assertEqual((campaign["status"], campaign["title"], campaign["body"]), ("draft", "Hello Ada", "Welcome aboard"))
        self.assertEqual(herald.update_campaign(campaign["id"], {"name": "Onboarding v2"})["name"], "Onboarding v2")
        sending = herald.send_campaign(campaign["id"])
        self.assertEqual((sending["status"], sending["totalTargeted"]), ("sending", 2))
        error = raised(ConflictError, lambda: herald.resume_campaign(campaign["id"]))
        self.assertEqual((error.status, error.code), (409, "conflict"))
        deadline = time.monotonic() + 20
        stats = herald.get_campaign_stats(campaign["id"])
        while stats["totalSent"] < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
            stats = herald.get_campaign_stats(campaign["id"])
        self.assertEqual(stats, {"totalSent": 2, "totalDelivered": 0, "totalClicked": 0, "totalFailed": 0, "deliveryRate": 0, "clickRate": 0})
        series = herald.get_campaign_stats_series(campaign["id"], "hour")
        self.assertEqual((series["bucket"], sum(bucket["sent"] for bucket in series["data"])), ("hour", 2))

        slow = herald.create_campaign({"name": "Slow", "title": "t", "body": "b", "throttlePerMinute": 1})
        herald.send_campaign(slow["id"])
        self.assertEqual(herald.pause_campaign(slow["id"])["status"], "paused")
        self.assertEqual(herald.resume_campaign(slow["id"])["status"], "active")
        later = herald.create_campaign({"name": "Later", "title": "Soon", "body": "Tomorrow", "scheduledAt": "2099-01-01T09:00:00Z"})
        self.assertEqual(later["status"], "scheduled")
        self.assertEqual([c["id"] for c in herald.list_campaigns(limit=1)["data"]], [later["id"]])
        self.assertEqual(herald.get_campaign(later["id"])["name"], "Later")
        herald.delete_campaign(later["id"])
        raised(NotFoundError, lambda: herald.get_campaign(later["id"]))
        herald.delete_template(template["id"])
        raised(NotFoundError, lambda: herald.get_template(template["id"]))


class SegmentTest(unittest.TestCase):
    def test_segments(self) -> None:
        herald = client()
        identified = herald.create_segment({"name": "Identified", "filter": {"hasExternalId": True, "status": ["active"]}})
        self.assertEqual((identified["name"], identified["filter"]), ("Identified", {"hasExternalId": True, "status": ["active"]}))
        nobody = herald.create_segment({"name": "Nobody", "filter": {"tags": {"all": ["nobody"]}}})
        page = herald.list_segments(limit=1)
        self.assertEqual(([s["id"] for s in page["data"]], page["hasMore"]), ([nobody["id"]], True))
        self.assertEqual(herald.get_segment(identified["id"]), identified)
        # Every subscriber of this workspace has an externalId (other tests may remove some).
        active = herald.count_subscribers()["active"]
        self.assertEqual(herald.count_segment(identified["id"]), {"active": active, "total": active})
        self.assertEqual(herald.count_segment(nobody["id"]), {"active": 0, "total": 0})
        renamed = herald.update_segment(nobody["id"], {"name": "No one"})
        self.assertEqual((renamed["name"], renamed["filter"]), ("No one", {"tags": {"all": ["nobody"]}}))
        campaign = herald.create_campaign({"name": "Identified only", "title": "t", "body": "b", "segmentId": identified["id"]})
        self.assertEqual(campaign["segmentId"], identified["id"])
        invalid = raised(ValidationError, lambda: herald.create_segment({"name": "Bad", "filter": {"country": ["fr"]}}))
        self.assertEqual([f["field"] for f in invalid.fields], ["filter.country.0"])
        herald.delete_segment(nobody["id"])
        raised(NotFoundError, lambda: herald.count_segment(nobody["id"]))


class FlowTest(unittest.TestCase):
    def test_flows(self) -> None:
        herald = client()
        empty = herald.create_flow({"name": "Empty", "triggerType": "subscription"})
        self.assertEqual((empty["status"], empty["steps"], empty["executionCount"]), ("draft", [], 0))
        error = raised(ConflictError, lambda: herald.activate_flow(empty["id"]))
        self.assertEqual((error.status, error.code), (409, "conflict"))
        invalid = raised(ValidationError, lambda: herald.create_flow({"name": "Bad", "triggerType": "subscription", "steps": [{"stepType": "delay", "config": {"delay": {"value": 0, "unit": "days"}}}]}))
        self.assertEqual(invalid.fields, [{"field": "steps[0].config.delay.value", "in": "body", "problem": "must be greater than 0"}])

        welcome = herald.create_flow(
            {
                "name": "Welcome",
                "triggerType": "subscription",
                "steps": [
                    {"stepType": "send_notification", "config": {"notification": {"title": "Welcome", "body": "Glad you are here"}}},
                    {"stepType": "delay", "config": {"delay": {"value": 1, "unit": "days"}}},
                    {"stepType": "exit", "config": {}},
                ],
            }
        )
        self.assertEqual([step["stepType"] for step in welcome["steps"]], ["send_notification", "delay", "exit"])
        self.assertEqual(herald.activate_flow(welcome["id"])["status"], "active")
        self.assertEqual([flow["id"] for flow in herald.list_flows(status="active")["data"]], [welcome["id"]])
        self.assertEqual(herald.list_flow_runs(welcome["id"]), {"data": [], "hasMore": False, "nextCursor": None})
        self.assertEqual(herald.update_flow(welcome["id"], {"name": "Welcome v2"})["name"], "Welcome v2")
        self.assertEqual(herald.pause_flow(welcome["id"])["status"], "paused")
        self.assertEqual(herald.get_flow(welcome["id"])["status"], "paused")
        herald.delete_flow(welcome["id"])
        raised(NotFoundError, lambda: herald.get_flow(welcome["id"]))
        herald.delete_flow(empty["id"])


class PolicyTest(unittest.TestCase):
    def test_policy_and_authorize(self) -> None:
        herald = client("HERALD_PARTNER_KEY")
        self.assertEqual(herald.get_policy(), {"policy": None, "version": 0, "updatedAt": None})
        put = herald.put_policy(POLICY)
        self.assertEqual((put["policy"], put["version"]), (POLICY, 1))
        self.assertEqual(herald.get_policy(), put)
        allow = herald.authorize({"toolName": "read_file", "toolTarget": "README.md"})
        self.assertRegex(allow["authorizationId"], r"^authz_")
        self.assertEqual({**allow, "authorizationId": ""}, {"verdict": "allow", "policy": "read-anything", "reason": "permitted by policy read-anything", "authorizationId": ""})
        self.assertEqual(herald.authorize({"toolName": "deploy", "parameters": {"replicas": 3}})["verdict"], "requires_human")
        self.assertEqual(herald.authorize({"toolName": "rm_rf"})["verdict"], "deny")
        invalid = raised(ValidationError, lambda: herald.put_policy("permit(principal, action, resource) when { nonsense };"))
        self.assertEqual(invalid.body["error"], "Invalid policy")
        deleted = herald.delete_policy()
        self.assertEqual((deleted["policy"], deleted["version"]), (None, 2))
        herald.put_policy(POLICY)
        # Past versions and try-it (nothing recorded).
        newest = herald.list_policy_versions(limit=2)
        self.assertEqual(([version["version"] for version in newest["data"]], newest["hasMore"]), ([3, 2], True))
        oldest = herald.list_policy_versions(cursor=newest["nextCursor"])
        self.assertEqual(([version["version"] for version in oldest["data"]], oldest["nextCursor"]), ([1], None))
        self.assertEqual((herald.get_policy_version(2)["policy"], herald.get_policy_version(3)["policy"]), (None, POLICY))
        self.assertEqual(herald.evaluate_policy({"toolName": "read_file"}), {"verdict": "allow", "policy": "read-anything", "reason": "permitted by policy read-anything", "version": 3})
        self.assertEqual(herald.evaluate_policy({"toolName": "read_file", "policy": "forbid(principal, action, resource);"})["verdict"], "deny")
        self.assertEqual(raised(ValidationError, lambda: herald.evaluate_policy({"toolName": "x", "policy": "permit("})).body["error"], "Invalid policy")


class KeysTest(unittest.TestCase):
    def test_create_list_revoke_and_enroll(self) -> None:
        herald = client("HERALD_PARTNER_KEY")
        end_user = f"py-{uuid.uuid4()}"
        created = herald.create_key({"externalId": end_user, "name": "Py agent", "expiresInSeconds": 3_600})
        self.assertRegex(created["apiKey"], rf"^pk_{created['key']['id']}\.[A-Za-z0-9_-]{{43}}$")
        self.assertEqual(
            {**created["key"], "createdAt": "", "expiresAt": ""},
            {"id": created["key"]["id"], "name": "Py agent", "externalId": end_user, "createdAt": "", "lastUsedAt": None, "expiresAt": "", "revoked": False, "revokedAt": None},
        )
        self.assertEqual(herald.list_keys(external_id=end_user), [created["key"]])
        self.assertIn(created["key"]["id"], [key["id"] for key in herald.list_keys()])

        bound = Herald(created["apiKey"], env("HERALD_URL"))
        link = bound.enroll()
        self.assertEqual(link["externalId"], end_user)
        self.assertTrue(re.search(r"/enroll/[A-Za-z0-9_-]{43}$", link["enrollmentUrl"]))
        self.assertEqual(herald.enroll(external_id="py-someone")["externalId"], "py-someone")
        self.assertEqual(raised(ValidationError, lambda: herald.enroll()).fields, [{"field": "externalId", "in": "body", "problem": "is required"}])
        self.assertEqual(raised(PermissionError, lambda: bound.enroll(external_id="someone-else")).code, "forbidden")
        self.assertEqual(bound.get_reachability()["externalId"], end_user)

        revoked = herald.revoke_key(created["key"]["id"])
        self.assertEqual(revoked["revoked"], True)
        self.assertEqual(herald.revoke_key(created["key"]["id"]), revoked)
        raised(NotFoundError, lambda: herald.revoke_key("unknownkeyid0000"))


class AskTest(unittest.TestCase):
    def test_ask_read_withdraw(self) -> None:
        herald = client("HERALD_ASK_KEY")
        asked = herald.ask({"question": "Deploy to production?", "wait": False})
        self.assertRegex(asked["correlationId"], r"^ask_")
        self.assertEqual(
            {**asked, "liveUrl": "", "expiresAt": "", "createdAt": ""},
            {
                "correlationId": asked["correlationId"],
                "question": "Deploy to production?",
                "type": "confirm",
                "status": "pending",
                "answered": False,
                "options": [],
                "context": None,
                "placeholder": None,
                "agentName": None,
                "liveUrl": "",
                "pollUrl": f"http://localhost:8080/api/v1/server/ask/{asked['correlationId']}",
                "expiresInSeconds": int(env("HERALD_ASK_LIFETIME_SECONDS")),
                "expiresAt": "",
                "createdAt": "",
                "mode": "browser",
                "approvers": [],
                "answeredBy": None,
                "escalation": [],
            },
        )
        self.assertEqual(herald.get_ask(asked["correlationId"])["status"], "pending")
        waited = herald.get_ask(asked["correlationId"], wait=1)
        self.assertEqual(waited["status"], "timeout")
        self.assertTrue(waited.get("hint", "").startswith("No answer yet."))
        second = herald.ask({"question": "Roll back?", "wait": False})
        answered = herald.answer_ask(second["correlationId"], True)
        answered_by = answered["answeredBy"]
        assert answered_by is not None
        self.assertEqual((answered["status"], answered.get("value"), answered_by["kind"]), ("answered", "yes", "key"))
        self.assertEqual(raised(ConflictError, lambda: herald.answer_ask(second["correlationId"], "no")).code, "conflict")
        withdrawn = herald.withdraw_ask(asked["correlationId"])
        self.assertEqual((withdrawn["status"], withdrawn["answered"]), ("withdrawn", False))
        self.assertEqual(raised(ConflictError, lambda: herald.withdraw_ask(asked["correlationId"])).code, "conflict")
        self.assertEqual([record["correlationId"] for record in herald.list_asks(status="withdrawn", limit=1)["data"]], [asked["correlationId"]])
        self.assertEqual(raised(PermissionError, lambda: client("HERALD_PARTNER_KEY").ask({"question": "Sure?"})).code, "partner_decision_required")


class DecisionTest(unittest.TestCase):
    def test_create_replay_read_answer_cancel_reachability(self) -> None:
        herald = client()
        key = f"py-refund-{uuid.uuid4()}"
        body: DecisionRequest = {"question": "Refund order 1234?", "externalId": "user-0", "toolName": "refund", "toolTarget": "order/1234", "parameters": {"amount": 40}}
        opened = herald.create_decision(body, idempotency_key=key)
        self.assertRegex(opened["decisionId"], r"^dec_")
        self.assertEqual(
            (opened["status"], opened["approved"], opened["answer"], opened["audience"], opened["externalId"], opened["toolName"], opened["toolTarget"], opened["parameters"]),
            ("pending", False, None, "user", "user-0", "refund", "order/1234", {"amount": 40}),
        )
        self.assertEqual((opened["idempotencyKey"], opened["duplicate"], opened["pollUrl"]), (key, False, f"http://localhost:8080/api/v1/server/decisions/{opened['decisionId']}"))
        self.assertEqual(opened["reachability"], {"reachable": True, "browserSubscriptions": 1, "nativeAppDevices": 0})
        replay = herald.create_decision(body, idempotency_key=key)
        self.assertEqual(replay, {**opened, "expiresInSeconds": replay["expiresInSeconds"], "duplicate": True})
        raised(ConflictError, lambda: herald.create_decision({"question": "Something else?", "externalId": "user-0"}, idempotency_key=key))
        self.assertEqual(herald.get_decision(opened["decisionId"])["status"], "pending")

        answered = herald.answer_decision(opened["decisionId"], True)
        self.assertEqual((answered["status"], answered["approved"], answered["answer"]), ("answered", True, "yes"))
        raised(ConflictError, lambda: herald.answer_decision(opened["decisionId"], "no"))

        # Answered with this key: the key answered, through the API.
        key_id = env("HERALD_API_KEY")[len("pk_") :].split(".")[0]
        self.assertEqual(answered["answeredBy"], {"kind": "key", "id": key_id, "displayName": key_id, "channel": "api", "at": answered["answeredAt"]})

        team = herald.create_decision({"question": "Pick a size", "type": "select", "options": ["S", "M"], "audience": "team"})
        self.assertEqual(team["reachability"]["browserSubscriptions"], 2)
        cancelled = herald.cancel_decision(team["decisionId"])
        self.assertEqual((cancelled["status"], cancelled["approved"]), ("cancelled", False))
        self.assertEqual([decision["decisionId"] for decision in herald.list_decisions(status="cancelled", limit=1)["data"]], [team["decisionId"]])
        record = herald.list_decision_events(team["decisionId"])
        self.assertEqual([entry["kind"] for entry in record["data"] if entry["kind"] != "delivered"], ["opened", "cancelled"])
        self.assertEqual((record["data"][0]["seq"], record["data"][0]["prevHash"], record["hasMore"]), (1, "", False))
        first_page = herald.list_decision_events(team["decisionId"], limit=1)
        paged = first_page["data"] + herald.list_decision_events(team["decisionId"], cursor=first_page["nextCursor"])["data"]
        self.assertEqual(paged[: len(record["data"])], record["data"])
        raised(NotFoundError, lambda: herald.list_ask_events(team["decisionId"]))
        raised(ConflictError, lambda: herald.create_decision({"question": "Hello?", "externalId": "nobody", "requireReachable": True}))
        self.assertEqual(
            herald.get_reachability(external_id="user-1"),
            {"externalId": "user-1", "reachable": True, "browserSubscriptions": 1, "nativeAppDevices": 0, "channels": ["browser"]},
        )



    def test_approvers_refuse_others_and_answered_by_names_the_approver(self) -> None:
        agent = client()
        approver = client("HERALD_RUNTIME_KEY")
        approver_id = env("HERALD_RUNTIME_KEY")[len("pk_") :].split(".")[0]
        approvers: list[Approver] = [{"kind": "key", "id": approver_id}]
        escalation: list[EscalationStep] = [{"afterSeconds": 600, "channels": ["email"], "approvers": [{"kind": "email", "id": "cto@example.com"}]}]
        opened = agent.create_decision({"question": "Drop the staging database?", "approvers": approvers, "escalation": escalation})
        self.assertEqual((opened["approvers"], opened["answeredBy"], opened["escalation"]), (approvers, None, escalation))

        # The key that opened it is no approver: refused (403), and the decision stays open.
        refused = raised(PermissionError, lambda: agent.answer_decision(opened["decisionId"], "yes"))
        self.assertEqual((refused.status, refused.code), (403, "forbidden"))
        self.assertEqual(agent.get_decision(opened["decisionId"])["status"], "pending")

        answered = approver.answer_decision(opened["decisionId"], "no")
        answered_by: AnsweredBy = {"kind": "key", "id": approver_id, "displayName": approver_id, "channel": "api", "at": answered["answeredAt"] or ""}
        self.assertEqual((answered["status"], answered["approved"], answered["answeredBy"]), ("answered", False, answered_by))
        self.assertEqual(agent.get_decision(opened["decisionId"])["answeredBy"], answered_by)

class WebhookSecretTest(unittest.TestCase):
    def test_read_and_rotate(self) -> None:
        herald = client("HERALD_ASK_KEY")
        first = herald.get_webhook_secret()
        self.assertRegex(first["secret"], r"^whsec_[A-Za-z0-9+/]{43}=$")
        self.assertEqual(herald.get_webhook_secret(), first)
        rotated = herald.rotate_webhook_secret()
        self.assertNotEqual(rotated["secret"], first["secret"])
        self.assertIsNotNone(rotated["previousSecretExpiresAt"])
        raised(PermissionError, lambda: client("HERALD_RUNTIME_KEY").get_webhook_secret())


class SlackConnectionTest(unittest.TestCase):
    def test_none_yet_and_malformed(self) -> None:
        herald = client("HERALD_ASK_KEY")
        raised(NotFoundError, herald.get_slack_connection)
        raised(NotFoundError, herald.disconnect_slack)
        error = raised(ValidationError, lambda: herald.connect_slack({"botToken": "xoxp-a-user-token", "signingSecret": "0" * 32, "defaultChannel": "C0123456"}))
        self.assertEqual([field["field"] for field in error.fields], ["botToken"])


if __name__ == "__main__":
    unittest.main()
