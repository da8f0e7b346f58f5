"""Verifies deliveries the hub signed with the official Standard Webhooks
package (standardwebhooks). stdin: JSON {"secrets": [...], "deliveries":
[{"headers": {...}, "body": "..."}]}; stdout: JSON {"verified": [[bool per
secret] per delivery]}. Run by the hub's API test `webhooks`.
"""

import json
import sys

from standardwebhooks.webhooks import Webhook

job = json.load(sys.stdin)
verified = []
for delivery in job["deliveries"]:
    row = []
    for secret in job["secrets"]:
        try:
            Webhook(secret).verify(delivery["body"], delivery["headers"])
            row.append(True)
        except Exception:  # the package raises WebhookVerificationError
            row.append(False)
    verified.append(row)
json.dump({"verified": verified}, sys.stdout)
