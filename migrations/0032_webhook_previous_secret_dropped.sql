-- Webhook signing secrets are sealed at rest from this release on (with the
-- personal-data key, when the store is first opened with it). The row's own
-- copy of the last rotated-out secret, kept for releases before
-- webhook_previous_keys (migration 0022), is read by nothing: cleared, so no
-- signing secret stays in plaintext.
UPDATE webhooks SET previous_secret = NULL WHERE previous_secret IS NOT NULL;
