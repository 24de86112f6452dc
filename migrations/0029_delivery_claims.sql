-- A claim reads each active webhook's earliest due deliveries: with this
-- index a webhook holding many deliveries not yet due (a failing receiver
-- waiting out its retries) costs one index probe, not a scan of them all.
CREATE INDEX deliveries_due_by_webhook ON deliveries (webhook_id, next_attempt_at, event_seq)
    WHERE state = 'PENDING';

-- Whether an earlier event of the same resource is still pending for the
-- same webhook: only pending deliveries are asked about, so only they are
-- indexed; and an index that matches the question whole is the one the
-- planner takes even before a new store's statistics exist.
CREATE INDEX deliveries_pending_in_order ON deliveries (webhook_id, resource_id, event_seq)
    WHERE state = 'PENDING';
DROP INDEX deliveries_in_order;
