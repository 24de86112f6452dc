-- An off-ramp's payout is handed to the bank by a worker step outside the
-- transaction that decides it: claimed (`payout_claimed_at`, so one
-- instance calls the bank at a time), paid out under the off-ramp's id as
-- the idempotency key, then the bank's reference recorded with the
-- hand-off (`payout_reference`).
ALTER TABLE conversions ADD COLUMN payout_claimed_at BIGINT;
ALTER TABLE conversions ADD COLUMN payout_reference TEXT;
