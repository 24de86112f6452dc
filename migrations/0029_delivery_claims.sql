-- A claim reads each active webhook's earliest due deliveries: with this
-- index a webhook holding many deliveries not yet due (a failing receiver
-- waiting out its retries) costs one index probe, not a scan of them all.
CREATE INDEX deliveries_due_by_webhook ON deliveries (webhook_id, next_attempt_at, event_seq)
    WHERE state = 'PENDING';
