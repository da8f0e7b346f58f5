"""A user's first steps with the generated Python client (platform_hub_client,
from clients/generate.sh): sign up a tenant, issue an API key with scopes,
create a CRM contact with the key and read it back, and receive the
contact's webhook on a receiver this script runs on loopback, its Standard
Webhooks signature checked with the official `standardwebhooks` package.

Usage: python story.py HUB_URL   (a hub in development mode: it delivers
webhooks to loopback addresses). Exits non-zero naming the first mismatch.
"""

import queue
import secrets
import sys
import threading
import traceback
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NoReturn

from standardwebhooks import Webhook, WebhookVerificationError

try:
    from platform_hub_client import AuthenticatedClient, Client
    from platform_hub_client.api.sdk_api_keys import sdk_api_keys_issue_for_tenant
    from platform_hub_client.api.sdk_crm import sdk_crm_create_contact, sdk_crm_get_contact
    from platform_hub_client.api.sdk_identity import sdk_identity_signup_tenant
    from platform_hub_client.api.sdk_webhook import sdk_webhook_create_endpoint
    from platform_hub_client.models import (
        DataCrmContact,
        DataIssuedApiKey,
        DataSignedUpTenant,
        DataWebhookEndpointWithSecret,
        ErrorBody,
        NewCrmContact,
        NewTenantApiKey,
        NewWebhookEndpoint,
        TenantSignup,
    )
    from platform_hub_client.types import Response
except ImportError as e:  # the document no longer has what the story uses
    sys.exit(f"python story: FAILED: the generated client lacks what the story uses: {e}")

WEBHOOK_WAIT_SECONDS = 20
SCOPES = ["crm.contact.read", "crm.contact.write", "webhook.endpoint.write"]


def fail(message: str) -> NoReturn:
    sys.exit(f"python story: FAILED: {message}")


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


def answer(step: str, call: Callable[[], Response], status: int, kind: type):
    """The parsed body of `call()`'s answer, which must be `status` and `kind`."""
    try:
        response = call()
    except Exception as e:  # an answer the generated client cannot read as the document says
        fail(f"{step}: {type(e).__name__}: {e}")
    if response.status_code != status or not isinstance(response.parsed, kind):
        fail(f"{step}: expected {status} {kind.__name__}, got {int(response.status_code)} {response.content[:500]!r}")
    return response.parsed


class Receiver(BaseHTTPRequestHandler):
    """Hands every POST (headers, body) to `deliveries` and answers 204."""

    deliveries: "queue.Queue[tuple[dict[str, str], bytes]]" = queue.Queue()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        self.deliveries.put(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main(base: str) -> None:
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    hook_url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"

    # 1. Sign up a tenant: the owner's token comes back.
    unique = secrets.token_hex(4)
    public = Client(base_url=base, raise_on_unexpected_status=True)
    signup = TenantSignup(
        email=f"py-{unique}@example.com",
        password="correct horse battery",
        org_name="Python story",
        app_id=f"py-story-{unique}",
        display_name="Py",
        region="eu-west-1",
    )
    tenant = answer(
        "sign-up", lambda: sdk_identity_signup_tenant.sync_detailed(client=public, body=signup), 201, DataSignedUpTenant
    ).data
    check(tenant.status == "trial", f"sign-up: status {tenant.status!r}, expected 'trial'")
    owner = AuthenticatedClient(base_url=base, token=tenant.token, raise_on_unexpected_status=True)

    # 2. Issue an API key with the scopes the rest needs.
    new_key = NewTenantApiKey(tenant_id=uuid.UUID(tenant.tenant_id), name="python story", scopes=SCOPES)
    key = answer(
        "issue key",
        lambda: sdk_api_keys_issue_for_tenant.sync_detailed(client=owner, body=new_key),
        201,
        DataIssuedApiKey,
    ).data
    check(key.api_key.startswith("pk_live_"), f"issue key: secret {key.api_key[:8]!r}…, expected pk_live_…")
    check(sorted(key.scopes) == sorted(SCOPES), f"issue key: scopes {key.scopes}, expected {SCOPES}")
    check(key.tenant_id == tenant.tenant_id, f"issue key: tenant {key.tenant_id}, expected {tenant.tenant_id}")
    api = AuthenticatedClient(base_url=base, token=key.api_key, raise_on_unexpected_status=True)

    # 3. With the key: a webhook endpoint on this script's receiver.
    endpoint_body = NewWebhookEndpoint(url=hook_url, event_types=["crm.contact.created.v1"], description="python story")
    endpoint = answer(
        "webhook endpoint",
        lambda: sdk_webhook_create_endpoint.sync_detailed(client=api, body=endpoint_body),
        201,
        DataWebhookEndpointWithSecret,
    ).data
    check(
        endpoint.url == hook_url and endpoint.status == "active", f"webhook endpoint: {endpoint.url} {endpoint.status}"
    )
    check(endpoint.secret.startswith("whsec_"), "webhook endpoint: the secret is not whsec_…")

    # 4. With the key: a contact, then read back.
    contact_body = NewCrmContact(name="Ada Lovelace", emails=["Ada@Example.com"], company="Analytical Engines")
    made = answer(
        "create contact",
        lambda: sdk_crm_create_contact.sync_detailed(client=api, body=contact_body),
        201,
        DataCrmContact,
    ).data
    check(made.name == "Ada Lovelace", f"create contact: name {made.name!r}")
    check(made.emails == ["ada@example.com"], f"create contact: emails {made.emails}, expected the address lowercased")
    check(
        made.created_by == key.synthetic_persona_id,
        f"create contact: created_by {made.created_by}, expected the key's persona {key.synthetic_persona_id}",
    )
    read = answer(
        "read contact", lambda: sdk_crm_get_contact.sync_detailed(made.contact_id, client=api), 200, DataCrmContact
    ).data
    check(
        (read.contact_id, read.name, read.emails, read.company)
        == (made.contact_id, "Ada Lovelace", ["ada@example.com"], "Analytical Engines"),
        f"read contact: {read.to_dict()} differs from what was created",
    )
    # Without a credential the same read is a typed refusal.
    refused = answer(
        "read contact without a credential",
        lambda: sdk_crm_get_contact.sync_detailed(made.contact_id, client=public),
        401,
        ErrorBody,
    )
    check(refused.error == "Unauthorized", f"read contact without a credential: {refused.error}")

    # 5. The contact's event arrives at the receiver, signed.
    try:
        headers, body = Receiver.deliveries.get(timeout=WEBHOOK_WAIT_SECONDS)
    except queue.Empty:
        fail(f"webhook: nothing arrived at {hook_url} within {WEBHOOK_WAIT_SECONDS} s")
    try:
        message = Webhook(endpoint.secret).verify(body, headers)
    except WebhookVerificationError as e:
        fail(f"webhook: the signature does not verify ({e}); headers {headers}")
    check(
        message["type"] == "crm.contact.created.v1",
        f"webhook: type {message['type']!r}, expected crm.contact.created.v1",
    )
    check(
        message["tenant_id"] == tenant.tenant_id, f"webhook: tenant {message['tenant_id']}, expected {tenant.tenant_id}"
    )
    check(
        message["data"]["contact_id"] == str(made.contact_id),
        f"webhook: data {message['data']}, expected contact {made.contact_id}",
    )
    receiver.shutdown()
    summary = f"tenant {tenant.tenant_id}, contact {made.contact_id}, webhook {headers['webhook-id']} verified"
    print(f"python story: ok ({summary})")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python story.py HUB_URL")
    try:
        main(sys.argv[1].rstrip("/"))
    except Exception as e:  # say so in one line, after the traceback
        traceback.print_exc()
        fail(f"{type(e).__name__}: {e}")
