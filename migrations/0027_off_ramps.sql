-- Off-ramps: a client's stablecoin paid out to one of its bank accounts.
--
-- `request_fingerprint` is what the client asked, so the same `request_id`
-- with another request is told apart. `transfer_id` is the transfer that
-- moves the stablecoin from the account to the platform's settlement
-- wallet (held from submission like any transfer). The bank's answer to the
-- payout is `payout_outcome` (PAID, RETURNED or REFUSED, with
-- `payout_reason`): a sandbox bank's is known at submission and applies
-- `payout_due_at`, set when the payout is handed to the bank
-- (`payout_handed_at`); a production one is recorded by an operator.
-- `refund_transfer_id` sends a refused or returned payout's stablecoin back
-- from the settlement wallet (route SETTLEMENT): the latest of
-- `refund_attempts`, the next not before `refund_after`.
ALTER TABLE conversions ADD COLUMN request_fingerprint TEXT;
ALTER TABLE conversions ADD COLUMN transfer_id TEXT;
ALTER TABLE conversions ADD COLUMN refund_transfer_id TEXT;
ALTER TABLE conversions ADD COLUMN refund_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversions ADD COLUMN refund_after BIGINT;
ALTER TABLE conversions ADD COLUMN payout_outcome TEXT;
ALTER TABLE conversions ADD COLUMN payout_reason TEXT;
ALTER TABLE conversions ADD COLUMN payout_handed_at BIGINT;
ALTER TABLE conversions ADD COLUMN payout_due_at BIGINT;
CREATE UNIQUE INDEX conversions_by_transfer ON conversions (transfer_id);
CREATE UNIQUE INDEX conversions_by_refund ON conversions (refund_transfer_id);
