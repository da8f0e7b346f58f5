"""Drives the hub through a client generated from its own OpenAPI document
by a stock generator (openapi-python-client): typed requests out, typed
answers back. Run by tests/fuzz/run.sh with the generated package `client`
on PYTHONPATH; argv: base URL, tenant token.
"""

import sys

from client import AuthenticatedClient, Client
from client.api.catalogue import catalogue_capabilities
from client.api.sdk_geo import sdk_geo_canonicalise, sdk_geo_get_address
from client.models import ErrorBody, NewGeoAddress

base, token = sys.argv[1], sys.argv[2]
public = Client(base_url=base)
tenant = AuthenticatedClient(base_url=base, token=token)

index = catalogue_capabilities.sync(client=public)
assert index["version"] == "2026.07.21", index
assert any(a["path"] == "/api/geo/addresses" for a in index["apis"]), "the index lists the geo routes"

body = NewGeoAddress.from_dict({"lines": [" 1  Main St "], "locality": "Springfield", "country_code": "us"})
made = sdk_geo_canonicalise.sync_detailed(client=tenant, body=body)
assert made.status_code in (200, 201), made
address = made.parsed.data.address
assert address.lines == ["1 Main St"] and address.country_code == "US", address

again = sdk_geo_get_address.sync(address.address_id, client=tenant)
assert again.data.address.canonical == address.canonical, again

refused = sdk_geo_get_address.sync(address.address_id, client=public)
assert isinstance(refused, ErrorBody) and refused.error == "Unauthorized", refused
print("generated client: ok")
