"""Drives device-core through its generated Python bindings: every surface,
including a sync against a fake hub implemented in Python behind the
HttpTransport foreign trait.

Run by device-core's Rust test `python`: `bindings::python_suite` generates
the bindings of the library that test was built with into a temp dir and puts
it on PYTHONPATH.
"""

import base64
import json
import os
import tempfile
import threading
import unittest
import uuid

import device_core as dc

DEVICE = "0190a1b2-0000-7000-8000-0000000000d1"
PERSON = "0190a1b2-0000-7000-8000-0000000000e1"
TENANT = "0190a1b2-0000-7000-8000-0000000000f1"
PERSONA = "0190a1b2-0000-7000-8000-0000000000f2"


def open_store(test):
    tmp = tempfile.TemporaryDirectory()
    test.addCleanup(tmp.cleanup)
    return dc.DeviceStore.open(os.path.join(tmp.name, "device.db")), tmp.name


class FakeHub(dc.HttpTransport):
    """The hub's two sync routes, in memory. `fail_on` maps a batch request
    number to 'request' (never arrives) or 'answer' (stored, answer lost)."""

    def __init__(self, fail_on=None, policies=None):
        self.stored = {}
        self.batch_requests = 0
        self.fail_on = fail_on or {}
        self.policies = policies or []

    def send(self, request):
        if request.method == "GET" and request.path == "/api/hdk/sync/policies":
            body = {"success": True, "data": {"event_types": self.policies}}
            return dc.HttpResponse(status=200, body=json.dumps(body).encode())
        assert (request.method, request.path) == ("POST", "/api/hdk/sync/batches"), request.path
        self.batch_requests += 1
        fault = self.fail_on.get(self.batch_requests)
        if fault == "request":
            raise dc.DeviceError.Transport("offline")
        batch = json.loads(bytes(request.body))
        assert batch["device_uuid"] == DEVICE
        ack = {"batch_id": batch["batch_id"], "accepted": [], "duplicates": [], "rejected": []}
        for event in batch["events"]:
            key = event["idempotency_key"]
            if key in self.stored:
                ack["duplicates"].append(key)
            else:
                self.stored[key] = event
                ack["accepted"].append(key)
        if fault == "answer":
            raise dc.DeviceError.Transport("connection reset")
        return dc.HttpResponse(status=200, body=json.dumps(ack).encode())


class AppKey(dc.DeviceKey):
    """What an app does over the Secure Enclave, here over a software key."""

    def __init__(self):
        self.key = dc.SoftwareDeviceKey.generate()

    def method(self):
        return "secure-enclave"

    def key_ref(self):
        return "keychain:attest"

    def public_key(self):
        return self.key.public_key()

    def sign(self, message):
        return self.key.sign(message)


class OutboxTests(unittest.TestCase):
    def test_enqueue_is_idempotent_and_drain_is_oldest_first(self):
        store, _ = open_store(self)
        first = store.enqueue("visit.logged.v1", '{"n": 1}', "k1")
        self.assertTrue(first.inserted)
        again = store.enqueue("visit.logged.v1", '{"n": 2}', "k1")
        self.assertFalse(again.inserted)
        self.assertEqual(again.event_id, first.event_id)
        outcomes = store.enqueue_batch([
            dc.NewEvent(event_type="visit.logged.v1", payload_json=json.dumps({"n": i}), idempotency_key=f"b{i}")
            for i in range(5)
        ])
        self.assertEqual([o.inserted for o in outcomes], [True] * 5)
        drained = store.drain(4)
        self.assertEqual(drained.count, 4)
        self.assertEqual([r.idempotency_key for r in drained.rows], ["k1", "b0", "b1", "b2"])
        self.assertEqual(json.loads(drained.rows[0].payload_json), {"n": 1})
        self.assertTrue(all(r.drained_at for r in drained.rows))
        self.assertEqual(store.drain(10).count, 2)
        self.assertEqual(store.drain(10).count, 0)
        stats = store.outbox_stats()
        self.assertEqual((stats.total, stats.undrained, stats.sync_pending), (6, 0, 6))

    def test_bad_payload_is_a_validation_error(self):
        store, _ = open_store(self)
        with self.assertRaises(dc.DeviceError.Validation) as caught:
            store.enqueue("t", "{nope", "k")
        self.assertIn("payload", caught.exception.reason)

    def test_enqueues_from_many_threads(self):
        store, _ = open_store(self)

        def work(t):
            for i in range(25):
                store.enqueue("t", "{}", f"{t}-{i}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(store.outbox_stats().total, 100)

    def test_events_survive_reopening(self):
        store, tmp = open_store(self)
        self.assertEqual(store.schema_version(), 1)
        store.enqueue("t", '{"kept": true}', "durable")
        del store
        again = dc.DeviceStore.open(os.path.join(tmp, "device.db"))
        self.assertEqual(again.drain(1).rows[0].idempotency_key, "durable")


class PolicyTests(unittest.TestCase):
    def test_unregistered_type_is_a_clear_error(self):
        store, _ = open_store(self)
        with self.assertRaises(dc.DeviceError.UnregisteredEventType) as caught:
            store.resolve("nobody.v1", "{}", "{}")
        self.assertEqual(caught.exception.event_type, "nobody.v1")

    def test_each_policy_through_the_registry(self):
        store, _ = open_store(self)
        self.assertTrue(store.register_event_type("lww.v1", dc.ConflictPolicy.LWW))
        self.assertFalse(store.register_event_type("lww.v1", dc.ConflictPolicy.LWW))
        store.register_event_type("merge.v1", dc.ConflictPolicy.MERGE)
        store.register_event_type("log.v1", dc.ConflictPolicy.EVENT_SOURCING)
        store.register_event_type("doc.v1", dc.ConflictPolicy.CRDT)
        store.register_event_type("consent.v1", dc.ConflictPolicy.HUMAN_REVIEW)

        a = {"timestamp": "2026-01-01T00:00:00Z", "v": "old"}
        b = {"timestamp": "2026-01-01T00:00:01Z", "v": "new"}
        for x, y in [(a, b), (b, a)]:
            r = store.resolve("lww.v1", json.dumps(x), json.dumps(y))
            self.assertEqual(json.loads(r.result_json), b)

        r = store.resolve("merge.v1", '{"a": 1, "x": {"y": 1}}', '{"b": 2, "x": {"y": 2}}')
        self.assertEqual(json.loads(r.result_json), {"a": 1, "b": 2, "x": {"y": 2}})
        self.assertEqual([(c.field, c.input_a_json, c.input_b_json) for c in r.conflicts], [("/x/y", "1", "2")])

        r = store.resolve("log.v1", '[{"timestamp": 2, "e": "b"}]', '{"timestamp": 1, "e": "a"}')
        self.assertEqual(json.loads(r.result_json), {"events": [{"timestamp": 1, "e": "a"}, {"timestamp": 2, "e": "b"}]})

        base = dc.crdt_update(None, '{"title": "draft"}')
        doc_a = dc.crdt_update(base, '{"from_a": 1}')
        doc_b = dc.crdt_update(base, '{"from_b": [true]}')
        ab = json.loads(store.resolve("doc.v1", json.dumps(doc_a), json.dumps(doc_b)).result_json)
        ba = json.loads(store.resolve("doc.v1", json.dumps(doc_b), json.dumps(doc_a)).result_json)
        self.assertEqual(ab["document"], {"title": "draft", "from_a": 1, "from_b": [True]})
        self.assertEqual(ab["heads"], ba["heads"])

        r = store.resolve("consent.v1", '{"v": "a"}', '{"v": "b"}')
        self.assertEqual(r.status, "pending_review")
        self.assertIsNone(r.result_json)
        pending = store.pending_reviews()
        self.assertEqual([p.review_id for p in pending], [r.review_id])
        self.assertEqual(store.decide_review(r.review_id, dc.ReviewChoice.A), '{"v":"a"}')
        self.assertEqual(store.pending_reviews(), [])
        with self.assertRaises(dc.DeviceError.Conflict):
            store.decide_review(r.review_id, dc.ReviewChoice.B)

    def test_pure_resolution_without_a_store(self):
        out = json.loads(dc.resolve_conflict(dc.ConflictPolicy.MERGE, '{"a": 1}', '{"a": 1, "b": 2}'))
        self.assertEqual(out, {"policy": "merge", "status": "resolved", "result": {"a": 1, "b": 2}, "conflicts": []})
        self.assertEqual(dc.parse_conflict_policy("event-sourcing"), dc.ConflictPolicy.EVENT_SOURCING)
        with self.assertRaises(dc.DeviceError.Validation):
            dc.parse_conflict_policy("newest")


class AttestationTests(unittest.TestCase):
    def test_envelope_built_by_a_python_key_verifies(self):
        key = AppKey()
        envelope = dc.build_attestation(key, DEVICE, "hub-challenge-1")
        parsed = json.loads(envelope)
        self.assertEqual(parsed["method"], "secure-enclave")
        self.assertEqual(base64.b64decode(parsed["public_key"]), key.public_key())
        verified = dc.verify_attestation(envelope, "hub-challenge-1")
        self.assertEqual((verified.device_uuid, verified.key_ref), (DEVICE, "keychain:attest"))
        with self.assertRaises(dc.DeviceError.Attestation):
            dc.verify_attestation(envelope, "another-challenge")
        parsed["device_uuid"] = str(uuid.uuid4())
        with self.assertRaises(dc.DeviceError.Attestation):
            dc.verify_attestation(json.dumps(parsed), "hub-challenge-1")

    def test_a_failing_key_surfaces_its_error(self):
        class BrokenKey(AppKey):
            def sign(self, message):
                raise dc.DeviceError.Crypto("key invalidated by biometry change")

        with self.assertRaises(dc.DeviceError.Crypto) as caught:
            dc.build_attestation(BrokenKey(), DEVICE, "c")
        self.assertIn("biometry", caught.exception.reason)


class IdentityTests(unittest.TestCase):
    def test_claims_with_and_without_envelopes(self):
        store, tmp = open_store(self)
        bare = store.upsert_identity_claim(DEVICE, PERSON, None, None)
        self.assertIsNone(bare.biometric_template_envelope)
        secret = b"TEMPLATE-BYTES-THAT-MUST-NOT-LEAK"
        pin = base64.b64encode(b"PIN-ENVELOPE").decode()
        store.upsert_identity_claim(DEVICE, PERSON, base64.b64encode(secret).decode(), pin)
        claims = store.identity_claims(DEVICE)
        self.assertEqual(len(claims), 1)
        self.assertEqual(base64.b64decode(claims[0].biometric_template_envelope), secret)
        self.assertEqual(claims[0].pin_envelope, pin)
        with open(os.path.join(tmp, "device.db"), "rb") as f:
            raw = f.read()
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), "rb") as f:
                raw += f.read()
        self.assertNotIn(secret, raw)
        with self.assertRaises(dc.DeviceError.Validation):
            store.upsert_identity_claim("not-a-uuid", PERSON, None, None)

    def test_app_held_key(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        path = os.path.join(tmp.name, "k.db")
        dc.DeviceStore.open_with_key(path, bytes(range(32))).upsert_identity_claim(DEVICE, PERSON, "AAEC", None)
        with self.assertRaises(dc.DeviceError.Crypto):
            dc.DeviceStore.open_with_key(path, bytes(32))
        again = dc.DeviceStore.open_with_key(path, bytes(range(32)))
        self.assertEqual(again.identity_claims(DEVICE)[0].biometric_template_envelope, "AAEC")

    def test_newest_permission_snapshot(self):
        store, _ = open_store(self)
        self.assertIsNone(store.latest_permission_snapshot(DEVICE))
        store.record_permission_snapshot(DEVICE, TENANT, PERSONA, '{"camera": "denied"}', "2026-01-01T00:00:00Z")
        newest = store.record_permission_snapshot(DEVICE, TENANT, PERSONA, '{"camera": "granted"}', "2026-02-01T00:00:00Z")
        store.record_permission_snapshot(DEVICE, TENANT, PERSONA, '{"camera": "ask"}', "2026-01-15T00:00:00Z")
        latest = store.latest_permission_snapshot(DEVICE)
        self.assertEqual(latest.snapshot_id, newest.snapshot_id)
        self.assertEqual(json.loads(latest.permission_set_json), {"camera": "granted"})
        self.assertEqual(latest.taken_at, "2026-02-01T00:00:00.000000Z")


class SyncTests(unittest.TestCase):
    def fill(self, store, n):
        store.enqueue_batch([
            dc.NewEvent(event_type="visit.logged.v1", payload_json=json.dumps({"i": i}), idempotency_key=f"key-{i:03}")
            for i in range(n)
        ])

    def test_push_in_batches(self):
        store, _ = open_store(self)
        self.fill(store, 23)
        hub = FakeHub()
        report = store.push_outbox(hub, DEVICE, 10)
        self.assertEqual((report.batches, report.accepted, report.duplicates, report.pending), (3, 23, 0, 0))
        self.assertEqual(sorted(hub.stored), [f"key-{i:03}" for i in range(23)])
        self.assertEqual(hub.stored["key-005"]["payload"], {"i": 5})

    def test_interrupted_syncs_resume_without_loss_or_duplicates(self):
        store, _ = open_store(self)
        self.fill(store, 30)
        hub = FakeHub(fail_on={2: "answer", 3: "request"})
        with self.assertRaises(dc.DeviceError.Transport):
            store.push_outbox(hub, DEVICE, 10)  # batch 1 ok, batch 2 answer lost
        self.assertEqual(store.outbox_stats().sync_pending, 20)
        with self.assertRaises(dc.DeviceError.Transport):
            store.push_outbox(hub, DEVICE, 10)  # request 3 never arrives
        store.enqueue("visit.logged.v1", "{}", "while-offline")
        report = store.push_outbox(hub, DEVICE, 10)
        self.assertEqual(report.pending, 0)
        self.assertEqual(report.duplicates, 10)  # batch 2, re-sent under the same keys
        self.assertEqual(len(hub.stored), 31)
        self.assertEqual(store.outbox_stats().sync_accepted, 31)

    def test_pull_policies_registers_event_types(self):
        store, _ = open_store(self)
        hub = FakeHub(policies=[
            {"event_type": "note.v1", "conflict_policy": "crdt"},
            {"event_type": "consent.v1", "conflict_policy": "human-review", "retention_class": "regulated"},
            {"event_type": "odd.v1", "conflict_policy": "coin-flip"},
        ])
        report = store.pull_policies(hub)
        self.assertEqual((report.updated, report.skipped), (2, ["odd.v1"]))
        types = {t.event_type: t for t in store.event_types()}
        self.assertEqual(types["consent.v1"].conflict_policy, dc.ConflictPolicy.HUMAN_REVIEW)
        self.assertEqual(types["consent.v1"].retention_class, "regulated")
        self.assertEqual(types["note.v1"].source, "hub")
        r = store.resolve("consent.v1", "1", "2")
        self.assertEqual(r.status, "pending_review")


if __name__ == "__main__":
    unittest.main(verbosity=2)
