"""Drives the API through the client openapi-python-client generated from
/openapi.json: an account's deposits, a transfer created and read back, and
a wrong key refused with the API's error shape. Prints what it saw as JSON
for the Rust test to check against the service.

Environment: BASE_URL, API_KEY, ACCOUNT_ID, CHAIN, DESTINATION, SYMBOL, AMOUNT.
"""

import json
import os
import uuid

from custody_indexer_client import AuthenticatedClient
from custody_indexer_client.api.deposits import list_deposits
from custody_indexer_client.api.transfers import create_transfer, get_transfer
from custody_indexer_client.models import (
    AddressDestination,
    Chain,
    DepositList,
    ErrorBody,
    Transfer,
    TransferRequest,
)

env = os.environ
client = AuthenticatedClient(base_url=env["BASE_URL"], token=env["API_KEY"], raise_on_unexpected_status=True)

deposits = list_deposits.sync(client=client, account_id=env["ACCOUNT_ID"])
assert isinstance(deposits, DepositList), deposits

request = TransferRequest(
    request_id=str(uuid.uuid4()),
    account_id=env["ACCOUNT_ID"],
    amount=env["AMOUNT"],
    currency_symbol=env["SYMBOL"],
    address_destination=AddressDestination(address=env["DESTINATION"], chain=Chain(env["CHAIN"])),
)
created = create_transfer.sync_detailed(client=client, body=request)
assert created.status_code == 201 and isinstance(created.parsed, Transfer), created
read = get_transfer.sync(client=client, transfer_id=created.parsed.id)
assert isinstance(read, Transfer), read

stranger = AuthenticatedClient(base_url=env["BASE_URL"], token="cik_not_a_key")
refused = list_deposits.sync_detailed(client=stranger, account_id=env["ACCOUNT_ID"])
assert isinstance(refused.parsed, ErrorBody), refused

print(json.dumps({
    "deposits": [d.to_dict() for d in deposits.deposits],
    "created": created.parsed.to_dict(),
    "read": read.to_dict(),
    "refused": {"status": int(refused.status_code), "code": refused.parsed.code},
}))
