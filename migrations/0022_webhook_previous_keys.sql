-- Signing keys rotated out of a webhook, each signing beside the current key
-- until its own expiry: a second rotation within the overlap keeps the first
-- previous key valid. A rotation keeps at most two that have not expired
-- (a delivery carries at most three signatures) and drops the others.
CREATE TABLE webhook_previous_keys (
    webhook_id TEXT NOT NULL REFERENCES webhooks (id),
    key_id TEXT NOT NULL,
    secret TEXT NOT NULL,
    rotated_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (webhook_id, key_id)
);

-- The one previous key a webhook held so far. Its id was not kept; it was
-- rotated out when the current key was made. webhooks.previous_secret and
-- previous_key_expires_at are still written at every rotation (the newest
-- previous key), so an instance of the release before this one, running
-- beside a newer one during an upgrade, still signs with that key.
INSERT INTO webhook_previous_keys (webhook_id, key_id, secret, rotated_at, expires_at)
SELECT id, 'before-' || signing_key_id, previous_secret, signing_key_created_at, previous_key_expires_at
FROM webhooks
WHERE previous_secret IS NOT NULL AND previous_key_expires_at IS NOT NULL;
