"""device-core syncing with a running hub, through the real FFI.

Run by the hub's integration test `device_sync` (which starts the hub and
passes HUB_URL, HUB_API_KEY and DEVICE_UUID); the app's side of the
transport is plain urllib, as a Python app would write it.
"""

import json
import os
import tempfile
import unittest
import urllib.error
import urllib.request

import device_core as dc

HUB = os.environ["HUB_URL"]
KEY = os.environ["HUB_API_KEY"]
DEVICE = os.environ["DEVICE_UUID"]


class HubTransport(dc.HttpTransport):
    """HTTP to the hub with the app's API key; `lose_answer_of` names batch
    requests whose answer is dropped after the hub processed them."""

    def __init__(self, lose_answer_of=()):
        self.batches = 0
        self.lose_answer_of = set(lose_answer_of)

    def send(self, request):
        headers = {"Authorization": f"Bearer {KEY}"}
        if request.content_type:
            headers["Content-Type"] = request.content_type
        data = bytes(request.body) if request.method != "GET" else None
        req = urllib.request.Request(HUB + request.path, data=data, method=request.method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as res:
                status, body = res.status, res.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        except OSError as e:
            raise dc.DeviceError.Transport(str(e))
        if request.path.endswith("/batches"):
            self.batches += 1
            if self.batches in self.lose_answer_of:
                raise dc.DeviceError.Transport("connection reset after the hub answered")
        return dc.HttpResponse(status=status, body=body)


class HubSyncTests(unittest.TestCase):
    def test_policies_then_an_interrupted_push_that_resumes(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        store = dc.DeviceStore.open(os.path.join(tmp.name, "device.db"))

        pulled = store.pull_policies(HubTransport())
        self.assertGreaterEqual(pulled.updated, 228)
        types = {t.event_type: t for t in store.event_types()}
        self.assertEqual(types["field.visit.logged.v1"].conflict_policy, dc.ConflictPolicy.MERGE)

        store.enqueue_batch([
            dc.NewEvent(event_type="field.visit.logged.v1", payload_json=json.dumps({"i": i}), idempotency_key=f"visit-{i:03}")
            for i in range(25)
        ])
        store.enqueue("nobody.registered.this.v1", "{}", "stray")
        flaky = HubTransport(lose_answer_of={2})
        with self.assertRaises(dc.DeviceError.Transport):
            store.push_outbox(flaky, DEVICE, 10)
        report = store.push_outbox(flaky, DEVICE, 10)
        self.assertEqual(report.pending, 0)
        # The batch whose answer was lost comes back as duplicates, not twice.
        self.assertEqual(report.duplicates, 10)
        self.assertEqual(report.rejected, 1)
        again = store.push_outbox(HubTransport(), DEVICE, 10)
        self.assertEqual((again.batches, again.accepted, again.pending), (0, 0, 0))

        # The same policy code resolves on the device as on the hub.
        a = json.dumps({"title": "A", "notes": "x"})
        b = json.dumps({"title": "B", "done": True})
        local = store.resolve("field.visit.logged.v1", a, b)
        req = urllib.request.Request(HUB + "/api/hdk/sync/resolve", method="POST", headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
                                     data=json.dumps({"event_type": "field.visit.logged.v1", "input_a": json.loads(a), "input_b": json.loads(b)}).encode())
        with urllib.request.urlopen(req, timeout=10) as res:
            remote = json.load(res)["data"]
        self.assertEqual(json.loads(local.result_json), remote["result"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
