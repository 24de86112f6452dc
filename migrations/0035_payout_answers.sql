-- An operator's answer to an off-ramp's payout that sends stablecoin back
-- (`RETURNED`, `REFUSED`) waits here for a second operator's confirmation
-- before it applies (`conversions.payout_outcome`); `answered_by` and
-- `confirmed_by` name the deciders as a mint's `recorded_by` does.
CREATE TABLE payout_answers (
    conversion_id TEXT PRIMARY KEY,
    outcome TEXT NOT NULL,
    reason TEXT NOT NULL,
    answered_by TEXT NOT NULL,
    answered_at BIGINT NOT NULL,
    confirmed_by TEXT,
    confirmed_at BIGINT
);
